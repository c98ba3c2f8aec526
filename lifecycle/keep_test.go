package lifecycle_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/logaddr"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// serverTime stands for a tool answering: far longer than the file
// engine's linger after a write (1 ms), far shorter than its bound on a
// hold kept for an expected write (1 s).
const serverTime = 30 * time.Millisecond

// settleTime is long enough for a log let go to be closed (it lingers 1 ms).
const settleTime = 100 * time.Millisecond

// A call that runs keeps the file log open from its intercept to its end
// (nobody else waits for it) when its lifecycle holds the log (the proxy's):
// its commit opens nothing. A call that does not run now (an irreversible
// call waiting for a decision) keeps nothing, and neither does a call of a
// lifecycle that does not hold (exec's): its commit opens the log again.
func TestARunningCallKeepsTheFileLog(t *testing.T) {
	log := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	t.Cleanup(func() { log.Close() })
	opens := log.(interface{ Engine() storage.Engine }).Engine().(interface{ Opens() int64 }).Opens
	req := func(tier sm.Tier, arg string) effectlog.InterceptRequest {
		return effectlog.InterceptRequest{Session: "s", Tool: "t", Tier: tier, Args: json.RawMessage(arg), CreateSession: true, Actor: "a"}
	}
	exec := &lifecycle.Lifecycle{Log: log}
	time.Sleep(settleTime)
	before := opens()
	c, err := exec.Intercept(t.Context(), req(sm.Compensable, `0`))
	if err != nil || !c.Started {
		t.Fatalf("intercept: %+v %v", c, err)
	}
	time.Sleep(settleTime) // the command runs: not an assertion
	if err := exec.Commit(t.Context(), c, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if n := opens() - before; n != 2 {
		t.Fatalf("a call of a lifecycle that does not hold opened the log %d times, want 2: it kept it while the command ran", n)
	}
	lc := &lifecycle.Lifecycle{Log: log, Hold: true}
	for i, arg := range []string{`1`, `2`} {
		time.Sleep(settleTime) // the log lingers after the last write, then goes
		before := opens()
		c, err := lc.Intercept(t.Context(), req(sm.Compensable, arg))
		if err != nil || !c.Started {
			t.Fatalf("intercept: %+v %v", c, err)
		}
		time.Sleep(serverTime) // the tool runs: not an assertion
		if err := lc.Commit(t.Context(), c, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if n := opens() - before; n > 1 {
			t.Fatalf("call %d opened the log %d times, want 1 (its intercept)", i+1, n)
		}
	}
	time.Sleep(settleTime)
	c, err = lc.Intercept(t.Context(), req(sm.Irreversible, `3`))
	if err != nil || c.Started || !c.NeedsDecision() {
		t.Fatalf("irreversible intercept: %+v %v", c, err)
	}
	time.Sleep(settleTime) // a decision is awaited: not an assertion
	before = opens()
	if _, err := log.GetEffect(t.Context(), c.Effect.ID); err != nil {
		t.Fatal(err)
	}
	if n := opens() - before; n != 1 {
		t.Fatalf("a read while a decision is awaited opened the log %d times, want 1: the intercept kept it", n)
	}
}
