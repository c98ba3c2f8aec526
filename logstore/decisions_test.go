package logstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	sm "github.com/undolog/undolog/statemachine"
)

// A decision on a decided effect is the spec's invalid transition, with the
// spec's reason where it names one, and changes nothing.
func TestSecondDecisionIsInvalidTransition(t *testing.T) {
	s, _ := newStore(t)
	approved := intercept(t, s, "a", "pay", sm.Irreversible, `{"n":1}`).Effect.ID
	rejected := intercept(t, s, "b", "pay", sm.Irreversible, `{"n":2}`).Effect.ID
	must[Effect](t)(s.Approve(approved, Change{Actor: "alice"}))
	must[Effect](t)(s.Reject(rejected, Change{Actor: "dana", Reason: "no"}))
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
		before := must[EffectDetail](t)(s.GetEffect(c.id))
		_, err := s.Transition(c.id, c.to, Change{Actor: "bob"})
		var te *sm.TransitionError
		if !errors.As(err, &te) || te.Reason != c.reason || !strings.Contains(err.Error(), c.who) {
			t.Errorf("effect %d -> %s: %v", c.id, c.to, err)
		}
		after := must[EffectDetail](t)(s.GetEffect(c.id))
		if len(after.History) != len(before.History) || after.Approval.DecidedBy != before.Approval.DecidedBy {
			t.Errorf("effect %d changed: %+v", c.id, after.Approval)
		}
	}
	verifyClean(t, s)
}

// An irreversible effect that failed after its approval waits for a new
// decision: a new request, both approve and reject work, the earlier decision
// is kept.
func TestFailedIrreversibleNeedsNewDecision(t *testing.T) {
	s, clk := newStore(t)
	res := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "pay", Tool: "wire", Tier: sm.Irreversible,
		CreateSession: true, ApprovalTimeout: time.Hour}))
	id := res.Effect.ID
	must[Effect](t)(s.Approve(id, Change{Actor: "alice", Reason: "checked"}))
	must[Effect](t)(s.Start(id, Change{}))
	clk.add(10 * time.Minute)
	must[Effect](t)(s.Fail(id, Change{Error: "bank down"}))

	d := must[EffectDetail](t)(s.GetEffect(id))
	a := d.Approval
	if a.Outcome != ApprovalPending || !a.RequestedAt.Equal(clk.now()) || a.ExpiresAt == nil || !a.ExpiresAt.Equal(clk.now().Add(time.Hour)) {
		t.Fatalf("no new request: %+v", a)
	}
	if len(a.Earlier) != 1 || a.Earlier[0].Outcome != ApprovalApproved || a.Earlier[0].DecidedBy != "alice" || a.Earlier[0].Decision != "checked" {
		t.Fatalf("earlier decision lost: %+v", a.Earlier)
	}
	if got := d.Decision(clk.now()); got != DecisionWaiting {
		t.Fatalf("decision %v, want waiting", got)
	}
	if p := pending(t, s); len(p) != 1 || p[0].EffectID != id {
		t.Fatalf("approvals %+v", p)
	}
	if sess := must[Session](t)(s.GetSession("pay")); sess.State != sm.SessionAwaitingApproval || sess.PendingApprovals != 1 {
		t.Fatalf("session %+v", sess)
	}
	if _, err := s.Start(id, Change{}); !errors.Is(err, ErrInProgress) {
		t.Fatalf("start on the old approval: %v", err)
	}
	again := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "pay", Tool: "wire", Tier: sm.Irreversible, Start: true}))
	if again.Outcome != OutcomeInProgress || again.Effect.State != sm.Pending {
		t.Fatalf("retry ran on the old approval: %+v", again)
	}

	must[Effect](t)(s.Approve(id, Change{Actor: "bob", Reason: "bank is back"}))
	must[Effect](t)(s.Start(id, Change{}))
	must[Effect](t)(s.Fail(id, Change{}))
	e := must[Effect](t)(s.Reject(id, Change{Actor: "carol", Reason: "enough"}))
	if e.State != sm.Rejected {
		t.Fatalf("reject after a failure: %+v", e)
	}
	d = must[EffectDetail](t)(s.GetEffect(id))
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
	if sess := must[Session](t)(s.GetSession("pay")); sess.State != sm.SessionHalted || sess.PendingApprovals != 0 {
		t.Fatalf("session %+v", sess)
	}
	verifyClean(t, s)
}

// A session that stops accepting effects closes its open requests with an
// outcome of their own; the effects stay pending and cannot be decided.
func TestSessionMoveClosesApprovals(t *testing.T) {
	for _, to := range []sm.SessionState{sm.SessionCompleted, sm.SessionFailed, sm.SessionHalted, sm.SessionCompensating} {
		t.Run(string(to), func(t *testing.T) {
			s, _ := newStore(t)
			id := intercept(t, s, "run", "deploy", sm.Irreversible, `{}`).Effect.ID
			other := intercept(t, s, "other", "deploy", sm.Irreversible, `{}`).Effect.ID
			must[Session](t)(s.SetSessionState("run", to, Change{Actor: "ci"}))
			if p := pending(t, s); len(p) != 1 || p[0].EffectID != other {
				t.Fatalf("approvals %+v", p)
			}
			for _, decide := range []func(uint64, Change) (Effect, error){s.Approve, s.Reject} {
				if _, err := decide(id, Change{Actor: "alice"}); !errors.Is(err, ErrSessionNotActive) {
					t.Fatalf("decision on a closed request: %v", err)
				}
			}
			d := must[EffectDetail](t)(s.GetEffect(id))
			a := d.Approval
			if d.Effect.State != sm.Pending || a.Outcome != ApprovalClosed || a.DecidedBy != SessionActor ||
				a.Decision != "session "+string(to) || a.DecidedAt == nil {
				t.Fatalf("after the session moved: %+v %+v", d.Effect, a)
			}
			if got := d.Decision(time.Now()); got != DecisionClosed {
				t.Fatalf("decision %v, want closed", got)
			}
			if sess := must[Session](t)(s.GetSession("run")); sess.PendingApprovals != 0 || sess.State != to {
				t.Fatalf("session %+v", sess)
			}
			verifyClean(t, s)
		})
	}
}

// A rejection halts the session: its other requests close, and expired ones
// found in the same write still time out.
func TestRejectionClosesOtherRequests(t *testing.T) {
	s, clk := newStore(t)
	a := intercept(t, s, "run", "a", sm.Irreversible, `{}`).Effect.ID
	b := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "run", Tool: "b", Tier: sm.Irreversible, ApprovalTimeout: time.Minute})).Effect.ID
	c := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "run", Tool: "c", Tier: sm.Irreversible, ApprovalTimeout: time.Minute})).Effect.ID
	clk.add(2 * time.Minute)
	if n := must[int](t)(s.ExpireApprovals("run")); n != 2 {
		t.Fatalf("%d expired", n)
	}
	for _, id := range []uint64{b, c} {
		if d := must[EffectDetail](t)(s.GetEffect(id)); d.Approval.Outcome != ApprovalTimedOut || d.Effect.State != sm.Rejected {
			t.Fatalf("effect %d: %+v %+v", id, d.Effect, d.Approval)
		}
	}
	if d := must[EffectDetail](t)(s.GetEffect(a)); d.Approval.Outcome != ApprovalClosed || d.Effect.State != sm.Pending ||
		d.Approval.Decision != "session halted" {
		t.Fatalf("effect %d: %+v %+v", a, d.Effect, d.Approval)
	}
	if n := len(pending(t, s)); n != 0 {
		t.Fatalf("%d still waiting", n)
	}
	verifyClean(t, s)
}

// A failure in a session that no longer accepts effects opens no request
// anybody could decide: it is closed at once.
func TestFailInClosedSessionClosesNewRequest(t *testing.T) {
	s, _ := newStore(t)
	id := intercept(t, s, "run", "deploy", sm.Irreversible, `{}`).Effect.ID
	must[Effect](t)(s.Approve(id, Change{Actor: "alice"}))
	must[Effect](t)(s.Start(id, Change{}))
	must[Session](t)(s.SetSessionState("run", sm.SessionFailed, Change{}))
	must[Effect](t)(s.Fail(id, Change{Error: "boom"}))
	d := must[EffectDetail](t)(s.GetEffect(id))
	if d.Approval.Outcome != ApprovalClosed || len(d.Approval.Earlier) != 1 || d.Approval.Earlier[0].DecidedBy != "alice" {
		t.Fatalf("approval %+v", d.Approval)
	}
	if n := len(pending(t, s)); n != 0 {
		t.Fatalf("%d waiting", n)
	}
	if sess := must[Session](t)(s.GetSession("run")); sess.PendingApprovals != 0 || sess.State != sm.SessionFailed {
		t.Fatalf("session %+v", sess)
	}
	verifyClean(t, s)
}

// A log written before kept the approval of an irreversible effect that
// failed since (pending, approval approved, no request open). It no longer
// runs on it: a retry opens a new request, and a decision can be made.
func TestFailedApprovalOfAnOlderLogIsAskedAgain(t *testing.T) {
	s, _ := newStore(t)
	older := func() uint64 {
		id := intercept(t, s, "old", "wire", sm.Irreversible, `{"n":1}`).Effect.ID
		must[Effect](t)(s.Approve(id, Change{Actor: "alice"}))
		must[Effect](t)(s.Start(id, Change{}))
		must[Effect](t)(s.Fail(id, Change{}))
		// Back to what an earlier undolog left after the failure.
		err := s.update(func(tx *writeTx) error {
			a, err := getApproval(tx.Tx, id)
			if err != nil {
				return err
			}
			r := a.Earlier[0]
			a.Earlier, a.RequestedAt, a.Outcome, a.DecidedBy, a.DecidedAt = nil, r.RequestedAt, r.Outcome, r.DecidedBy, r.DecidedAt
			if err := putRecord(tx, bApprovals, itob(id), a); err != nil {
				return err
			}
			sess, err := getSession(tx.Tx, "old")
			if err != nil {
				return err
			}
			sess.PendingApprovals = 0
			if err := tx.delete(bApprovalsOpen, itob(id)); err != nil {
				return err
			}
			return putSession(tx, &sess)
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	id := older()
	verifyClean(t, s)
	if _, err := s.Start(id, Change{}); !errors.Is(err, ErrInProgress) {
		t.Fatalf("started on the old approval: %v", err)
	}
	again := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "old", Tool: "wire", Tier: sm.Irreversible,
		Args: []byte(`{"n":1}`), Start: true}))
	if again.Outcome != OutcomeInProgress || again.Effect.State != sm.Pending {
		t.Fatalf("retry: %+v", again)
	}
	if p := pending(t, s); len(p) != 1 || p[0].EffectID != id || len(p[0].Earlier) != 1 {
		t.Fatalf("approvals %+v", p)
	}
	must[Effect](t)(s.Reject(id, Change{Actor: "bob"}))
	if sess := must[Session](t)(s.GetSession("old")); sess.State != sm.SessionHalted || sess.PendingApprovals != 0 {
		t.Fatalf("session %+v", sess)
	}
	verifyClean(t, s)
}
