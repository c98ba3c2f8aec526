package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

func testIrreversibleApprovePath(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	res := intercept(t, s, "agent", "wire_money", sm.Irreversible, `{"amount":100}`)
	id := res.Effect.ID
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "agent")); sess.State != sm.SessionAwaitingApproval || sess.PendingApprovals != 1 {
		t.Fatalf("session %+v", sess)
	}
	pend := pending(t, s)
	if len(pend) != 1 || pend[0].EffectID != id || pend[0].Outcome != model.ApprovalPending || string(pend[0].Args) != `{"amount":100}` {
		t.Fatalf("approvals %+v", pend)
	}
	if again := intercept(t, s, "agent", "wire_money", sm.Irreversible, `{"amount":100}`); again.Outcome != model.OutcomeInProgress {
		t.Fatalf("repeat while waiting: %+v", again)
	}
	if _, err := s.Start(t.Context(), id, model.Change{}); !errors.Is(err, model.ErrInProgress) || !errors.Is(err, model.ErrAwaitsApproval) {
		t.Fatalf("start before approval: %v", err)
	}
	e := must[model.Effect](t)(s.Approve(t.Context(), id, model.Change{Actor: "alice", Reason: "looks right"}))
	if e.State != sm.Approved {
		t.Fatalf("%+v", e)
	}
	// A decision is final: a second one is an invalid transition.
	if _, err := s.Approve(t.Context(), id, model.Change{Actor: "bob"}); !errors.Is(err, sm.ErrInvalidStateTransition) || !strings.Contains(err.Error(), "already approved by alice") {
		t.Fatalf("second decision: %v", err)
	}
	if _, err := s.Reject(t.Context(), id, model.Change{Actor: "bob"}); !errors.Is(err, sm.ErrInvalidStateTransition) || !strings.Contains(err.Error(), "approved -> rejected") {
		t.Fatalf("second decision: %v", err)
	}
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	if d.Approval.Outcome != model.ApprovalApproved || d.Approval.DecidedBy != "alice" || d.Approval.Decision != "looks right" {
		t.Fatalf("approval %+v", d.Approval)
	}
	if last := d.History[len(d.History)-1]; last.Actor != "alice" || last.Reason != "looks right" || last.To != "approved" {
		t.Fatalf("decision record %+v", last)
	}
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "agent")); sess.State != sm.SessionActive || sess.PendingApprovals != 0 {
		t.Fatalf("session after approval %+v", sess)
	}
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
	must[model.Effect](t)(s.Commit(t.Context(), id, model.Change{Result: json.RawMessage(`{"ok":true}`)}))
	if n := len(pending(t, s)); n != 0 {
		t.Fatalf("%d approvals still listed", n)
	}
	verifyClean(t, s)
}

func testRejectHaltsSession(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	id := intercept(t, s, "agent", "rm_rf", sm.Irreversible, `{"path":"/"}`).Effect.ID
	e := must[model.Effect](t)(s.Reject(t.Context(), id, model.Change{Actor: "carol", Reason: "no"}))
	if e.State != sm.Rejected {
		t.Fatalf("%+v", e)
	}
	sess := must[model.Session](t)(s.GetSession(t.Context(), "agent"))
	if sess.State != sm.SessionHalted {
		t.Fatalf("session %s", sess.State)
	}
	if _, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "agent", Tool: "other", Tier: sm.Compensable}); !errors.Is(err, model.ErrSessionNotActive) {
		t.Fatalf("new call in halted session: %v", err)
	}
	if again := intercept(t, s, "agent", "rm_rf", sm.Irreversible, `{"path":"/"}`); again.Outcome != model.OutcomeRejected || again.Effect.ID != id {
		t.Fatalf("repeat of rejected call: %+v", again)
	}
	hist := must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), "agent"))
	if got := states(hist); got != "session:>active session:active>awaiting_approval session:awaiting_approval>halted" {
		t.Fatalf("session history %s", got)
	}
	verifyClean(t, s)
}

func testApprovalExpiry(t *testing.T, newStore opener) {
	s, clk := newStore(t)
	res := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "ci", Tool: "deploy", Tier: sm.Irreversible,
		CreateSession: true, ApprovalTimeout: time.Minute}))
	if n := len(pending(t, s)); n != 1 {
		t.Fatalf("%d waiting", n)
	}
	clk.add(2 * time.Minute)
	if n := len(pending(t, s)); n != 0 {
		t.Fatalf("expired request still listed as waiting")
	}
	// Nobody answered: no one decides it late, and nothing ran.
	for _, decide := range []func(context.Context, uint64, model.Change) (model.Effect, error){s.Approve, s.Reject} {
		if _, err := decide(t.Context(), res.Effect.ID, model.Change{Actor: "late"}); !errors.Is(err, model.ErrConflict) || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("decision after expiry: %v", err)
		}
	}
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID))
	if d.Effect.State != sm.Pending || d.Approval.Outcome != model.ApprovalTimedOut || d.Approval.DecidedBy != model.TimeoutActor || d.Effect.HistoryLen != 1 {
		t.Fatalf("after expiry: %+v %+v", d.Effect, d.Approval)
	}
	// That is no rejection: the session is not halted, and the same call,
	// run again, asks again (as long as the first request waited).
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "ci")); sess.State != sm.SessionActive || sess.PendingApprovals != 0 {
		t.Fatalf("session after expiry: %+v", sess)
	}
	again := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "ci", Tool: "deploy", Tier: sm.Irreversible}))
	if again.Outcome != model.OutcomeInProgress || again.Effect.ID != res.Effect.ID {
		t.Fatalf("the same call again: %+v", again)
	}
	d = must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID))
	if a := d.Approval; a.Outcome != model.ApprovalPending || len(a.Earlier) != 1 || a.Earlier[0].Outcome != model.ApprovalTimedOut ||
		a.ExpiresAt == nil || !a.ExpiresAt.Equal(clk.now().Add(time.Minute)) {
		t.Fatalf("asked again: %+v", a)
	}
	if n := len(pending(t, s)); n != 1 {
		t.Fatalf("%d waiting", n)
	}
	must[model.Effect](t)(s.Approve(t.Context(), res.Effect.ID, model.Change{Actor: "alice"}))
	verifyClean(t, s)

	// The index of waiting requests moved on behind the rules (an agent's
	// SQL): the request's own record says when it expires, and a decision
	// past that is refused.
	late := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "ci", Tool: "wire", Tier: sm.Irreversible,
		ApprovalTimeout: time.Minute}))
	forever := clk.now().Add(24 * 365 * time.Hour)
	behindTheRules(t, s, func(tx storage.WriteTx) error { return tx.OpenRequest(late.Effect.ID, "ci", &forever) })
	clk.add(2 * time.Minute)
	if _, err := s.Approve(t.Context(), late.Effect.ID, model.Change{Actor: "alice"}); !errors.Is(err, model.ErrConflict) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("a decision past the request's own expiry: %v", err)
	}
	if d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), late.Effect.ID)); d.Effect.State != sm.Pending {
		t.Fatalf("the late decision moved the effect: %s", d.Effect.State)
	}
	// The same call made again before any decision also finds the request
	// over by its own record, and asks again.
	ask := func() effectlog.InterceptResult {
		return must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "ci", Tool: "wire2",
			Tier: sm.Irreversible, ApprovalTimeout: time.Minute}))
	}
	first := ask()
	forever = clk.now().Add(24 * 365 * time.Hour)
	behindTheRules(t, s, func(tx storage.WriteTx) error { return tx.OpenRequest(first.Effect.ID, "ci", &forever) })
	clk.add(2 * time.Minute)
	if r := ask(); r.Effect.ID != first.Effect.ID || r.Outcome != model.OutcomeInProgress {
		t.Fatalf("the same call once its request is over by its record: %+v", r)
	}
	if d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), first.Effect.ID)); d.Approval.Outcome != model.ApprovalPending || len(d.Approval.Earlier) != 1 ||
		d.Approval.Earlier[0].Outcome != model.ApprovalTimedOut {
		t.Fatalf("asked again: %+v", d.Approval)
	}
	must[model.Effect](t)(s.Approve(t.Context(), first.Effect.ID, model.Change{Actor: "alice"}))
	// The refusal closed the request as timed out, as the sweep would have
	// (the index hid it from that): the session waits no more, and the same
	// call, as the refusal says, asks again.
	d = must[model.EffectDetail](t)(s.GetEffect(t.Context(), late.Effect.ID))
	if d.Approval.Outcome != model.ApprovalTimedOut || d.Approval.DecidedBy != model.TimeoutActor {
		t.Fatalf("the request a refusal found past its expiry: %+v", d.Approval)
	}
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "ci")); sess.State != sm.SessionActive || sess.PendingApprovals != 0 {
		t.Fatalf("the session after that: %s, %d waiting", sess.State, sess.PendingApprovals)
	}
	if again := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "ci", Tool: "wire", Tier: sm.Irreversible,
		ApprovalTimeout: time.Minute})); again.Effect.ID != late.Effect.ID || again.Outcome != model.OutcomeInProgress {
		t.Fatalf("the same call again: %+v", again)
	}
	must[model.Effect](t)(s.Approve(t.Context(), late.Effect.ID, model.Change{Actor: "alice"}))
	verifyClean(t, s)
}

func testSecondDecisionIsInvalidTransition(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	approved := intercept(t, s, "a", "pay", sm.Irreversible, `{"n":1}`).Effect.ID
	rejected := intercept(t, s, "b", "pay", sm.Irreversible, `{"n":2}`).Effect.ID
	must[model.Effect](t)(s.Approve(t.Context(), approved, model.Change{Actor: "alice"}))
	must[model.Effect](t)(s.Reject(t.Context(), rejected, model.Change{Actor: "dana", Reason: "no"}))
	cases := []struct {
		id     uint64
		to     sm.State
		reason string
		who    string
	}{
		{approved, sm.Approved, sm.ReasonNoSkipping, "already approved by alice"},
		{approved, sm.Rejected, sm.ReasonNoSkipping, "already approved by alice"},
		{rejected, sm.Approved, sm.ReasonTerminal, "already rejected by dana"},
		{rejected, sm.Rejected, sm.ReasonTerminal, "already rejected by dana"},
	}
	for _, c := range cases {
		before := must[model.EffectDetail](t)(s.GetEffect(t.Context(), c.id))
		_, err := s.Transition(t.Context(), c.id, c.to, model.Change{Actor: "bob"})
		var te *sm.TransitionError
		if !errors.As(err, &te) || te.Reason != c.reason || !strings.Contains(err.Error(), c.who) {
			t.Errorf("effect %d -> %s: %v", c.id, c.to, err)
		}
		after := must[model.EffectDetail](t)(s.GetEffect(t.Context(), c.id))
		if len(after.History) != len(before.History) || after.Approval.DecidedBy != before.Approval.DecidedBy {
			t.Errorf("effect %d changed: %+v", c.id, after.Approval)
		}
	}
	verifyClean(t, s)
}

func testFailedIrreversibleNeedsNewDecision(t *testing.T, newStore opener) {
	s, clk := newStore(t)
	res := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "pay", Tool: "wire", Tier: sm.Irreversible,
		CreateSession: true, ApprovalTimeout: time.Hour}))
	id := res.Effect.ID
	must[model.Effect](t)(s.Approve(t.Context(), id, model.Change{Actor: "alice", Reason: "checked"}))
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
	clk.add(10 * time.Minute)
	must[model.Effect](t)(s.Fail(t.Context(), id, model.Change{Error: "bank down"}))

	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	a := d.Approval
	if a.Outcome != model.ApprovalPending || !a.RequestedAt.Equal(clk.now()) || a.ExpiresAt == nil || !a.ExpiresAt.Equal(clk.now().Add(time.Hour)) {
		t.Fatalf("no new request: %+v", a)
	}
	if len(a.Earlier) != 1 || a.Earlier[0].Outcome != model.ApprovalApproved || a.Earlier[0].DecidedBy != "alice" || a.Earlier[0].Decision != "checked" {
		t.Fatalf("earlier decision lost: %+v", a.Earlier)
	}
	if got := d.Decision(clk.now()); got != model.DecisionWaiting {
		t.Fatalf("decision %v, want waiting", got)
	}
	if p := pending(t, s); len(p) != 1 || p[0].EffectID != id {
		t.Fatalf("approvals %+v", p)
	}
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "pay")); sess.State != sm.SessionAwaitingApproval || sess.PendingApprovals != 1 {
		t.Fatalf("session %+v", sess)
	}
	if _, err := s.Start(t.Context(), id, model.Change{}); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("start on the old approval: %v", err)
	}
	again := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "pay", Tool: "wire", Tier: sm.Irreversible, Start: true}))
	if again.Outcome != model.OutcomeInProgress || again.Effect.State != sm.Pending {
		t.Fatalf("retry ran on the old approval: %+v", again)
	}

	must[model.Effect](t)(s.Approve(t.Context(), id, model.Change{Actor: "bob", Reason: "bank is back"}))
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
	must[model.Effect](t)(s.Fail(t.Context(), id, model.Change{}))
	e := must[model.Effect](t)(s.Reject(t.Context(), id, model.Change{Actor: "carol", Reason: "enough"}))
	if e.State != sm.Rejected {
		t.Fatalf("reject after a failure: %+v", e)
	}
	d = must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	var who []string
	for _, r := range d.Approval.Earlier {
		who = append(who, r.Outcome+":"+r.DecidedBy)
	}
	who = append(who, d.Approval.Outcome+":"+d.Approval.DecidedBy)
	if got := strings.Join(who, " "); got != "approved:alice approved:bob rejected:carol" {
		t.Fatalf("decisions %s", got)
	}
	if got := states(d.History); got != "effect:>pending effect:pending>approved effect:approved>executing effect:executing>pending "+
		"effect:pending>approved effect:approved>executing effect:executing>pending effect:pending>rejected" {
		t.Fatalf("history %s", got)
	}
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "pay")); sess.State != sm.SessionHalted || sess.PendingApprovals != 0 {
		t.Fatalf("session %+v", sess)
	}
	verifyClean(t, s)
}

func testSessionMoveClosesApprovals(t *testing.T, newStore opener) {
	for _, to := range []sm.SessionState{sm.SessionCompleted, sm.SessionFailed, sm.SessionHalted, sm.SessionCompensating} {
		t.Run(string(to), func(t *testing.T) {
			s, _ := newStore(t)
			id := intercept(t, s, "run", "deploy", sm.Irreversible, `{}`).Effect.ID
			other := intercept(t, s, "other", "deploy", sm.Irreversible, `{}`).Effect.ID
			must[model.Session](t)(s.SetSessionState(t.Context(), "run", to, model.Change{Actor: "ci"}))
			if p := pending(t, s); len(p) != 1 || p[0].EffectID != other {
				t.Fatalf("approvals %+v", p)
			}
			for _, decide := range []func(context.Context, uint64, model.Change) (model.Effect, error){s.Approve, s.Reject} {
				if _, err := decide(t.Context(), id, model.Change{Actor: "alice"}); !errors.Is(err, model.ErrSessionNotActive) {
					t.Fatalf("decision on a closed request: %v", err)
				}
			}
			d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
			a := d.Approval
			if d.Effect.State != sm.Pending || a.Outcome != model.ApprovalClosed || a.DecidedBy != model.SessionActor ||
				a.Decision != "session "+string(to) || a.DecidedAt == nil {
				t.Fatalf("after the session moved: %+v %+v", d.Effect, a)
			}
			if got := d.Decision(time.Now()); got != model.DecisionClosed {
				t.Fatalf("decision %v, want closed", got)
			}
			if sess := must[model.Session](t)(s.GetSession(t.Context(), "run")); sess.PendingApprovals != 0 || sess.State != to {
				t.Fatalf("session %+v", sess)
			}
			verifyClean(t, s)
		})
	}
}

func testRejectionClosesOtherRequests(t *testing.T, newStore opener) {
	s, clk := newStore(t)
	a := intercept(t, s, "run", "a", sm.Irreversible, `{}`).Effect.ID
	b := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "run", Tool: "b", Tier: sm.Irreversible, ApprovalTimeout: time.Minute})).Effect.ID
	c := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "run", Tool: "c", Tier: sm.Irreversible, ApprovalTimeout: time.Minute})).Effect.ID
	d := intercept(t, s, "run", "d", sm.Irreversible, `{}`).Effect.ID
	clk.add(2 * time.Minute)
	// Timeouts reject nothing and halt nothing: a and d still wait.
	if n := must[int](t)(s.ExpireApprovals(t.Context(), "run")); n != 2 {
		t.Fatalf("%d expired", n)
	}
	for _, id := range []uint64{b, c} {
		if det := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id)); det.Approval.Outcome != model.ApprovalTimedOut || det.Effect.State != sm.Pending {
			t.Fatalf("effect %d: %+v %+v", id, det.Effect, det.Approval)
		}
	}
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "run")); sess.State != sm.SessionAwaitingApproval || sess.PendingApprovals != 2 {
		t.Fatalf("session after timeouts: %+v", sess)
	}
	// A person's rejection halts the session and closes the requests still waiting.
	must[model.Effect](t)(s.Reject(t.Context(), a, model.Change{Actor: "dana", Reason: "no"}))
	if det := must[model.EffectDetail](t)(s.GetEffect(t.Context(), d)); det.Approval.Outcome != model.ApprovalClosed || det.Effect.State != sm.Pending ||
		det.Approval.Decision != "session halted" {
		t.Fatalf("effect %d: %+v %+v", d, det.Effect, det.Approval)
	}
	if det := must[model.EffectDetail](t)(s.GetEffect(t.Context(), b)); det.Approval.Outcome != model.ApprovalTimedOut {
		t.Fatalf("effect %d: %+v", b, det.Approval)
	}
	if n := len(pending(t, s)); n != 0 {
		t.Fatalf("%d still waiting", n)
	}
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "run")); sess.State != sm.SessionHalted || sess.PendingApprovals != 0 {
		t.Fatalf("session after the rejection: %+v", sess)
	}
	verifyClean(t, s)
}

func testFailInClosedSessionClosesNewRequest(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	id := intercept(t, s, "run", "deploy", sm.Irreversible, `{}`).Effect.ID
	must[model.Effect](t)(s.Approve(t.Context(), id, model.Change{Actor: "alice"}))
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
	must[model.Session](t)(s.SetSessionState(t.Context(), "run", sm.SessionFailed, model.Change{}))
	must[model.Effect](t)(s.Fail(t.Context(), id, model.Change{Error: "boom"}))
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	if d.Approval.Outcome != model.ApprovalClosed || len(d.Approval.Earlier) != 1 || d.Approval.Earlier[0].DecidedBy != "alice" {
		t.Fatalf("approval %+v", d.Approval)
	}
	if n := len(pending(t, s)); n != 0 {
		t.Fatalf("%d waiting", n)
	}
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "run")); sess.PendingApprovals != 0 || sess.State != sm.SessionFailed {
		t.Fatalf("session %+v", sess)
	}
	verifyClean(t, s)
}

// An approval timeout that ends after the last time a log holds (2262) is
// refused and writes nothing; one of a century is kept as given.
func testApprovalTimeoutPastTheLastTimeIsRefused(t *testing.T, open opener) {
	s, _ := open(t)
	_, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "deploy", Tier: sm.Irreversible,
		Args: json.RawMessage(`{}`), ApprovalTimeout: time.Duration(1<<63 - 1), CreateSession: true})
	if !errors.Is(err, model.ErrInvalidInput) {
		t.Fatalf("a timeout past 2262: %v", err)
	}
	if _, err := s.GetSession(t.Context(), "s"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the refused call made its session: %v", err)
	}
	century := 100 * 365 * 24 * time.Hour
	res := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "deploy",
		Tier: sm.Irreversible, Args: json.RawMessage(`{}`), ApprovalTimeout: century, CreateSession: true}))
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID))
	if d.Approval.ExpiresAt == nil || d.Approval.ExpiresAt.Sub(d.Approval.RequestedAt) != century {
		t.Fatalf("expires at %v, requested at %v", d.Approval.ExpiresAt, d.Approval.RequestedAt)
	}
	if p := pending(t, s); len(p) != 1 {
		t.Fatalf("waiting: %v", p)
	}
	intercept(t, s, "s", "other", sm.Compensable, `{}`) // a write to the session expires nothing
	if d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID)); d.Effect.State != sm.Pending {
		t.Fatalf("the request is %s", d.Effect.State)
	}
	verifyClean(t, s)
}

// A decision made on what a person was shown (ExpectCall: the call
// signature of the effect they saw) moves the effect only while its id is
// that call: another call's is refused as a conflict, nothing written.
func testDecisionOnTheCallShown(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	res := intercept(t, s, "agent", "wire_money", sm.Irreversible, `{"amount":100}`)
	other := intercept(t, s, "agent", "drop_table", sm.Irreversible, `{"table":"users"}`)
	before := must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID))
	if _, err := s.Approve(t.Context(), res.Effect.ID, model.Change{Actor: "alice", ExpectCall: other.Effect.CallSignature}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("approval of another call than the one shown: %v", err)
	}
	if after := must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID)); after.Effect.State != sm.Pending || len(after.History) != len(before.History) {
		t.Fatalf("a refused decision changed the effect: %+v", after.Effect)
	}
	if e := must[model.Effect](t)(s.Approve(t.Context(), res.Effect.ID, model.Change{Actor: "alice", ExpectCall: res.Effect.CallSignature})); e.State != sm.Approved {
		t.Fatalf("approval of the call shown: %+v", e)
	}
	// A move confirmed from the state shown (pending), the effect moved on
	// since (approved): refused though the move is valid from where it is,
	// nothing written.
	before = must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID))
	if _, err := s.Transition(t.Context(), res.Effect.ID, sm.Executing, model.Change{Actor: "alice", ExpectState: sm.Pending}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("a move from pending, shown, of an approved effect: %v", err)
	}
	if after := must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID)); after.Effect.State != sm.Approved || len(after.History) != len(before.History) {
		t.Fatalf("a refused move changed the effect: %+v", after.Effect)
	}
	if e := must[model.Effect](t)(s.Transition(t.Context(), res.Effect.ID, sm.Executing, model.Change{Actor: "agent", ExpectState: sm.Approved})); e.State != sm.Executing {
		t.Fatalf("a move from the state shown: %+v", e)
	}
}
