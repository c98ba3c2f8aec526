package effectlog

import (
	"cmp"
	"context"
	"fmt"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// TriggerAnswered is the trigger of the record that says a committed call's
// answer was written to its client.
const TriggerAnswered = "Answer reached the client"

// Answered records that the answer of effect id (a committed effect, or a
// replay of one) was written to the client that made the call. It is
// recorded on the committed effect, the call, after the answer was written:
// a process that dies between the two leaves the call unanswered, and a
// repeat is then a retry, answered from the log (see
// InterceptRequest.RunAgainAnswered). An answer already recorded writes
// nothing. It returns the call's effect.
func (s *Service) Answered(ctx context.Context, id uint64, c model.Change) (model.Effect, error) {
	if err := model.ValidChange(c); err != nil {
		return model.Effect{}, err
	}
	var out model.Effect
	err := s.update(ctx, s.answer(id, c, &out))
	return out, err
}

// AnsweredUnflushed records what Answered does without waiting for the
// record to be durable, and may return before it is written (an error
// then goes unreported). Losing it in a crash loses only the record, which
// is Answered's own case of a process dying before it: a repeat of the
// call is replayed rather than run. The next durable write of this
// process makes it durable, and a repeat's intercept sees it.
func (s *Service) AnsweredUnflushed(ctx context.Context, id uint64, c model.Change) error {
	if err := model.ValidChange(c); err != nil {
		return err
	}
	return s.engine.UpdateUnflushed(ctx, s.answer(id, c, new(model.Effect)))
}

// answer is the transaction of Answered: it sets *out to the call's effect.
func (s *Service) answer(id uint64, c model.Change, out *model.Effect) func(tx storage.WriteTx) error {
	return func(tx storage.WriteTx) error {
		e, err := tx.Effect(id)
		if err != nil {
			return err
		}
		reason := c.Reason
		if e.ReplayOf != nil {
			if reason == "" {
				reason = fmt.Sprintf("answered by its replay, effect %d", e.ID)
			}
			if e, err = tx.Effect(*e.ReplayOf); err != nil {
				return err
			}
		}
		*out = e
		if e.State != sm.Committed {
			return fmt.Errorf("%w: effect %d is %s: only the answer of a committed call is recorded", model.ErrConflict, e.ID, e.State)
		}
		if answered, err := answeredTx(tx, &e); err != nil || answered {
			return cmp.Or(err, storage.ErrNothingToWrite)
		}
		if err := appendEffectHistory(tx, &e, model.HistoryRecord{Kind: model.KindAnswer, From: string(e.State), To: string(e.State),
			Trigger: TriggerAnswered, Actor: actorOr(c.Actor), Reason: reason, At: s.now()}); err != nil {
			return err
		}
		*out = e
		return tx.PutEffect(&e, e.State)
	}
}

// answeredTx tells whether the committed effect e's answer reached its
// client: its history holds an answer record.
func answeredTx(tx storage.ReadTx, e *model.Effect) (bool, error) {
	hist, err := tx.EffectHistory(e.ID, e.Session)
	if err != nil {
		return false, err
	}
	return answeredIn(hist), nil
}

func answeredIn(hist []model.HistoryRecord) bool {
	// The answer follows the commit: newest first.
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Kind == model.KindAnswer {
			return true
		}
	}
	return false
}

// againReason is the reason the first record of a call made again gives:
// why it is a new effect, then the caller's reason, if any.
func againReason(why, reason string) string {
	if reason != "" {
		why += "; " + reason
	}
	return why
}
