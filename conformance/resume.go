package conformance

import (
	"errors"
	"testing"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// A session a rejection halted takes no calls until a person resumes it,
// saying why; the rejected effect stays rejected and its call made again
// asks again, and a request the halt closed is asked again when its call
// comes again. A session its undo
// halted is not resumed.
func testResumeAHaltedSession(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	ctx := t.Context()
	sendID := intercept(t, s, "h", "send", sm.Irreversible, `{"to":"x"}`).Effect.ID
	payID := intercept(t, s, "h", "pay", sm.Irreversible, `{"n":1}`).Effect.ID
	must[model.Effect](t)(s.Reject(ctx, sendID, model.Change{Actor: "alice", Reason: "wrong address"}))
	if _, err := s.Intercept(ctx, proxyRequest("h", "write", sm.Compensable, `{}`)); !errors.Is(err, model.ErrSessionNotActive) {
		t.Fatalf("a call in a halted session: %v", err)
	}
	before := must[[]model.HistoryRecord](t)(s.SessionHistory(ctx, "h"))
	if _, err := s.SetSessionState(ctx, "h", sm.SessionActive, model.Change{Actor: "bob"}); !errors.Is(err, model.ErrInvalidInput) {
		t.Fatalf("a resume without a reason: %v", err)
	}
	if got := must[[]model.HistoryRecord](t)(s.SessionHistory(ctx, "h")); len(got) != len(before) {
		t.Fatal("a refused resume wrote a record")
	}
	sess := must[model.Session](t)(s.SetSessionState(ctx, "h", sm.SessionActive, model.Change{Actor: "bob", Reason: "address fixed"}))
	hist := must[[]model.HistoryRecord](t)(s.SessionHistory(ctx, "h"))
	last := hist[len(hist)-1]
	if sess.State != sm.SessionActive || last.From != "halted" || last.To != "active" || last.Trigger != sm.TriggerSessionResumed ||
		last.Actor != "bob" || last.Reason != "address fixed" {
		t.Fatalf("resumed %+v, last record %+v", sess, last)
	}
	if r := intercept(t, s, "h", "write", sm.Compensable, `{}`); r.Outcome != model.OutcomeNew {
		t.Fatalf("a call after the resume: %+v", r)
	}
	// pay's request was closed by the halt: its call asks again.
	if d := must[model.EffectDetail](t)(s.GetEffect(ctx, payID)); d.Approval.Outcome != model.ApprovalClosed {
		t.Fatalf("pay's request after the halt: %+v", d.Approval)
	}
	if r := intercept(t, s, "h", "pay", sm.Irreversible, `{"n":1}`); r.Outcome != model.OutcomeInProgress || r.Effect.ID != payID {
		t.Fatalf("pay again: %+v", r)
	}
	if list := pending(t, s); len(list) != 1 || list[0].EffectID != payID {
		t.Fatalf("waiting requests %+v", list)
	}
	must[model.Effect](t)(s.Approve(ctx, payID, model.Change{Actor: "bob"}))
	if got := must[model.Session](t)(s.GetSession(ctx, "h")); got.State != sm.SessionActive {
		t.Fatalf("session after the approval: %s", got.State)
	}
	// The rejected call made again is a new call that asks again; the
	// rejected effect stays rejected.
	if r := intercept(t, s, "h", "send", sm.Irreversible, `{"to":"x"}`); r.Outcome != model.OutcomeNew || r.Effect.ID == sendID || r.Effect.State != sm.Pending {
		t.Fatalf("the rejected call again: %+v", r)
	}
	if d := must[model.EffectDetail](t)(s.GetEffect(ctx, sendID)); d.Effect.State != sm.Rejected {
		t.Fatalf("the rejected effect after its call asked again: %s", d.Effect.State)
	}

	// Halted by its undo: not resumed.
	intercept(t, s, "u", "write", sm.Compensable, `{}`)
	must[model.Session](t)(s.SetSessionState(ctx, "u", sm.SessionCompensating, model.Change{}))
	must[model.Session](t)(s.SetSessionState(ctx, "u", sm.SessionHalted, model.Change{Reason: "compensation failed"}))
	if _, err := s.SetSessionState(ctx, "u", sm.SessionActive, model.Change{Actor: "bob", Reason: "go on"}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("a resume of a session its undo halted: %v", err)
	}
	if got := must[model.Session](t)(s.GetSession(ctx, "u")); got.State != sm.SessionHalted {
		t.Fatalf("session u is %s", got.State)
	}
	verifyClean(t, s)
}
