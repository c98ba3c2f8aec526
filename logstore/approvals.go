package logstore

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// recordDecision writes a decision on effect id's approval request and takes
// it out of the waiting requests. A request already decided is the approval
// a log written before kept for a failed effect: it becomes an earlier round.
func recordDecision(tx *writeTx, sess *model.Session, id uint64, to sm.State, c model.Change, now time.Time) error {
	a, err := requestOf(tx, id)
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
	if err := putRecord(tx, bApprovals, itob(id), a); err != nil {
		return err
	}
	return tx.delete(bApprovalsOpen, itob(id))
}

// afterDecision moves the session after a decision: back to active when
// nothing else waits, halted on a rejection (which closes its other requests).
func afterDecision(tx *writeTx, sess *model.Session, to sm.State, c model.Change, now time.Time) error {
	next := sm.SessionHalted
	if to == sm.Approved {
		if sess.PendingApprovals > 0 {
			return nil
		}
		next = sm.SessionActive
	}
	if _, err := sm.ValidateSession(sess.State, next); err != nil {
		return nil // e.g. a session already failed: its state stands
	}
	return setSessionState(tx, sess, next, model.Change{Actor: c.Actor, Reason: c.Reason}, now)
}

// reopenApproval asks again for an irreversible effect that failed (or was
// in doubt) after its approval: each execution needs its own decision. The
// decision made becomes an earlier round; the new request waits as long as
// the first one did. In a session that accepts no effects any more, the new
// request is closed at once: nobody can decide it.
func reopenApproval(tx *writeTx, sess *model.Session, id uint64, c model.Change, now time.Time) error {
	a, err := requestOf(tx, id)
	if err != nil {
		return err
	}
	if a.Outcome == model.ApprovalPending {
		return nil
	}
	a.Earlier = append(a.Earlier, a.ApprovalRound)
	if a.ExpiresAt != nil {
		exp := now.Add(a.ExpiresAt.Sub(a.RequestedAt))
		a.ExpiresAt = &exp
	}
	a.RequestedAt, a.Outcome, a.DecidedBy, a.DecidedAt, a.Decision = now, model.ApprovalPending, "", nil, ""
	if !sess.State.AcceptsEffects() {
		closeRequest(a, sess.State, now)
		return putRecord(tx, bApprovals, itob(id), a)
	}
	if err := putRecord(tx, bApprovals, itob(id), a); err != nil {
		return err
	}
	if err := tx.put(bApprovalsOpen, itob(id), pendingValue(sess.ID, a.ExpiresAt)); err != nil {
		return err
	}
	sess.PendingApprovals++
	if sess.State == sm.SessionActive {
		return setSessionState(tx, sess, sm.SessionAwaitingApproval, model.Change{Actor: c.Actor}, now)
	}
	return nil
}

// closeOpenApprovals closes the session's waiting requests when it stops
// accepting effects (to is its new state). Their effects stay pending: nobody
// rejected them, and the session refuses to start or decide them.
func closeOpenApprovals(tx *writeTx, sess *model.Session, to sm.SessionState, now time.Time) error {
	if sess.PendingApprovals == 0 {
		return nil
	}
	var ids []uint64
	c := tx.Bucket(bApprovalsOpen).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if openFor(v, sess.ID) {
			ids = append(ids, btoi(k))
		}
	}
	for _, id := range ids {
		a, err := getApproval(tx.Tx, id)
		if err != nil {
			return err
		}
		if a == nil || a.Session != sess.ID || a.Outcome != model.ApprovalPending {
			continue
		}
		closeRequest(a, to, now)
		if err := putRecord(tx, bApprovals, itob(id), a); err != nil {
			return err
		}
		if err := tx.delete(bApprovalsOpen, itob(id)); err != nil {
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

// alreadyDecided adds to a refused decision who made the one that stands.
func alreadyDecided(tx *bolt.Tx, id uint64, err error) error {
	a, aerr := getApproval(tx, id)
	if aerr != nil || a == nil {
		return err
	}
	switch a.Outcome {
	case model.ApprovalApproved, model.ApprovalRejected:
		return fmt.Errorf("%w (effect %d was already %s by %s)", err, id, a.Outcome, a.DecidedBy)
	case model.ApprovalTimedOut:
		return fmt.Errorf("%w (effect %d's approval request timed out)", err, id)
	}
	return err
}

// requestOf reads the approval request of irreversible effect id, which
// must have one.
func requestOf(tx *writeTx, id uint64) (*model.Approval, error) {
	a, err := getApproval(tx.Tx, id)
	if err == nil && a == nil {
		err = fmt.Errorf("%w: effect %d has no approval request", model.ErrCorrupt, id)
	}
	return a, err
}
