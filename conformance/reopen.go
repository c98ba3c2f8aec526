package conformance

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// A request reopened after a failure waits as long as the first one
// did, and at most until the last time a log holds: one whose first round
// ended just before 2262 is not stored wrapped (in 1677) and rejected at
// once by system:timeout, halting the session though no one decided.
func testReopenedApprovalPastTheLastTime(t *testing.T, open opener) {
	s, clk := open(t)
	last := time.Unix(0, math.MaxInt64).UTC()
	timeout := last.Sub(clk.now()) - time.Minute // accepted: it ends a minute before the bound
	res := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "deploy",
		Tier: sm.Irreversible, Args: json.RawMessage(`{}`), ApprovalTimeout: timeout, CreateSession: true}))
	id := res.Effect.ID
	must[model.Effect](t)(s.Approve(t.Context(), id, model.Change{Actor: "alice"}))
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
	clk.add(time.Hour)
	must[model.Effect](t)(s.Fail(t.Context(), id, model.Change{Error: "exit status 1"}))
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	if a := d.Approval; a.ExpiresAt != nil && a.ExpiresAt.Before(a.RequestedAt) {
		t.Errorf("reopened request expires at %v, before it was requested (%v)", a.ExpiresAt, a.RequestedAt)
	}
	if got := d.Decision(clk.now()); got != model.DecisionWaiting {
		t.Errorf("reopened request: decision %v, want waiting", got)
	}
	again := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "deploy",
		Tier: sm.Irreversible, Args: json.RawMessage(`{}`), ApprovalTimeout: time.Hour}))
	if again.Outcome == model.OutcomeRejected {
		t.Errorf("the retry was rejected, though no one decided: %+v", again.Effect)
	}
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "s")); sess.State == sm.SessionHalted {
		t.Errorf("session halted by an expiry that never came: %+v", sess)
	}
}
