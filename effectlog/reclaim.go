package effectlog

import (
	"fmt"
	"time"

	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage"
)

// ownedAsExpected checks a reclaim's ExpectOwner against the current owner
// (a zero ExpectOwner expects none). No expectation always holds. An
// expected owner with a lease is one judged by that lease having run out: if
// the owner renewed it since (it lives, it was only slow), it is not the
// owner judged, and is never overtaken. An owner expecting itself passes its
// Identity, as its renewals moved its lease.
func ownedAsExpected(cur, want *model.Owner) bool {
	switch {
	case want == nil:
		return true
	case *want == (model.Owner{}):
		return cur == nil
	}
	return cur.Same(want) && (want.LeaseUntil.IsZero() || !cur.LeaseUntil.After(want.LeaseUntil))
}

// takenMeanwhile refuses a reclaim whose owner judged dead is no longer the owner.
func takenMeanwhile(id uint64, cur, want *model.Owner) error {
	if cur.Same(want) {
		return fmt.Errorf("%w: effect %d: its owner %s renewed its lease meanwhile (until %s): it is alive", model.ErrInProgress, id, cur, cur.LeaseUntil.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Errorf("%w: effect %d is no longer held by %s but by %s: another process took it meanwhile", model.ErrInProgress, id, want, cur)
}

// reclaimCompensation hands a compensating entry to c.Owner: a compensation
// already compensating is never taken over unless the caller judged its
// owner dead and names it in c.ExpectOwner (checked by the caller). With no
// c.Owner, its owner lets it go (an interrupted run), leaving it in doubt.
// The history records whose run ended.
func reclaimCompensation(tx storage.WriteTx, sess *model.Session, e model.Effect, u *model.UndoEntry, c model.Change, now time.Time) (model.UndoEntry, model.Effect, error) {
	if c.ExpectOwner == nil {
		return model.UndoEntry{}, e, fmt.Errorf("%w: effect %d is being compensated (%s)", model.ErrInProgress, e.ID, u.Owner)
	}
	trigger, why := "Reclaimed in doubt", "in doubt: "+u.Owner.Gone(u.Owner.LivenessAt(now))
	if c.Owner == nil {
		trigger, why = "Compensation interrupted", c.Error
	}
	u.Owner, u.UpdatedAt = c.Owner, now
	err := saveUndoStep(tx, sess, &e, e.State, u, model.HistoryRecord{Kind: model.KindUndo, From: string(u.State), To: string(u.State),
		Trigger: trigger, Actor: actorOr(c.Actor), Reason: c.Reason, Error: why, At: now})
	return *u, e, err
}
