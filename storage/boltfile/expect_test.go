package boltfile

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// serverTime stands for an MCP server answering a call: far longer than
// linger, far shorter than maxExpect.
const serverTime = 30 * linger

// lifecycleAcross runs a call's intercept (started) and, serverTime later,
// its commit, as the proxy does, and returns how often the process opened
// the log meanwhile.
func lifecycleAcross(t *testing.T, s *testLog, arg string) int64 {
	t.Helper()
	before := s.Opens()
	res, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(arg), CreateSession: true, Start: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(serverTime) // the call runs: not an assertion
	if _, err := s.Commit(t.Context(), res.Effect.ID, model.Change{Result: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	return s.Opens() - before
}

// While a write is expected, the committer keeps the log past linger: the
// commit of a call goes on in the transaction of its intercept. Without the
// expectation it reopens the log (and replays the journal).
func TestExpectedWriteKeepsTheLog(t *testing.T) {
	s, _ := newStore(t)
	done := s.ExpectWrite()
	if n := lifecycleAcross(t, s, `1`); n != 1 {
		t.Fatalf("a call with its commit expected opened the log %d times, want 1", n)
	}
	if n := lifecycleAcross(t, s, `2`); n != 0 {
		t.Fatalf("the next call opened the log %d times, want 0: it was kept", n)
	}
	done()
	done() // a second call changes nothing
	if got := s.group.expecting.Load(); got != 0 {
		t.Fatalf("%d writes expected after done, want 0", got)
	}
	waitCommitterStops(t, s)
	if n := lifecycleAcross(t, s, `3`); n != 2 {
		t.Fatalf("a call with nothing expected opened the log %d times, want 2 (it lingers %s only)", n, linger)
	}
}

// A log kept for an expected write goes at once to another process that
// waits for it: the other's writes get through with a lock timeout shorter
// than maxExpect, and this process's commit then opens the log again.
func TestKeptLogGoesToAWaitingProcess(t *testing.T) {
	s, _ := newStore(t)
	done := s.ExpectWrite()
	defer done()
	before := s.Opens()
	res, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`1`), CreateSession: true, Start: true})
	if err != nil {
		t.Fatal(err)
	}
	cmd := writerCmd(t, "count:3", s.Path(), "other")
	cmd.Env = append(cmd.Env, "UNDOLOG_TEST_LOCK_TIMEOUT="+(maxExpect/2).String())
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); ok {
			t.Fatalf("the other process did not get the kept log within %s: %v", maxExpect/2, err)
		}
		t.Fatal(err)
	}
	if got := len(strings.Fields(out.String())); got != 3 {
		t.Fatalf("the other process acknowledged %d calls, want 3", got)
	}
	if _, err := s.Commit(t.Context(), res.Effect.ID, model.Change{Result: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if n := s.Opens() - before; n != 2 {
		t.Fatalf("this process opened the log %d times, want 2: it let the log go and took it back", n)
	}
	sess, err := s.GetSession(t.Context(), "other")
	if err != nil || sess.Effects != 3 {
		t.Fatalf("the other process's session: %+v %v", sess, err)
	}
}

// waitCommitterStops waits (boundedly) until the committer let the log go
// and stopped, as it does once it lingered for nothing.
func waitCommitterStops(t *testing.T, s *testLog) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		s.group.mu.Lock()
		running := s.group.running
		s.group.mu.Unlock()
		if !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the committer still holds the log 10 s after the expected write was done")
		}
		time.Sleep(time.Millisecond)
	}
}
