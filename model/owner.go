package model

import (
	"fmt"
	"os"
	"time"
)

// Owners are judged here, once, for exec, the proxy, the undo runner and
// the log: a live owner is never overtaken; a dead one leaves its work in
// doubt.

// HostName is the name of this host as owners record it: $UNDOLOG_HOST,
// else the system's host name. Containers or runners that share a host name
// while sharing a log (a database) set UNDOLOG_HOST apart, so that one never
// judges the other's processes as its own.
func HostName() string {
	if h := os.Getenv("UNDOLOG_HOST"); h != "" {
		return h
	}
	host, _ := os.Hostname()
	return host
}

// NewOwner is this process as the owner of work it starts at now.
func NewOwner(now time.Time) *Owner {
	host := HostName()
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
	if o.Host != HostName() {
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
