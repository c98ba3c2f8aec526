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

// Transition moves effect id to state `to` in one transaction, by the rules
// of its destination (destinations): it validates the move once, against
// the spec's table (statemachine) and the log's own rules, appends the
// history record, and updates indexes, the session, the approval or the
// undo entry. A refused request changes nothing (except an approval found
// expired on the way, which is recorded as timed out).
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
	d := destinations[to]
	var out model.Effect
	err := s.update(ctx, func(tx storage.WriteTx) error {
		if g, ok := tx.(storage.CallerGoesOn); ok && to == sm.Executing {
			g.GoesOnAtCommit() // the call starts once this is committed
		}
		if w, ok := tx.(storage.DecisionWaker); ok && (to == sm.Approved || to == sm.Rejected) {
			w.WakeWaiters() // a call may wait for this decision
		}
		now := s.now()
		e, sess, err := getEffectAndSession(tx, id)
		if err != nil {
			return err
		}
		r := newRequests(tx)
		// Any command that touches the session closes its expired requests.
		expired, err := expireApprovals(r, &sess, waitingRequest(e), now)
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
		m := &move{r: r, sess: &sess, e: &e, to: to, c: c, result: result, now: now}
		if d.undo != "" {
			// The effect goes where its undo entry goes: the entry's step
			// makes the move, and whatever stops it is a refusal.
			if err := m.validate(); err != nil {
				return refuse(err)
			}
			_, eff, err := compensationStep(r, &sess, e, d.undo, c, now, m.row)
			if err != nil {
				return refuse(err)
			}
			out = eff
			return tx.PutSession(&sess)
		}
		if err := m.make(d); err != nil {
			if refusal(err) {
				return refuse(err)
			}
			return err
		}
		out = e
		return tx.PutSession(&sess)
	})
	return out, err
}

// refusal says whether err refuses a move, found before anything of it was
// written, rather than failing it.
func refusal(err error) bool {
	var te *sm.TransitionError
	return errors.As(err, &te) || errors.Is(err, model.ErrInProgress) || errors.Is(err, model.ErrSessionNotActive) || errors.Is(err, model.ErrConflict)
}

// A move is one effect's transition in a write transaction, as the rules of
// its destination see it.
type move struct {
	r    *requests
	sess *model.Session
	e    *model.Effect
	// fresh says e was made in this transaction and is not written yet.
	fresh  bool
	to     sm.State
	c      model.Change
	result json.RawMessage // a commit's, canonical
	now    time.Time
	// row is the spec's row of the move, once validated.
	row *sm.Transition
	// rec is the move's history record as the rules fill it in; its kind,
	// states and (if it has none) trigger are the move's.
	rec model.HistoryRecord
}

// destination is every rule of the log for a move to one effect state,
// beyond the spec's table, which every move passes once (validate).
type destination struct {
	// admit refuses, before the caller's expectations of the effect are
	// looked at, a move nobody may make now: a decision on a request that
	// is closed, decided already or timed out.
	admit func(*move) error
	// check refuses a move the spec's table allows and the log does not.
	check func(*move) error
	// record sets what the move records beyond the effect's state: the
	// effect's fields, its history record's, and the approval request and
	// session that move with it.
	record func(*move) error
	// undo is the undo entry's step that makes the move: the effect goes
	// where its entry goes (compensationStep).
	undo sm.EntryState
}

// destinations is the log's rules of effect moves, one entry a destination
// state. An intercept makes the moves to replayed itself (moveEffect), and
// a call's start by this table.
var destinations = map[sm.State]destination{
	sm.Pending:            {record: recordFailure},
	sm.Executing:          {check: mayStart, record: recordStart},
	sm.Committed:          {record: recordResult},
	sm.Approved:           {admit: admitDecision, check: approvesWhatItShows, record: decide},
	sm.Rejected:           {admit: admitDecision, record: decide},
	sm.Replayed:           {check: replayedByInterceptOnly},
	sm.Compensating:       {undo: sm.EntryCompensating},
	sm.Compensated:        {undo: sm.EntryCompensated},
	sm.CompensationFailed: {undo: sm.EntryCompensationFailed},
}

// make makes the move by the rules of its destination d, in their order:
// who may move there, what the caller expects of the effect, the spec's
// table, the log's checks, then what is recorded.
func (m *move) make(d destination) error {
	if d.admit != nil {
		if err := d.admit(m); err != nil {
			return err
		}
	}
	if err := m.expectations(); err != nil {
		return err
	}
	if err := m.validate(); err != nil {
		return err
	}
	if d.check != nil {
		if err := d.check(m); err != nil {
			return err
		}
	}
	m.rec = model.HistoryRecord{Actor: actorOr(m.c.Actor), Reason: m.c.Reason, At: m.now}
	if d.record != nil {
		if err := d.record(m); err != nil {
			return err
		}
	}
	return m.write()
}

// makeMove makes a move outside Transition (an intercept that starts its
// call at once) by the same table.
func makeMove(r *requests, sess *model.Session, e *model.Effect, fresh bool, to sm.State, c model.Change, now time.Time) error {
	m := &move{r: r, sess: sess, e: e, fresh: fresh, to: to, c: c, now: now}
	return m.make(destinations[to])
}

// moveEffect makes a move of a step of its own (a replay, a compensation
// step), whose history record rec says who, why, when and any error. row
// is the spec's row of the move if the caller validated it already.
func moveEffect(r *requests, sess *model.Session, e *model.Effect, fresh bool, to sm.State, rec model.HistoryRecord, row *sm.Transition) error {
	m := &move{r: r, sess: sess, e: e, fresh: fresh, to: to, now: rec.At, row: row, rec: rec}
	if err := m.validate(); err != nil {
		return err
	}
	return m.write()
}

// expectations refuses a move of an effect that is not as the caller saw
// it: owned by another, another call, or in another state.
func (m *move) expectations() error {
	e, c := m.e, m.c
	if !ownedAsExpected(e.Owner, c.ExpectOwner) {
		return takenMeanwhile(e.ID, e.Owner, c.ExpectOwner)
	}
	if c.ExpectCall != "" && c.ExpectCall != e.CallSignature {
		return fmt.Errorf("%w: effect %d is not the call that was shown (%s now): the log changed; look again", model.ErrConflict, e.ID, e.Tool)
	}
	if c.ExpectState != "" && c.ExpectState != e.State {
		return fmt.Errorf("%w: effect %d is %s now, not %s as shown: another process moved it; look again", model.ErrConflict, e.ID, e.State, c.ExpectState)
	}
	return nil
}

// validate checks the move against the spec's table, once: a move whose
// row is known passes.
func (m *move) validate() error {
	if m.row != nil && m.row.From == m.e.State && m.row.To == m.to {
		return nil
	}
	t, err := sm.Validate(m.e.Tier, m.e.State, m.to)
	if err != nil {
		return err
	}
	m.row = &t
	return nil
}

// write is the one way an effect changes state: it appends the move's
// history record (its trigger, if it has none, the spec's), counts the
// move in the session and writes the effect. What the effect says must be
// set before: the record's hash covers it.
func (m *move) write() error {
	e, rec := m.e, m.rec
	from := e.State
	rec.Kind, rec.From, rec.To = model.KindEffect, string(from), string(m.to)
	if rec.Trigger == "" {
		rec.Trigger = m.row.Trigger
	}
	if err := appendEffectHistory(m.r.tx, e, rec); err != nil {
		return err
	}
	e.State, e.UpdatedAt = m.to, rec.At
	countMove(m.sess, from, m.to)
	m.sess.UpdatedAt = rec.At
	if m.fresh {
		from = ""
	}
	return m.r.tx.PutEffect(e, from)
}

// mayStart: a call starts only in a session that takes calls, and an
// irreversible one only once approved.
func mayStart(m *move) error {
	e, sess := m.e, m.sess
	if !sess.State.AcceptsEffects() {
		return fmt.Errorf("%w: session %q is %s; effect %d cannot start", model.ErrSessionNotActive, sess.ID, sess.State, e.ID)
	}
	if e.Tier != sm.Irreversible {
		return nil
	}
	// Only approved starts an irreversible effect: an approval is for one
	// execution, and one that failed is asked again.
	if e.State == sm.Pending {
		return fmt.Errorf("%w: effect %d is irreversible and %w", model.ErrInProgress, e.ID, model.ErrAwaitsApproval)
	}
	// What was approved is what runs: an irreversible effect whose records
	// were changed since (its args, by a writer past the rules) fails its
	// check and does not start.
	return checkEffectTx(m.r, e)
}

func recordStart(m *move) error {
	m.e.Owner, m.e.Error = m.c.Owner, ""
	return nil
}

func recordResult(m *move) error {
	r, err := model.Redact(m.result, m.e.Redact)
	if err != nil {
		return err
	}
	m.e.Result, m.e.Owner = r, nil
	return nil
}

// recordFailure records a fail (or a person's resolve of a call in doubt):
// the error, and for an irreversible effect a new approval request, as
// each execution needs its own.
func recordFailure(m *move) error {
	e, c := m.e, m.c
	e.Error, e.Owner = c.Error, nil
	if e.Error == "" {
		e.Error = "failed"
	}
	m.rec.Error = e.Error
	if c.Resolve {
		m.rec.Trigger = sm.TriggerResolvedInDoubt
	}
	if e.Tier != sm.Irreversible {
		return nil
	}
	return reopenApproval(m.r, m.sess, e.ID, c, 0, m.now)
}

// admitDecision refuses a decision on an irreversible effect's request
// that nobody can decide: its session takes no decisions, it was decided
// (the spec's table refuses, and the error says whose decision stands) or
// it timed out. Another tier's is refused by the spec's table.
func admitDecision(m *move) error {
	e, sess := m.e, m.sess
	if e.Tier != sm.Irreversible {
		return nil
	}
	if e.State == sm.Pending && !sess.State.AcceptsEffects() {
		return fmt.Errorf("%w: session %q is %s: its approval requests are closed; effect %d cannot be decided",
			model.ErrSessionNotActive, sess.ID, sess.State, e.ID)
	}
	a, err := m.r.of(e.ID)
	if err != nil {
		return err
	}
	if err := m.validate(); err != nil {
		return alreadyDecided(a, e.ID, err)
	}
	// A request whose own record says its time is up was closed by the
	// sweep as timed out (expireDue), whatever the index of waiting
	// requests said: the refusal keeps that, so that the same call asks
	// again.
	return timedOut(a, e.ID, m.now)
}

// approvesWhatItShows: a person approves what the request shows; an effect
// or request changed behind the log's back is refused, not approved.
func approvesWhatItShows(m *move) error { return checkEffectTx(m.r, m.e) }

func replayedByInterceptOnly(m *move) error {
	return fmt.Errorf("%w: effect %d: replayed is reached only by intercepting a repeat of a committed call", model.ErrConflict, m.e.ID)
}

// decide records the approval outcome, clears the pending request, and moves
// the session: back to active when nothing else waits, halted on a rejection.
func decide(m *move) error {
	if err := recordDecision(m.r, m.sess, m.e.ID, m.to, m.c, m.now); err != nil {
		return err
	}
	return afterDecision(m.r, m.sess, m.to, m.c, m.now)
}

// afterDecision moves the session after a decision: back to active when
// nothing else waits, halted on a rejection (which closes its other requests).
func afterDecision(r *requests, sess *model.Session, to sm.State, c model.Change, now time.Time) error {
	next, change := sm.SessionHalted, model.Change{Actor: c.Actor, Reason: c.Reason}
	if to == sm.Approved {
		if sess.PendingApprovals > 0 {
			return nil
		}
		// The approver's reason is the effect's: the session only goes on.
		next, change.Reason = sm.SessionActive, ""
	}
	// A move the session table refuses is refused before anything is
	// written: a session already failed, say, whose state stands.
	err := setSessionState(r, sess, next, change, now)
	if _, refused := errors.AsType[*sm.TransitionError](err); refused {
		return nil
	}
	return err
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

// waitingRequest is the effect whose approval request a move of e may
// find waiting, and reads anyway: e itself, if irreversible and pending
// (0: none).
func waitingRequest(e model.Effect) uint64 {
	if e.Tier == sm.Irreversible && e.State == sm.Pending {
		return e.ID
	}
	return 0
}

// expireApprovals closes, as system:timeout, the session's pending approval
// requests whose time is up, and says whether there were any. own is the
// effect whose request the caller reads anyway (0: none).
func expireApprovals(r *requests, sess *model.Session, own uint64, now time.Time) (bool, error) {
	n, err := expireDue(r, sess, own, now)
	return n > 0, err
}

// expireDue is expireApprovals, counting the requests it closed.
func expireDue(r *requests, sess *model.Session, own uint64, now time.Time) (int, error) {
	var due []uint64
	ownWaits := false
	if own != 0 {
		// Its own record says whether its time is up, whatever the index
		// of waiting requests says (an agent's SQL can move that).
		a, err := r.of(own)
		if err != nil {
			return 0, err
		}
		if ownWaits = a != nil && a.Session == sess.ID && a.Outcome == model.ApprovalPending; ownWaits {
			due = append(due, own)
		}
	}
	if sess.PendingApprovals > 1 || sess.PendingApprovals == 1 && !ownWaits {
		err := r.tx.OpenRequests(sess.ID, func(o storage.OpenRequest) (bool, error) {
			if o.EffectID != own && (!o.Known || expiredAt(o.Expires, now)) {
				due = append(due, o.EffectID)
			}
			return true, nil
		})
		if err != nil {
			return 0, err
		}
	}
	return closeExpired(r, sess, due, now)
}

// closeExpired closes, as system:timeout, those of the requests ids whose
// own record says their time is up (the index of waiting requests only
// says which to look at), and moves the session back to active when none
// waits any more.
func closeExpired(r *requests, sess *model.Session, ids []uint64, now time.Time) (int, error) {
	timeout := model.Change{Actor: model.TimeoutActor, Reason: "approval request expired"}
	expired := 0
	for _, id := range ids {
		a, err := r.of(id)
		if err != nil {
			return 0, err
		}
		if a == nil || a.Session != sess.ID || a.Outcome != model.ApprovalPending || a.ExpiresAt == nil || !expiredAt(*a.ExpiresAt, now) {
			continue
		}
		e, err := r.tx.Effect(id)
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
		if err := recordDecision(r, sess, id, sm.Rejected, timeout, now); err != nil {
			return 0, err
		}
		expired++
	}
	if expired > 0 && sess.PendingApprovals == 0 && sess.State == sm.SessionAwaitingApproval {
		if err := setSessionState(r, sess, sm.SessionActive, model.Change{Actor: timeout.Actor}, now); err != nil {
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
		if n, err = expireDue(newRequests(tx), &sess, 0, s.now()); err != nil || n == 0 {
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
		u, _, err := compensationStep(newRequests(tx), &sess, e, to, c, now, nil)
		if err != nil {
			return err
		}
		out = u
		return tx.PutSession(&sess)
	})
	return out, err
}

// compensationStep moves effect e's undo entry to `to`, and the effect
// where the spec has it follow. row is the spec's row of the effect's move
// if the caller validated it already.
func compensationStep(r *requests, sess *model.Session, e model.Effect, to sm.EntryState, c model.Change, now time.Time, row *sm.Transition) (model.UndoEntry, model.Effect, error) {
	tx := r.tx
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
		if err := checkEffectTx(r, &e); err != nil {
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
		if err := moveEffect(r, sess, &e, false, effTo, model.HistoryRecord{Actor: actorOr(c.Actor), Reason: c.Reason, Error: c.Error, At: now}, row); err != nil {
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
