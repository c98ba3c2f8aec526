package effectlog

import (
	"context"
	"fmt"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// A call's input rounds (MCP 2026-07-28's input_required): its server may
// answer a round by asking the client for input, and act only on the
// client's next round. Between the two the call is executing, but nothing
// of it has run: an input record on its history says which of the two a
// call executing now is in, so that a call whose owner died while it
// waited for the client is failed (it runs again) rather than left in
// doubt. It moves no state: the spec's table is untouched.

// Triggers of the input records.
const (
	// TriggerAwaitingInput: the server asked the client for input and has
	// not acted; the call waits for the client's next round.
	TriggerAwaitingInput = "Awaiting the client's input"
	// TriggerInputSent: the client's next round goes to the server, which
	// may act on it from now on.
	TriggerInputSent = "Client's input sent to the server"
)

// InputRound records a round of executing effect id: awaiting (the server
// asked the client for input, and the call waits for the client's next
// round) or not (that next round is about to go to the server). Only the
// call's owner records it (c.Owner, as model.Owner.Same judges), and its
// lease moves to c.Owner's: a reclaim that judged the owner dead by its
// lease finds it renewed, and a fail of a call judged abandoned (whose
// owner it expects, lease and all) is refused once the next round is sent.
func (s *Service) InputRound(ctx context.Context, id uint64, awaiting bool, c model.Change) (model.Effect, error) {
	if err := model.ValidChange(c); err != nil {
		return model.Effect{}, err
	}
	if c.Owner == nil {
		return model.Effect{}, fmt.Errorf("%w: an input round needs the call's owner", model.ErrInvalidInput)
	}
	trigger := TriggerInputSent
	if awaiting {
		trigger = TriggerAwaitingInput
	}
	var out model.Effect
	err := s.update(ctx, func(tx storage.WriteTx) error {
		e, err := tx.Effect(id)
		if err != nil {
			return err
		}
		if e.State != sm.Executing || !e.Owner.Same(c.Owner) {
			return fmt.Errorf("%w: effect %d is %s, held by %s, no longer by %s: its input round was not recorded", model.ErrInProgress, id, e.State, e.Owner, c.Owner)
		}
		if !c.Owner.LeaseUntil.IsZero() {
			e.Owner = e.Owner.WithLease(c.Owner.LeaseUntil)
		}
		now := s.now()
		if err := appendEffectHistory(tx, &e, model.HistoryRecord{Kind: model.KindInput, From: string(e.State), To: string(e.State),
			Trigger: trigger, Actor: actorOr(c.Actor), Reason: c.Reason, At: now}); err != nil {
			return err
		}
		e.UpdatedAt = now
		out = e
		return tx.PutEffect(&e, e.State)
	})
	return out, err
}

// AwaitingInput tells whether an effect with history hist, executing,
// awaits its client's next input round, and since when: its last input
// record since it started says so.
func AwaitingInput(hist []model.HistoryRecord) (since time.Time, ok bool) {
	for i := len(hist) - 1; i >= 0; i-- {
		switch hist[i].Kind {
		case model.KindInput:
			return hist[i].At, hist[i].Trigger == TriggerAwaitingInput
		case model.KindEffect:
			return time.Time{}, false // a move since: a new run, or its end
		}
	}
	return time.Time{}, false
}

// AbandonedRound says why the call of d, as read at now, was abandoned
// between its input rounds: executing, awaiting its client's input, and its
// owner gone (dead, or its lease lapsed on another host). Its server had not
// acted: it is failed, not in doubt, and its undo has nothing to undo. ""
// if it was not.
func AbandonedRound(d model.EffectDetail, now time.Time) string {
	if d.Effect.State != sm.Executing {
		return ""
	}
	since, ok := AwaitingInput(d.History)
	if !ok {
		return ""
	}
	l := d.Effect.Owner.LivenessAt(now)
	switch l {
	case model.OwnerAlive, model.OwnerElsewhere:
		return ""
	}
	return fmt.Sprintf("abandoned between input rounds: it awaited the client's input since %s, and its owner is gone (%s)",
		since.UTC().Format(time.RFC3339), d.Effect.Owner.Gone(l))
}
