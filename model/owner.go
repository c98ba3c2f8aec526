package model

import (
	"fmt"
	"os"
	"sync"
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
	return self().host
}

// self is this process's host name and start, read once: a proxy makes an
// owner for every call, and each read is a file's (/proc, the host name).
var self = sync.OnceValue(func() (s struct {
	host  string
	start uint64
}) {
	s.host, _ = os.Hostname()
	s.start, _ = processStart(os.Getpid())
	return s
})

// NewOwner is this process as the owner of work it starts at now.
func NewOwner(now time.Time) *Owner {
	return &Owner{PID: os.Getpid(), Host: HostName(), StartedAt: now.UTC(), ProcessStart: self().start}
}

// OwnerOf is process pid of this host as the owner of work it starts at
// now: a door whose calls run in the process that asked it (a coding
// agent's tool, run between its hooks).
func OwnerOf(pid int, now time.Time) *Owner {
	start, _ := processStart(pid)
	return &Owner{PID: pid, Host: HostName(), StartedAt: now.UTC(), ProcessStart: start}
}

// SameProcess reports whether o and p are one process (whatever work each
// took, and when).
func (o *Owner) SameProcess(p *Owner) bool {
	return o != nil && p != nil && o.PID == p.PID && o.Host == p.Host && o.ProcessStart == p.ProcessStart
}

// DefaultLease is how long an owner's lease lasts unless its process renews
// it; a running call renews it every third of that (see lifecycle).
const DefaultLease = 30 * time.Second

// LeaseFromEnv is the lease duration $UNDOLOG_LEASE sets (a Go duration,
// such as 30s or 2m), else DefaultLease.
func LeaseFromEnv(getenv func(string) string) (time.Duration, error) {
	v := getenv("UNDOLOG_LEASE")
	if v == "" {
		return DefaultLease, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 10*time.Millisecond || d > 24*time.Hour {
		return 0, fmt.Errorf("%w: UNDOLOG_LEASE=%q: want a duration from 10ms to 24h, such as 30s", ErrInvalidInput, v)
	}
	return d, nil
}

// WithLease is a copy of o whose lease runs until `until`.
func (o *Owner) WithLease(until time.Time) *Owner {
	if o == nil {
		return nil
	}
	c := *o
	c.LeaseUntil = until.UTC()
	return &c
}

// Identity is a copy of o without its lease: what a caller that owns the
// work expects to find (its renewals have moved the lease it recorded).
func (o *Owner) Identity() *Owner {
	return o.WithLease(time.Time{})
}

// Liveness is what this host can tell about an owner.
type Liveness int

// Liveness of an owner.
const (
	OwnerNone      Liveness = iota // no owner recorded: in doubt
	OwnerAlive                     // its process runs on this host
	OwnerDead                      // its process is gone (or its pid now names another process): in doubt
	OwnerElsewhere                 // it runs on another host, which cannot be asked from here (its lease, if any, holds)
	OwnerLapsed                    // it ran on another host, and its lease ran out unrenewed: in doubt
)

// Liveness judges the owner from this host now (see LivenessAt).
func (o *Owner) Liveness() Liveness { return o.LivenessAt(time.Now()) }

// LivenessAt judges the owner from this host at now (the log's clock). A pid
// alone is not the process: the system reuses pids, so where the start time
// of the process was recorded, a process with that pid and another start
// time is another process, and the owner is dead.
//
// On another host the process cannot be asked; its lease answers: one its
// process keeps renewing holds (never overtaken), one that ran out means it
// is gone or cut off from the log, and its work is in doubt. An owner with
// no lease (older logs) on another host is taken as alive, as before leases.
// On this host the pid wins over the lease: a lease lapses while the log is
// unreachable, but a process that still runs may still be running the call,
// and running it again beside it is what the owner check exists to prevent.
func (o *Owner) LivenessAt(now time.Time) Liveness {
	if o == nil {
		return OwnerNone
	}
	if o.Host != HostName() {
		if o.Lapsed(now) {
			return OwnerLapsed
		}
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

// Lapsed reports whether o has a lease and it ran out by now.
func (o *Owner) Lapsed(now time.Time) bool {
	return o != nil && !o.LeaseUntil.IsZero() && !now.Before(o.LeaseUntil)
}

// Gone says, in a few words, why the work of owner o (judged l) is in
// doubt; for the messages of exec, the proxy, undo and the history.
func (o *Owner) Gone(l Liveness) string {
	switch {
	case o == nil:
		return "no owner recorded"
	case l == OwnerLapsed:
		return fmt.Sprintf("lease expired at %s (last renewed by pid %d on %s)", o.LeaseUntil.UTC().Format(time.RFC3339Nano), o.PID, o.Host)
	}
	return fmt.Sprintf("owner pid %d on %s gone", o.PID, o.Host)
}

// Same reports whether o and p are one owner: the same process that took
// the work at the same moment. Their leases may differ: a renewal moves it.
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
// lives (or runs on another host under a lease that holds, or with none),
// judged at now: the call is in flight, and would go on after its undo. One
// whose owner died or whose lease lapsed is in doubt, and compensated on the
// spec's path.
func CallStillRunning(e Effect, now time.Time) error {
	switch e.Owner.LivenessAt(now) {
	case OwnerAlive, OwnerElsewhere:
		return fmt.Errorf("%w: effect %d %s is executing in %s: undo it once that call has ended", ErrInProgress, e.ID, e.Tool, e.Owner)
	}
	return nil
}
