package logstore

import (
	"fmt"
	"os"
	"time"
)

// Owners are judged here, once, for exec, the proxy and the undo runner: a
// live owner is never overtaken; a dead one leaves its work in doubt.

// NewOwner is this process as the owner of work it starts at now.
func NewOwner(now time.Time) *Owner {
	host, _ := os.Hostname()
	pid := os.Getpid()
	start, _ := processStart(pid)
	return &Owner{PID: pid, Host: host, StartedAt: now.UTC(), ProcessStart: start}
}

// Liveness is what this host can tell about an owner.
type Liveness int

// Liveness of an owner.
const (
	OwnerNone      Liveness = iota // no owner recorded: in doubt
	OwnerAlive                     // its process runs on this host
	OwnerDead                      // its process is gone (or its pid now names another process): in doubt
	OwnerElsewhere                 // it runs on another host, which cannot be asked from here
)

// Liveness judges the owner from this host. A pid alone is not the
// process: the system reuses pids, so where the start time of the process
// was recorded, a process with that pid and another start time is another
// process, and the owner is dead.
func (o *Owner) Liveness() Liveness {
	if o == nil {
		return OwnerNone
	}
	if host, _ := os.Hostname(); o.Host != host {
		return OwnerElsewhere
	}
	if !processAlive(o.PID) {
		return OwnerDead
	}
	if o.ProcessStart != 0 {
		if start, ok := processStart(o.PID); ok && start != o.ProcessStart {
			return OwnerDead
		}
	}
	return OwnerAlive
}

// Same reports whether o and p are one owner: the same process that took
// the work at the same moment.
func (o *Owner) Same(p *Owner) bool {
	if o == nil || p == nil {
		return o == p
	}
	return o.PID == p.PID && o.Host == p.Host && o.StartedAt.Equal(p.StartedAt) && o.ProcessStart == p.ProcessStart
}

func (o *Owner) String() string {
	if o == nil {
		return "no recorded owner"
	}
	return fmt.Sprintf("pid %d on %s since %s", o.PID, o.Host, o.StartedAt.Format(time.RFC3339))
}

// ownedAsExpected checks a reclaim's ExpectOwner against the current owner
// (a zero ExpectOwner expects none). No expectation always holds.
func ownedAsExpected(cur, want *Owner) bool {
	switch {
	case want == nil:
		return true
	case *want == (Owner{}):
		return cur == nil
	}
	return cur.Same(want)
}

// takenMeanwhile refuses a reclaim whose owner judged dead is no longer the owner.
func takenMeanwhile(id uint64, cur, want *Owner) error {
	return fmt.Errorf("%w: effect %d is no longer held by %s but by %s: another process took it meanwhile", ErrInProgress, id, want, cur)
}

// reclaimCompensation hands a compensating entry to c.Owner: a compensation
// already compensating is never taken over unless the caller judged its
// owner dead and names it in c.ExpectOwner (checked by the caller). With no
// c.Owner, its owner lets it go (an interrupted run), leaving it in doubt.
// The history records whose run ended.
func reclaimCompensation(tx *writeTx, sess *Session, e Effect, u *UndoEntry, c Change, now time.Time) (UndoEntry, Effect, error) {
	if c.ExpectOwner == nil {
		return UndoEntry{}, e, fmt.Errorf("%w: effect %d is being compensated (%s)", ErrInProgress, e.ID, u.Owner)
	}
	trigger, why := "Reclaimed in doubt", "in doubt: "+goneOwner(u.Owner)
	if c.Owner == nil {
		trigger, why = "Compensation interrupted", c.Error
	}
	u.Owner, u.UpdatedAt = c.Owner, now
	err := saveUndoStep(tx, sess, &e, e.State, u, HistoryRecord{Kind: KindUndo, From: string(u.State), To: string(u.State),
		Trigger: trigger, Actor: actorOr(c.Actor), Reason: c.Reason, Error: why, At: now})
	return *u, e, err
}

func goneOwner(o *Owner) string {
	if o == nil {
		return "no owner recorded"
	}
	return fmt.Sprintf("owner pid %d on %s gone", o.PID, o.Host)
}

// CallStillRunning refuses to compensate an executing effect whose owner
// lives (or runs on another host, which cannot be asked): the call is in
// flight, and would go on after its undo. One whose owner died is in doubt,
// and compensated on the spec's path.
func CallStillRunning(e Effect) error {
	switch e.Owner.Liveness() {
	case OwnerAlive, OwnerElsewhere:
		return fmt.Errorf("%w: effect %d %s is executing in %s: undo it once that call has ended", ErrInProgress, e.ID, e.Tool, e.Owner)
	}
	return nil
}
