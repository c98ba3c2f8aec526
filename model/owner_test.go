package model

import (
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
