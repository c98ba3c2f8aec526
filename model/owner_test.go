package model

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

func TestOwnerLiveness(t *testing.T) {
	self := NewOwner(time.Now())
	if got := self.Liveness(); got != OwnerAlive {
		t.Fatalf("this process: %v", got)
	}
	var none *Owner
	if got := none.Liveness(); got != OwnerNone {
		t.Fatalf("no owner: %v", got)
	}
	far := *self
	far.Host += "-elsewhere"
	if got := far.Liveness(); got != OwnerElsewhere {
		t.Fatalf("another host: %v", got)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := *self
	dead.PID = gone.Process.Pid
	if got := dead.Liveness(); got != OwnerDead {
		t.Fatalf("an exited process: %v", got)
	}
	// An owner recorded before start times were (an older log) is judged by its pid.
	old := *self
	old.ProcessStart = 0
	if got := old.Liveness(); got != OwnerAlive {
		t.Fatalf("without a start time: %v", got)
	}
}

// A pid the system gave to another process since is not the owner: the owner
// recorded with it is dead, though a process with its pid lives.
func TestOwnerWithAReusedPidIsDead(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process start times are read on Linux only")
	}
	self := NewOwner(time.Now())
	if self.ProcessStart == 0 {
		t.Fatal("no start time recorded for this process")
	}
	reused := *self
	reused.ProcessStart++ // the owner that had this pid started at another time
	if got := reused.Liveness(); got != OwnerDead {
		t.Fatalf("pid %d of a live process, another start time: %v, want dead", reused.PID, got)
	}
	if os.Getpid() != reused.PID {
		t.Fatal("NewOwner is not this process")
	}
}

// UNDOLOG_HOST names this host for owners: an owner recorded under another
// name runs elsewhere, even with this machine's host name and a live pid.
func TestHostNameFromTheEnvironment(t *testing.T) {
	t.Setenv("UNDOLOG_HOST", "runner-7")
	o := NewOwner(time.Now())
	if o.Host != "runner-7" || o.Liveness() != OwnerAlive {
		t.Fatalf("%+v: %v", o, o.Liveness())
	}
	machine, _ := os.Hostname()
	same := *o
	same.Host = machine
	if same.Liveness() != OwnerElsewhere {
		t.Fatalf("an owner on %s, seen as runner-7: %v", machine, same.Liveness())
	}
}

// On another host an owner's lease answers for it: one that holds is alive
// (never overtaken), one that ran out is in doubt, none (older logs) is
// alive as before leases. On this host the pid wins over the lease.
func TestOwnerLeaseJudgesOwnersOnOtherHosts(t *testing.T) {
	t.Setenv("UNDOLOG_HOST", "m2")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	far := &Owner{PID: 4242, Host: "m1", StartedAt: now.Add(-time.Minute)}
	if got := far.LivenessAt(now); got != OwnerElsewhere {
		t.Fatalf("no lease, another host: %v", got)
	}
	leased := far.WithLease(now.Add(time.Second))
	if got := leased.LivenessAt(now); got != OwnerElsewhere {
		t.Fatalf("a lease that holds: %v", got)
	}
	if got := leased.LivenessAt(now.Add(time.Second)); got != OwnerLapsed {
		t.Fatalf("a lease that ran out just now: %v", got)
	}
	if got, want := leased.Gone(OwnerLapsed), "lease expired at 2026-12-01T12:00:01Z (last renewed by pid 4242 on m1)"; got != want {
		t.Fatalf("Gone: %q, want %q", got, want)
	}
	if !leased.Same(far) || leased.Identity().LeaseUntil != (time.Time{}) || far.LeaseUntil != (time.Time{}) {
		t.Fatalf("a lease is not part of who the owner is: %+v %+v", leased, far)
	}
	e := Effect{ID: 3, Tool: "w", Owner: leased}
	if err := CallStillRunning(e, now); err == nil {
		t.Fatal("a call under a lease that holds is not running")
	}
	if err := CallStillRunning(e, now.Add(time.Hour)); err != nil {
		t.Fatalf("a call whose lease ran out: %v", err)
	}
	// This process, its lease long run out: alive, as its pid runs here.
	self := NewOwner(now).WithLease(now)
	if got := self.LivenessAt(now.Add(time.Hour)); got != OwnerAlive {
		t.Fatalf("this process with an expired lease: %v", got)
	}
}

func TestLeaseFromEnv(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	if d, err := LeaseFromEnv(env("")); err != nil || d != DefaultLease {
		t.Fatalf("unset: %v %v", d, err)
	}
	if d, err := LeaseFromEnv(env("1500ms")); err != nil || d != 1500*time.Millisecond {
		t.Fatalf("1500ms: %v %v", d, err)
	}
	for _, bad := range []string{"soon", "0", "-1s", "1ms", "25h"} {
		if _, err := LeaseFromEnv(env(bad)); !errors.Is(err, ErrInvalidInput) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}
