package effectlog

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// Start moves an effect to executing (from pending, or approved for an
// irreversible one). An irreversible effect never starts without approval.
func (s *Service) Start(ctx context.Context, id uint64, c model.Change) (model.Effect, error) {
	return s.Transition(ctx, id, sm.Executing, c)
}

// Commit records the result and moves an executing effect to committed.
func (s *Service) Commit(ctx context.Context, id uint64, c model.Change) (model.Effect, error) {
	return s.Transition(ctx, id, sm.Committed, c)
}

// Fail records the error and moves an executing effect back to pending, so
// that the same call retries it.
func (s *Service) Fail(ctx context.Context, id uint64, c model.Change) (model.Effect, error) {
	return s.Transition(ctx, id, sm.Pending, c)
}

// Approve decides an irreversible effect's approval request: pending -> approved.
func (s *Service) Approve(ctx context.Context, id uint64, c model.Change) (model.Effect, error) {
	return s.Transition(ctx, id, sm.Approved, c)
}

// Reject decides an irreversible effect's approval request: pending ->
// rejected, and halts the session.
func (s *Service) Reject(ctx context.Context, id uint64, c model.Change) (model.Effect, error) {
	return s.Transition(ctx, id, sm.Rejected, c)
}

// Transition moves effect id to state `to` in one transaction: it validates
// through statemachine and the log's own preconditions, appends the history
// record, and updates indexes, the session, the approval or the undo entry.
// A refused request changes nothing (except an approval found expired on the
// way, which is recorded as timed out).
func (s *Service) Transition(ctx context.Context, id uint64, to sm.State, c model.Change) (model.Effect, error) {
	if err := model.ValidChange(c); err != nil {
		return model.Effect{}, err
	}
	if !to.Valid() {
		_, err := sm.ParseState(string(to))
		return model.Effect{}, fmt.Errorf("%w: %v", model.ErrInvalidInput, err)
	}
	var result json.RawMessage
	if to == sm.Committed {
		var err error
		if result, err = canonicalResult(c.Result); err != nil {
			return model.Effect{}, err
		}
	}
	var out model.Effect
	err := s.update(ctx, func(tx storage.WriteTx) error {
		now := s.now()
		e, sess, err := getEffectAndSession(tx, id)
		if err != nil {
			return err
		}
		// Any command that touches the session closes its expired requests.
		expired, err := expireApprovals(tx, &sess, now)
		if err != nil {
			return err
		}
		if expired {
			if e, err = tx.Effect(id); err != nil {
				return err
			}
		}
		// A refusal writes nothing, unless an expiry was found on the way.
		refuse := func(err error) error {
			if !expired {
				return err
			}
			return refuseKeepingSession(tx, &sess, err)
		}
		switch to {
		case sm.Compensating, sm.Compensated, sm.CompensationFailed:
			if _, err := sm.Validate(e.Tier, e.State, to); err != nil {
				return refuse(err)
			}
			step := map[sm.State]sm.EntryState{sm.Compensating: sm.EntryCompensating,
				sm.Compensated: sm.EntryCompensated, sm.CompensationFailed: sm.EntryCompensationFailed}[to]
			_, eff, err := compensationStep(tx, &sess, e, step, c, now)
			if err != nil {
				return refuse(err)
			}
			out = eff
			return tx.PutSession(&sess)
		case sm.Approved, sm.Rejected:
			if e.Tier != sm.Irreversible {
				break // the tier rule of the spec answers
			}
			if e.State == sm.Pending && !sess.State.AcceptsEffects() {
				return refuse(fmt.Errorf("%w: session %q is %s: its approval requests are closed; effect %d cannot be decided",
					model.ErrSessionNotActive, sess.ID, sess.State, e.ID))
			}
			// A decision is final: on a decided effect the spec's table
			// refuses it, and the error says whose decision stands.
			if _, err := sm.Validate(e.Tier, e.State, to); err != nil {
				return refuse(alreadyDecided(tx, e.ID, err))
			}
			if err := timedOut(tx, e.ID, now); err != nil {
				// The request's own record says its time is up, whatever
				// the index of waiting requests said (an agent's SQL can
				// move that): it is closed as the sweep closes it, and
				// the refusal keeps that, so that the same call asks again.
				n, xerr := closeExpired(tx, &sess, []uint64{e.ID}, now)
				if xerr != nil {
					return xerr
				}
				expired = expired || n > 0
				return refuse(err)
			}
		}
		if err := applyTransition(tx, &sess, &e, false, to, c, result, now); err != nil {
			var te *sm.TransitionError
			if errors.As(err, &te) || errors.Is(err, model.ErrInProgress) || errors.Is(err, model.ErrSessionNotActive) || errors.Is(err, model.ErrConflict) {
				return refuse(err)
			}
			return err
		}
		out = e
		return tx.PutSession(&sess)
	})
	return out, err
}

// applyTransition validates and makes one effect transition inside a
// transaction: the history record, the effect's fields, its state index, the
// approval and the session's counts. The caller saves the session. fresh
// says e was made in this transaction and is not written yet.
func applyTransition(tx storage.WriteTx, sess *model.Session, e *model.Effect, fresh bool, to sm.State, c model.Change, result json.RawMessage, now time.Time) error {
	if !ownedAsExpected(e.Owner, c.ExpectOwner) {
		return takenMeanwhile(e.ID, e.Owner, c.ExpectOwner)
	}
	if c.ExpectCall != "" && c.ExpectCall != e.CallSignature {
		return fmt.Errorf("%w: effect %d is not the call that was shown (%s now): the log changed; look again", model.ErrConflict, e.ID, e.Tool)
	}
	if c.ExpectState != "" && c.ExpectState != e.State {
		return fmt.Errorf("%w: effect %d is %s now, not %s as shown: another process moved it; look again", model.ErrConflict, e.ID, e.State, c.ExpectState)
	}
	t, err := sm.Validate(e.Tier, e.State, to)
	if err != nil {
		return err
	}
	if err := preconditions(tx, sess, e, to); err != nil {
		return err
	}
	from := e.State
	rec := model.HistoryRecord{Kind: model.KindEffect, From: string(from), To: string(to), Trigger: t.Trigger,
		Actor: actorOr(c.Actor), Reason: c.Reason, At: now}
	switch to {
	case sm.Executing:
		e.Owner, e.Error = c.Owner, ""
	case sm.Committed:
		r, err := model.Redact(result, e.Redact)
		if err != nil {
			return err
		}
		e.Result, e.Owner = r, nil
	case sm.Pending:
		e.Error, e.Owner = c.Error, nil
		if e.Error == "" {
			e.Error = "failed"
		}
		rec.Error = e.Error
		if c.Resolve {
			rec.Trigger = sm.TriggerResolvedInDoubt
		}
		if e.Tier == sm.Irreversible {
			if err := reopenApproval(tx, sess, e.ID, c, 0, now); err != nil {
				return err
			}
		}
	case sm.Approved, sm.Rejected:
		if err := decide(tx, sess, e.ID, to, c, now); err != nil {
			return err
		}
	}
	return moveEffect(tx, sess, e, fresh, to, rec)
}

// moveEffect is the one way an effect changes state: a transition, a
// replay, an expiry or a compensation step. It validates the move against
// statemachine, appends the history record (rec says who, why, when and any
// error; the trigger, if rec has none, is the spec's), counts the move in
// the session and writes the effect (fresh: made in this transaction, not
// written yet). What the effect says must be set before: the record's hash
// covers it.
func moveEffect(tx storage.WriteTx, sess *model.Session, e *model.Effect, fresh bool, to sm.State, rec model.HistoryRecord) error {
	t, err := sm.Validate(e.Tier, e.State, to)
	if err != nil {
		return err
	}
	from := e.State
	rec.Kind, rec.From, rec.To = model.KindEffect, string(from), string(to)
	if rec.Trigger == "" {
		rec.Trigger = t.Trigger
	}
	if err := appendEffectHistory(tx, e, rec); err != nil {
		return err
	}
	e.State, e.UpdatedAt = to, rec.At
	countMove(sess, from, to)
	sess.UpdatedAt = rec.At
	if fresh {
		from = ""
	}
	return tx.PutEffect(e, from)
}

func getEffectAndSession(tx storage.ReadTx, id uint64) (model.Effect, model.Session, error) {
	e, err := tx.Effect(id)
	if err != nil {
		return e, model.Session{}, err
	}
	sess, err := tx.Session(e.Session)
	return e, sess, err
}

func canonicalResult(r json.RawMessage) (json.RawMessage, error) {
	if len(r) == 0 {
		return json.RawMessage("null"), nil
	}
	out, err := model.CanonicalArgs(r)
	if err != nil {
		return nil, fmt.Errorf("%w: result is not valid JSON", model.ErrInvalidInput)
	}
	return out, nil
}

// preconditions are the log's rules on top of the spec's table.
func preconditions(tx storage.ReadTx, sess *model.Session, e *model.Effect, to sm.State) error {
	switch to {
	case sm.Executing:
		if !sess.State.AcceptsEffects() {
			return fmt.Errorf("%w: session %q is %s; effect %d cannot start", model.ErrSessionNotActive, sess.ID, sess.State, e.ID)
		}
		// Only approved starts an irreversible effect: an approval is for
		// one execution, and one that failed is asked again.
		if e.Tier == sm.Irreversible && e.State == sm.Pending {
			return fmt.Errorf("%w: effect %d is irreversible and %w", model.ErrInProgress, e.ID, model.ErrAwaitsApproval)
		}
		// What was approved is what runs: an irreversible effect whose
		// records were changed since (its args, by a writer past the rules)
		// fails its check and does not start.
		if e.Tier == sm.Irreversible {
			return checkEffectTx(tx, e)
		}
	case sm.Approved:
		// A person approves what the request shows: an effect or request
		// changed behind the log's back is refused, not approved.
		return checkEffectTx(tx, e)
	case sm.Replayed:
		return fmt.Errorf("%w: effect %d: replayed is reached only by intercepting a repeat of a committed call", model.ErrConflict, e.ID)
	}
	return nil
}

// decide records the approval outcome, clears the pending request, and moves
// the session: back to active when nothing else waits, halted on a rejection.
func decide(tx storage.WriteTx, sess *model.Session, id uint64, to sm.State, c model.Change, now time.Time) error {
	if err := recordDecision(tx, sess, id, to, c, now); err != nil {
		return err
	}
	return afterDecision(tx, sess, to, c, now)
}

// expireApprovals closes, as system:timeout, the session's pending approval
// requests whose time is up, and says whether there were any.
func expireApprovals(tx storage.WriteTx, sess *model.Session, now time.Time) (bool, error) {
	n, err := expireDue(tx, sess, now)
	return n > 0, err
}

// expireDue is expireApprovals, counting the requests it closed.
func expireDue(tx storage.WriteTx, sess *model.Session, now time.Time) (int, error) {
	if sess.PendingApprovals == 0 {
		return 0, nil
	}
	var due []uint64
	err := tx.OpenRequests(sess.ID, func(r storage.OpenRequest) (bool, error) {
		if !r.Known || expiredAt(r.Expires, now) {
			due = append(due, r.EffectID)
		}
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	return closeExpired(tx, sess, due, now)
}

// closeExpired closes, as system:timeout, those of the requests ids whose
// own record says their time is up (the index of waiting requests only
// says which to look at), and moves the session back to active when none
// waits any more.
func closeExpired(tx storage.WriteTx, sess *model.Session, ids []uint64, now time.Time) (int, error) {
	timeout := model.Change{Actor: model.TimeoutActor, Reason: "approval request expired"}
	expired := 0
	for _, id := range ids {
		a, err := tx.Approval(id)
		if err != nil {
			return 0, err
		}
		if a == nil || a.Session != sess.ID || a.Outcome != model.ApprovalPending || a.ExpiresAt == nil || !expiredAt(*a.ExpiresAt, now) {
			continue
		}
		e, err := tx.Effect(id)
		if err != nil {
			return 0, err
		}
		if e.State != sm.Pending {
			continue
		}
		// Nobody answered: that is no rejection. The request is closed as
		// timed out and the effect stays pending, not run; its session is
		// not halted, and the same call asks again (a re-run of the
		// pipeline gets a new request, not exit 122 for ever).
		if err := recordDecision(tx, sess, id, sm.Rejected, timeout, now); err != nil {
			return 0, err
		}
		expired++
	}
	if expired > 0 && sess.PendingApprovals == 0 && sess.State == sm.SessionAwaitingApproval {
		if err := setSessionState(tx, sess, sm.SessionActive, model.Change{Actor: timeout.Actor}, now); err != nil {
			return 0, err
		}
	}
	return expired, nil
}

// ExpireApprovals closes, as system:timeout, the session's approval
// requests whose time is up (their effects stay pending, not run), and
// returns how many there were.
func (s *Service) ExpireApprovals(ctx context.Context, session string) (int, error) {
	n := 0
	err := s.update(ctx, func(tx storage.WriteTx) error {
		sess, err := tx.Session(session)
		if err != nil {
			return err
		}
		if n, err = expireDue(tx, &sess, s.now()); err != nil || n == 0 {
			return cmp.Or(err, storage.ErrNothingToWrite)
		}
		return tx.PutSession(&sess)
	})
	return n, err
}

// expiredAt says whether a request expiring at `expires` (zero: never) has
// expired at now.
func expiredAt(expires, now time.Time) bool {
	return !expires.IsZero() && !now.Before(expires)
}

// UndoStep moves the undo entry of effect id (the undo runner's steps:
// compensating, compensated, compensation_failed, skipped, resolved). Where
// the spec allows, the effect follows (executing -> compensating -> ...); a
// committed effect keeps its state and the entry carries the undo.
func (s *Service) UndoStep(ctx context.Context, id uint64, to sm.EntryState, c model.Change) (model.UndoEntry, error) {
	if err := model.ValidChange(model.Change{Actor: c.Actor, Reason: c.Reason}); err != nil {
		return model.UndoEntry{}, err
	}
	// What a compensation said when it failed is its own: kept, as text.
	c.Error = strings.ToValidUTF8(c.Error, "\uFFFD")
	var out model.UndoEntry
	err := s.update(ctx, func(tx storage.WriteTx) error {
		now := s.now()
		e, sess, err := getEffectAndSession(tx, id)
		if err != nil {
			return err
		}
		u, _, err := compensationStep(tx, &sess, e, to, c, now)
		if err != nil {
			return err
		}
		out = u
		return tx.PutSession(&sess)
	})
	return out, err
}

func compensationStep(tx storage.WriteTx, sess *model.Session, e model.Effect, to sm.EntryState, c model.Change, now time.Time) (model.UndoEntry, model.Effect, error) {
	u, err := tx.Undo(e.Session, e.ID, &e)
	if err != nil {
		return model.UndoEntry{}, e, err
	}
	if u == nil {
		return model.UndoEntry{}, e, fmt.Errorf("%w: effect %d has no undo entry (tier %s)", model.ErrNotFound, e.ID, e.Tier)
	}
	if !ownedAsExpected(u.Owner, c.ExpectOwner) {
		return model.UndoEntry{}, e, takenMeanwhile(e.ID, u.Owner, c.ExpectOwner)
	}
	if to == sm.EntryCompensating && u.State == sm.EntryCompensating {
		return reclaimCompensation(tx, sess, e, u, c, now)
	}
	trigger, err := sm.ValidateEntry(u.State, to)
	if err != nil {
		return model.UndoEntry{}, e, err
	}
	if to == sm.EntryCompensating && e.State == sm.Executing {
		if err := model.CallStillRunning(e, now); err != nil {
			return model.UndoEntry{}, e, err
		}
	}
	if to == sm.EntryCompensating {
		// Only a compensation whose effect passes its check starts.
		if err := checkEffectTx(tx, &e); err != nil {
			return model.UndoEntry{}, e, err
		}
	}
	// The effect's own move, where the spec has one.
	var effTo sm.State
	switch {
	case to == sm.EntryCompensating && e.State != sm.Committed:
		effTo = sm.Compensating
	case to == sm.EntryCompensated && e.State == sm.Compensating:
		effTo = sm.Compensated
	case to == sm.EntryCompensationFailed && e.State == sm.Compensating:
		effTo = sm.CompensationFailed
	case to == sm.EntrySkipped && e.State != sm.Pending:
		return model.UndoEntry{}, e, fmt.Errorf("%w: effect %d is %s; only an effect that never ran is skipped", model.ErrConflict, e.ID, e.State)
	}
	fromEntry, oldState := u.State, e.State
	u.State, u.UpdatedAt, u.Owner = to, now, nil
	if to == sm.EntryCompensating {
		u.Owner = c.Owner // in the move's transaction: a second undo finds the entry taken
	}
	if c.Error != "" {
		u.LastError = c.Error
	}
	if c.Attempts > 0 {
		u.Attempts = c.Attempts
	}
	if effTo != "" {
		if err := moveEffect(tx, sess, &e, false, effTo, model.HistoryRecord{Actor: actorOr(c.Actor), Reason: c.Reason, Error: c.Error, At: now}); err != nil {
			return model.UndoEntry{}, e, err
		}
		oldState = e.State // moveEffect moved its state index
	}
	err = saveUndoStep(tx, sess, &e, oldState, u, model.HistoryRecord{Kind: model.KindUndo, From: string(fromEntry), To: string(to),
		Trigger: trigger, Actor: actorOr(c.Actor), Reason: c.Reason, Error: c.Error, At: now})
	return *u, e, err
}

// saveUndoStep writes a step of effect e's undo entry u: the history record
// rec, the effect (which was in oldState) and the entry.
func saveUndoStep(tx storage.WriteTx, sess *model.Session, e *model.Effect, oldState sm.State, u *model.UndoEntry, rec model.HistoryRecord) error {
	if err := appendEffectHistory(tx, e, rec); err != nil {
		return err
	}
	if err := tx.PutEffect(e, oldState); err != nil {
		return err
	}
	if err := tx.PutUndo(u); err != nil {
		return err
	}
	sess.UpdatedAt = rec.At
	return nil
}
