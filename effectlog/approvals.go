package effectlog

import (
	"fmt"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// requests are the approval requests one write transaction reads, each
// read once: a decision judges its request, checks its effect against it
// and writes it, and a sweep of expired requests may close it on the way.
// The rules write a request they change (PutApproval) before they read it
// again.
type requests struct {
	tx   storage.WriteTx
	read map[uint64]*model.Approval
}

func newRequests(tx storage.WriteTx) *requests {
	return &requests{tx: tx, read: map[uint64]*model.Approval{}}
}

// of is effect id's request as the transaction has it; nil: none.
func (r *requests) of(id uint64) (*model.Approval, error) {
	if a, ok := r.read[id]; ok {
		return a, nil
	}
	a, err := r.tx.Approval(id)
	if err == nil {
		r.read[id] = a
	}
	return a, err
}

// request is the request of irreversible effect id, which must have one.
func (r *requests) request(id uint64) (*model.Approval, error) {
	a, err := r.of(id)
	if err == nil && a == nil {
		err = fmt.Errorf("%w: effect %d has no approval request", model.ErrCorrupt, id)
	}
	return a, err
}

// recordDecision writes a decision on effect id's approval request and takes
// it out of the waiting requests. A request already decided is the approval
// a log written before kept for a failed effect: it becomes an earlier round.
func recordDecision(r *requests, sess *model.Session, id uint64, to sm.State, c model.Change, now time.Time) error {
	a, err := r.request(id)
	if err != nil {
		return err
	}
	if a.Outcome == model.ApprovalPending {
		if sess.PendingApprovals > 0 {
			sess.PendingApprovals--
		}
	} else {
		a.Earlier = append(a.Earlier, a.ApprovalRound)
	}
	a.Outcome = model.ApprovalApproved
	if to == sm.Rejected {
		a.Outcome = model.ApprovalRejected
		if c.Actor == model.TimeoutActor {
			a.Outcome = model.ApprovalTimedOut
		}
	}
	a.DecidedBy, a.DecidedAt, a.Decision = actorOr(c.Actor), &now, c.Reason
	if err := r.tx.PutApproval(a); err != nil {
		return err
	}
	return r.tx.CloseRequest(id)
}

// reopenApproval asks again for an irreversible effect that failed (or was
// in doubt) after its approval: each execution needs its own decision. The
// decision made becomes an earlier round; the new request waits for
// timeout, the asking call's (a re-run that raised --approval-timeout after
// nobody answered in time), or if zero as long as the first one did. In a
// session that accepts no effects any more, the new request is closed at
// once: nobody can decide it.
func reopenApproval(r *requests, sess *model.Session, id uint64, c model.Change, timeout time.Duration, now time.Time) error {
	a, err := r.request(id)
	if err != nil {
		return err
	}
	if a.Outcome == model.ApprovalPending {
		return nil
	}
	a.Earlier = append(a.Earlier, a.ApprovalRound)
	if timeout == 0 && a.ExpiresAt != nil {
		timeout = a.ExpiresAt.Sub(a.RequestedAt)
	}
	if timeout > 0 {
		// At most until the last time a log holds.
		exp := now.Add(timeout)
		if exp.After(lastTime) || exp.Before(now) {
			exp = lastTime
		}
		a.ExpiresAt = &exp
	}
	a.RequestedAt, a.Outcome, a.DecidedBy, a.DecidedAt, a.Decision = now, model.ApprovalPending, "", nil, ""
	if !sess.State.AcceptsEffects() {
		closeRequest(a, sess.State, now)
		return r.tx.PutApproval(a)
	}
	if err := r.tx.PutApproval(a); err != nil {
		return err
	}
	if err := r.tx.OpenRequest(id, sess.ID, a.ExpiresAt); err != nil {
		return err
	}
	sess.PendingApprovals++
	if sess.State == sm.SessionActive {
		return setSessionState(r, sess, sm.SessionAwaitingApproval, model.Change{Actor: c.Actor}, now)
	}
	return nil
}

// closeOpenApprovals closes the session's waiting requests when it stops
// accepting effects (to is its new state). Their effects stay pending: nobody
// rejected them, and the session refuses to start or decide them.
func closeOpenApprovals(r *requests, sess *model.Session, to sm.SessionState, now time.Time) error {
	if sess.PendingApprovals == 0 {
		return nil
	}
	var ids []uint64
	err := r.tx.OpenRequests(sess.ID, func(o storage.OpenRequest) (bool, error) {
		ids = append(ids, o.EffectID)
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		a, err := r.of(id)
		if err != nil {
			return err
		}
		if a == nil || a.Session != sess.ID || a.Outcome != model.ApprovalPending {
			continue
		}
		closeRequest(a, to, now)
		if err := r.tx.PutApproval(a); err != nil {
			return err
		}
		if err := r.tx.CloseRequest(id); err != nil {
			return err
		}
		if sess.PendingApprovals > 0 {
			sess.PendingApprovals--
		}
	}
	return nil
}

// closeRequest closes request a: its session, now in state, accepts no
// decisions.
func closeRequest(a *model.Approval, state sm.SessionState, now time.Time) {
	a.Outcome, a.DecidedBy, a.DecidedAt, a.Decision = model.ApprovalClosed, model.SessionActor, &now, "session "+string(state)
}

// alreadyDecided puts before a refused decision's error who made the one
// that stands (request a): what a person asking wants to read first.
func alreadyDecided(a *model.Approval, id uint64, err error) error {
	if a == nil {
		return err
	}
	switch a.Outcome {
	case model.ApprovalApproved, model.ApprovalRejected:
		return &AlreadyDecided{Msg: fmt.Sprintf("effect %d was already %s by %s", id, a.Outcome, a.DecidedBy), Err: err}
	case model.ApprovalTimedOut:
		return fmt.Errorf("effect %d's approval request timed out: %w", id, err)
	}
	return err
}

// AlreadyDecided is a decision refused because one stands: Msg says whose,
// which is all a person deciding needs; the spec's refusal (Err) follows
// it, and stays in its chain (sm.ErrInvalidStateTransition).
type AlreadyDecided struct {
	Msg string
	Err error
}

func (e *AlreadyDecided) Error() string { return e.Msg + ": " + e.Err.Error() }
func (e *AlreadyDecided) Unwrap() error { return e.Err }

// timedOut refuses a decision on request a, of effect id, if it timed
// out: nobody can decide it any more, and the same call, run again, asks
// again. Its own record's time is what counts, also while the index of
// waiting requests says otherwise (changed outside undolog).
func timedOut(a *model.Approval, id uint64, now time.Time) error {
	switch {
	case a == nil:
		return nil
	case a.Outcome == model.ApprovalTimedOut:
		return fmt.Errorf("%w: effect %d's approval request timed out at %s and can no longer be decided; run the same call again to ask again",
			model.ErrConflict, id, a.DecidedAt.UTC().Format(time.RFC3339))
	case a.Outcome == model.ApprovalPending && a.ExpiresAt != nil && expiredAt(*a.ExpiresAt, now):
		return fmt.Errorf("%w: effect %d's approval request timed out at %s and can no longer be decided; run the same call again to ask again",
			model.ErrConflict, id, a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}
