package logstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	sm "github.com/undolog/undolog/statemachine"
)

// clock is a settable time source for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t *testing.T) (*Store, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	s := New(filepath.Join(t.TempDir(), "state", "undolog.db"), Options{LockTimeout: 2 * time.Second, Now: clk.now})
	t.Cleanup(func() { s.pause() }) // the committer lets the log go before the directory goes
	return s, clk
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// pending lists every waiting approval request and checks the count agrees.
func pending(t *testing.T, s *Store) []PendingApproval {
	t.Helper()
	list, waiting, err := s.PendingApprovals("", 0)
	if err != nil {
		t.Fatal(err)
	}
	if waiting != len(list) {
		t.Fatalf("%d requests listed, %d counted as waiting", len(list), waiting)
	}
	return list
}

// undoStack lists a session's whole undo stack and checks the count agrees.
func undoStack(t *testing.T, s *Store, session string) []UndoEntry {
	t.Helper()
	stack, total, err := s.UndoStack(session, 0)
	if err != nil {
		t.Fatal(err)
	}
	if total != len(stack) {
		t.Fatalf("%d entries listed, %d counted", len(stack), total)
	}
	return stack
}

func intercept(t *testing.T, s *Store, session, tool string, tier sm.Tier, args string) InterceptResult {
	t.Helper()
	return must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: session, Tool: tool, Tier: tier,
		Args: json.RawMessage(args), CreateSession: true, Actor: "tester"}))
}

func verifyClean(t *testing.T, s *Store) VerifyReport {
	t.Helper()
	rep := must[VerifyReport](t)(s.Verify())
	if len(rep.Problems) != 0 {
		t.Fatalf("verify found problems: %v", rep.Problems)
	}
	return rep
}

func states(h []HistoryRecord) string {
	var out []string
	for _, r := range h {
		out = append(out, r.Kind+":"+r.From+">"+r.To)
	}
	return strings.Join(out, " ")
}

func TestCreateFileModeAndSchema(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "s1", "write", sm.Compensable, `{}`)
	info, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", info.Mode().Perm())
	}
	db, err := bolt.Open(s.Path(), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bMeta).Get(keySchema); btoi(v) != SchemaVersion {
			t.Errorf("schema record %x", v)
		}
		return nil
	})
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(s.Path()), ".undolog-new-*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestReadsDoNotCreateTheLog(t *testing.T) {
	s, _ := newStore(t)
	if list, _, err := s.ListEffects(EffectFilter{}); err != nil || len(list) != 0 {
		t.Fatalf("%v %v", list, err)
	}
	if _, err := s.GetEffect(1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetEffect on no log: %v", err)
	}
	if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read created the log: %v", err)
	}
}

func TestSafeCallsWriteNothing(t *testing.T) {
	s, _ := newStore(t)
	res := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "s1", Tool: "read", Tier: sm.Safe, Args: json.RawMessage(`{"a":1}`)}))
	if res.Outcome != OutcomeSafe || res.Effect.ID != 0 || len(res.Signature) != 64 {
		t.Fatalf("%+v", res)
	}
	if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a safe call touched the log: %v", err)
	}
}

func TestCompensableLifecycleAndReplay(t *testing.T) {
	s, clk := newStore(t)
	res := intercept(t, s, "agent-1", "send_email", sm.Compensable, `{"to":"a@b.c","body":"hi"}`)
	if res.Outcome != OutcomeNew || res.Effect.State != sm.Pending || res.Effect.ID == 0 {
		t.Fatalf("%+v", res)
	}
	id := res.Effect.ID
	stack := undoStack(t, s, "agent-1")
	if len(stack) != 1 || stack[0].EffectID != id || stack[0].State != sm.EntryPending || stack[0].Compensation.Kind != CompensationManual {
		t.Fatalf("undo entry not written ahead: %+v", stack)
	}
	must[Effect](t)(s.Start(id, Change{Actor: "tester", Owner: &Owner{PID: 42, Host: "h"}}))
	clk.add(time.Second)
	e := must[Effect](t)(s.Commit(id, Change{Actor: "tester", Result: json.RawMessage(`{ "message_id" : "m1" }`)}))
	if e.State != sm.Committed || string(e.Result) != `{"message_id":"m1"}` || e.Owner != nil {
		t.Fatalf("%+v", e)
	}
	// The same call with other key order and spacing is a replay.
	clk.add(time.Second)
	rep := intercept(t, s, "agent-1", "send_email", sm.Compensable, ` { "body":"hi", "to":"a@b.c" }`)
	if rep.Outcome != OutcomeReplayed || rep.Effect.State != sm.Replayed || rep.Effect.ReplayOf == nil || *rep.Effect.ReplayOf != id {
		t.Fatalf("replay: %+v", rep)
	}
	if string(rep.Effect.Result) != `{"message_id":"m1"}` || rep.Signature != res.Signature || rep.Effect.ID == id {
		t.Fatalf("replay result: %+v", rep)
	}
	owner := must[EffectDetail](t)(s.GetEffect(id))
	if owner.Effect.State != sm.Committed || owner.Effect.ReplayCount != 1 || owner.Effect.LastReplayedAt == nil || !owner.Effect.LastReplayedAt.Equal(clk.now()) {
		t.Fatalf("owner after replay: %+v", owner.Effect)
	}
	if got := states(owner.History); got != "effect:>pending effect:pending>executing effect:executing>committed" {
		t.Fatalf("owner history %s", got)
	}
	if owner.History[1].Actor != "tester" || owner.History[2].Trigger != "Commit RPC" {
		t.Fatalf("history fields %+v", owner.History)
	}
	replay := must[EffectDetail](t)(s.GetEffect(rep.Effect.ID))
	if got := states(replay.History); got != "effect:>pending effect:pending>replayed" {
		t.Fatalf("replay history %s", got)
	}
	sess := must[Session](t)(s.GetSession("agent-1"))
	if sess.Effects != 2 || sess.Counts[sm.Committed] != 1 || sess.Counts[sm.Replayed] != 1 || sess.State != sm.SessionActive {
		t.Fatalf("session %+v", sess)
	}
	// A different key is a different call.
	other := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "agent-1", Tool: "send_email", Tier: sm.Compensable,
		Args: json.RawMessage(`{"to":"a@b.c","body":"hi"}`), Key: "second"}))
	if other.Outcome != OutcomeNew || other.Signature == res.Signature {
		t.Fatalf("keyed call: %+v", other)
	}
	verifyClean(t, s)
}

// Numbers a double cannot hold are different calls and are stored as sent,
// through redaction of the args and of the result too.
func TestNumbersAreExact(t *testing.T) {
	s, _ := newStore(t)
	a := intercept(t, s, "n", "pay", sm.Compensable, `{"to":12345678901234567891}`)
	b := intercept(t, s, "n", "pay", sm.Compensable, `{"to":12345678901234567000}`)
	if a.Outcome != OutcomeNew || b.Outcome != OutcomeNew || a.Signature == b.Signature {
		t.Fatalf("one call: %+v\n%+v", a, b)
	}
	if string(a.Effect.Args) != `{"to":12345678901234567891}` || string(b.Effect.Args) != `{"to":12345678901234567000}` {
		t.Fatalf("args %s, %s", a.Effect.Args, b.Effect.Args)
	}
	r := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "n", Tool: "login", Tier: sm.Compensable,
		Args: json.RawMessage(`{"id":9007199254740993,"password":"x"}`), Redact: []string{"*.password", "*.token"}}))
	if string(r.Effect.Args) != `{"id":9007199254740993,"password":"[redacted]"}` {
		t.Fatalf("redacted args %s", r.Effect.Args)
	}
	must[Effect](t)(s.Start(r.Effect.ID, Change{}))
	e := must[Effect](t)(s.Commit(r.Effect.ID, Change{Result: json.RawMessage(`{"token":"t","n":98765432109876543210.5,"tiny":1e-400}`)}))
	if string(e.Result) != `{"n":98765432109876543210.5,"tiny":1e-400,"token":"[redacted]"}` {
		t.Fatalf("redacted result %s", e.Result)
	}
	verifyClean(t, s)
}

func TestRetryAfterFail(t *testing.T) {
	s, _ := newStore(t)
	id := intercept(t, s, "ci", "deploy", sm.Compensable, `{"v":1}`).Effect.ID
	must[Effect](t)(s.Start(id, Change{}))
	e := must[Effect](t)(s.Fail(id, Change{Error: "exit 1"}))
	if e.State != sm.Pending || e.Error != "exit 1" {
		t.Fatalf("%+v", e)
	}
	again := intercept(t, s, "ci", "deploy", sm.Compensable, `{"v":1}`)
	if again.Outcome != OutcomeRetry || again.Effect.ID != id {
		t.Fatalf("%+v", again)
	}
	must[Effect](t)(s.Start(id, Change{}))
	if in := intercept(t, s, "ci", "deploy", sm.Compensable, `{"v":1}`); in.Outcome != OutcomeInProgress || in.Effect.ID != id {
		t.Fatalf("while executing: %+v", in)
	}
	must[Effect](t)(s.Commit(id, Change{Result: json.RawMessage(`"ok"`)}))
	d := must[EffectDetail](t)(s.GetEffect(id))
	if got := states(d.History); got != "effect:>pending effect:pending>executing effect:executing>pending effect:pending>executing effect:executing>committed" {
		t.Fatalf("history %s", got)
	}
	if d.History[2].Error != "exit 1" {
		t.Fatalf("fail record lost its error: %+v", d.History[2])
	}
	verifyClean(t, s)
}

func TestIrreversibleApprovePath(t *testing.T) {
	s, _ := newStore(t)
	res := intercept(t, s, "agent", "wire_money", sm.Irreversible, `{"amount":100}`)
	id := res.Effect.ID
	if sess := must[Session](t)(s.GetSession("agent")); sess.State != sm.SessionAwaitingApproval || sess.PendingApprovals != 1 {
		t.Fatalf("session %+v", sess)
	}
	pend := pending(t, s)
	if len(pend) != 1 || pend[0].EffectID != id || pend[0].Outcome != ApprovalPending || string(pend[0].Args) != `{"amount":100}` {
		t.Fatalf("approvals %+v", pend)
	}
	if again := intercept(t, s, "agent", "wire_money", sm.Irreversible, `{"amount":100}`); again.Outcome != OutcomeInProgress {
		t.Fatalf("repeat while waiting: %+v", again)
	}
	if _, err := s.Start(id, Change{}); !errors.Is(err, ErrInProgress) || !strings.Contains(err.Error(), "undolog approve") {
		t.Fatalf("start before approval: %v", err)
	}
	e := must[Effect](t)(s.Approve(id, Change{Actor: "alice", Reason: "looks right"}))
	if e.State != sm.Approved {
		t.Fatalf("%+v", e)
	}
	// A decision is final: a second one is an invalid transition.
	if _, err := s.Approve(id, Change{Actor: "bob"}); !errors.Is(err, sm.ErrInvalidStateTransition) || !strings.Contains(err.Error(), "already approved by alice") {
		t.Fatalf("second decision: %v", err)
	}
	if _, err := s.Reject(id, Change{Actor: "bob"}); !errors.Is(err, sm.ErrInvalidStateTransition) || !strings.Contains(err.Error(), "approved -> rejected") {
		t.Fatalf("second decision: %v", err)
	}
	d := must[EffectDetail](t)(s.GetEffect(id))
	if d.Approval.Outcome != ApprovalApproved || d.Approval.DecidedBy != "alice" || d.Approval.Decision != "looks right" {
		t.Fatalf("approval %+v", d.Approval)
	}
	if last := d.History[len(d.History)-1]; last.Actor != "alice" || last.Reason != "looks right" || last.To != "approved" {
		t.Fatalf("decision record %+v", last)
	}
	if sess := must[Session](t)(s.GetSession("agent")); sess.State != sm.SessionActive || sess.PendingApprovals != 0 {
		t.Fatalf("session after approval %+v", sess)
	}
	must[Effect](t)(s.Start(id, Change{}))
	must[Effect](t)(s.Commit(id, Change{Result: json.RawMessage(`{"ok":true}`)}))
	if n := len(pending(t, s)); n != 0 {
		t.Fatalf("%d approvals still listed", n)
	}
	verifyClean(t, s)
}

func TestRejectHaltsSession(t *testing.T) {
	s, _ := newStore(t)
	id := intercept(t, s, "agent", "rm_rf", sm.Irreversible, `{"path":"/"}`).Effect.ID
	e := must[Effect](t)(s.Reject(id, Change{Actor: "carol", Reason: "no"}))
	if e.State != sm.Rejected {
		t.Fatalf("%+v", e)
	}
	sess := must[Session](t)(s.GetSession("agent"))
	if sess.State != sm.SessionHalted {
		t.Fatalf("session %s", sess.State)
	}
	if _, err := s.Intercept(InterceptRequest{Session: "agent", Tool: "other", Tier: sm.Compensable}); !errors.Is(err, ErrSessionNotActive) {
		t.Fatalf("new call in halted session: %v", err)
	}
	if again := intercept(t, s, "agent", "rm_rf", sm.Irreversible, `{"path":"/"}`); again.Outcome != OutcomeRejected || again.Effect.ID != id {
		t.Fatalf("repeat of rejected call: %+v", again)
	}
	hist := must[[]HistoryRecord](t)(s.SessionHistory("agent"))
	if got := states(hist); got != "session:>active session:active>awaiting_approval session:awaiting_approval>halted" {
		t.Fatalf("session history %s", got)
	}
	verifyClean(t, s)
}

func TestApprovalExpiry(t *testing.T) {
	s, clk := newStore(t)
	res := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "ci", Tool: "deploy", Tier: sm.Irreversible,
		CreateSession: true, ApprovalTimeout: time.Minute}))
	if n := len(pending(t, s)); n != 1 {
		t.Fatalf("%d waiting", n)
	}
	clk.add(2 * time.Minute)
	if n := len(pending(t, s)); n != 0 {
		t.Fatalf("expired request still listed as waiting")
	}
	if _, err := s.Approve(res.Effect.ID, Change{Actor: "late"}); !errors.Is(err, sm.ErrInvalidStateTransition) ||
		!strings.Contains(err.Error(), sm.ReasonTerminal) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("approve after expiry: %v", err)
	}
	d := must[EffectDetail](t)(s.GetEffect(res.Effect.ID))
	if d.Effect.State != sm.Rejected || d.Approval.Outcome != ApprovalTimedOut || d.Approval.DecidedBy != TimeoutActor {
		t.Fatalf("after expiry: %+v %+v", d.Effect, d.Approval)
	}
	verifyClean(t, s)
}

func TestInvalidTransitionsChangeNothing(t *testing.T) {
	s, _ := newStore(t)
	comp := intercept(t, s, "s", "write", sm.Compensable, `{"n":1}`).Effect.ID
	irr := intercept(t, s, "s", "pay", sm.Irreversible, `{"n":2}`).Effect.ID
	cases := []struct {
		id     uint64
		to     sm.State
		reason string
	}{
		{comp, sm.Committed, "Must execute first."},
		{comp, sm.Compensating, "Compensation requires prior execution."},
		{comp, sm.Approved, sm.ReasonIrreversible},
		{irr, sm.Compensating, sm.ReasonCompensableOnly},
	}
	before := must[uint64](t)(s.LastChange())
	for _, c := range cases {
		old := must[EffectDetail](t)(s.GetEffect(c.id))
		_, err := s.Transition(c.id, c.to, Change{})
		if !errors.Is(err, sm.ErrInvalidStateTransition) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%d -> %s: %v", c.id, c.to, err)
		}
		now := must[EffectDetail](t)(s.GetEffect(c.id))
		if now.Effect.UpdatedAt != old.Effect.UpdatedAt || len(now.History) != len(old.History) || now.Effect.State != old.Effect.State {
			t.Errorf("%d -> %s changed the effect", c.id, c.to)
		}
	}
	if after := must[uint64](t)(s.LastChange()); after != before {
		t.Fatalf("refused requests wrote %d history records", after-before)
	}
	must[Effect](t)(s.Start(comp, Change{}))
	must[Effect](t)(s.Commit(comp, Change{}))
	before = must[uint64](t)(s.LastChange())
	for _, to := range []sm.State{sm.Executing, sm.Pending, sm.Compensating} {
		_, err := s.Transition(comp, to, Change{})
		want := sm.ReasonTerminal
		if to == sm.Compensating {
			want = "Compensation retry path not implemented."
		}
		if !errors.Is(err, sm.ErrInvalidStateTransition) || !strings.Contains(err.Error(), want) {
			t.Errorf("committed -> %s: %v", to, err)
		}
	}
	if _, err := s.Commit(comp, Change{Result: json.RawMessage(`{bad`)}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("bad result: %v", err)
	}
	if _, err := s.Transition(999, sm.Executing, Change{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing effect: %v", err)
	}
	if _, err := s.Transition(comp, "finished", Change{}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("unknown state: %v", err)
	}
	if after := must[uint64](t)(s.LastChange()); after != before {
		t.Fatalf("refused requests wrote %d history records", after-before)
	}
	verifyClean(t, s)
}

func TestBadInterceptInput(t *testing.T) {
	s, _ := newStore(t)
	bad := []InterceptRequest{
		{Session: "s", Tool: "t", Tier: "maybe"},
		{Session: "", Tool: "t", Tier: sm.Compensable},
		{Session: "has space", Tool: "t", Tier: sm.Compensable},
		{Session: "s", Tool: "", Tier: sm.Compensable},
		{Session: "s", Tool: "a\x00b", Tier: sm.Compensable},
		{Session: "s", Tool: "t", Tier: sm.Compensable, Args: json.RawMessage(`{"a":`)},
		{Session: "s", Tool: "t", Tier: sm.Compensable, Args: json.RawMessage(`{"a":1,"a":2}`)},
		{Session: "s", Tool: "t", Tier: sm.Compensable, Compensation: &Compensation{Kind: "command"}},
		{Session: "s", Tool: "t", Tier: sm.Compensable, Compensation: &Compensation{Kind: "teleport"}},
		{Session: "s", Tool: "t", Tier: sm.Irreversible, Compensation: &Compensation{Kind: "manual"}},
	}
	for _, req := range bad {
		req.CreateSession = true
		if _, err := s.Intercept(req); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v: %v", req, err)
		}
	}
	if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bad input created the log")
	}
	if _, err := s.Intercept(InterceptRequest{Session: "nosuch", Tool: "t", Tier: sm.Compensable}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown session without CreateSession: %v", err)
	}
}

func TestSessions(t *testing.T) {
	s, clk := newStore(t)
	a := must[Session](t)(s.CreateSession(NewSession{ID: "deploy-117", Meta: map[string]string{"pipeline": "api"}}))
	if a.State != sm.SessionActive || a.Meta["pipeline"] != "api" {
		t.Fatalf("%+v", a)
	}
	if _, err := s.CreateSession(NewSession{ID: "deploy-117"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate: %v", err)
	}
	clk.add(time.Hour)
	b := must[Session](t)(s.CreateSession(NewSession{}))
	if !strings.HasPrefix(b.ID, "sess-20261130-") {
		t.Fatalf("generated id %q", b.ID)
	}
	must[Session](t)(s.SetSessionState("deploy-117", sm.SessionCompleted, Change{Actor: "ci"}))
	if _, err := s.SetSessionState("deploy-117", sm.SessionFailed, Change{}); !errors.Is(err, sm.ErrInvalidStateTransition) {
		t.Fatalf("completed -> failed: %v", err)
	}
	all, _, _ := s.ListSessions(SessionFilter{})
	if len(all) != 2 || all[0].ID != b.ID {
		t.Fatalf("newest first: %+v", all)
	}
	done, _, _ := s.ListSessions(SessionFilter{State: sm.SessionCompleted})
	if len(done) != 1 || done[0].ID != "deploy-117" {
		t.Fatalf("by state: %+v", done)
	}
	recent, _, _ := s.ListSessions(SessionFilter{Since: clk.now().Add(-time.Minute)})
	if len(recent) != 1 || recent[0].ID != b.ID {
		t.Fatalf("since: %+v", recent)
	}
	page, next, _ := s.ListSessions(SessionFilter{Limit: 1})
	rest, next2, _ := s.ListSessions(SessionFilter{Limit: 1, Cursor: next})
	if len(page) != 1 || len(rest) != 1 || rest[0].ID != "deploy-117" || next == 0 || next2 != 0 {
		t.Fatalf("paging: %v %v %d %d", page, rest, next, next2)
	}
	if _, err := s.Intercept(InterceptRequest{Session: "deploy-117", Tool: "x", Tier: sm.Compensable}); !errors.Is(err, ErrSessionNotActive) {
		t.Fatalf("completed session took an effect: %v", err)
	}
}

func TestListEffectsFiltersAndPages(t *testing.T) {
	s, clk := newStore(t)
	for i := 0; i < 10; i++ {
		session := []string{"a", "b"}[i%2]
		tool := []string{"write", "mail", "pay"}[i%3]
		tier := sm.Compensable
		if tool == "pay" {
			tier = sm.Irreversible
		}
		intercept(t, s, session, tool, tier, `{"i":`+string(rune('0'+i))+`}`)
		clk.add(time.Minute)
	}
	ids := func(list []Effect) (out []uint64) {
		for _, e := range list {
			out = append(out, e.ID)
		}
		return
	}
	all, _, _ := s.ListEffects(EffectFilter{})
	if got := ids(all); len(got) != 10 || got[0] != 10 || got[9] != 1 {
		t.Fatalf("all newest first: %v", got)
	}
	asc, _, _ := s.ListEffects(EffectFilter{Session: "a", Ascending: true})
	if got := ids(asc); len(got) != 5 || got[0] != 1 || got[4] != 9 {
		t.Fatalf("session a ascending: %v", got)
	}
	combo, _, _ := s.ListEffects(EffectFilter{Session: "b", Tool: "mail"})
	if got := ids(combo); len(got) != 2 || got[0] != 8 || got[1] != 2 {
		t.Fatalf("session b, mail: %v", got)
	}
	byTier, _, _ := s.ListEffects(EffectFilter{Tier: sm.Irreversible})
	if got := ids(byTier); len(got) != 3 {
		t.Fatalf("irreversible: %v", got)
	}
	byState, _, _ := s.ListEffects(EffectFilter{State: sm.Pending, Tool: "write"})
	if got := ids(byState); len(got) != 4 {
		t.Fatalf("pending write: %v", got)
	}
	since, _, _ := s.ListEffects(EffectFilter{Since: clk.now().Add(-3*time.Minute - time.Second)})
	if got := ids(since); len(got) != 3 || got[2] != 8 {
		t.Fatalf("since: %v", got)
	}
	var pages [][]uint64
	var cursor uint64
	for {
		page, next, err := s.ListEffects(EffectFilter{Limit: 4, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, ids(page))
		if next == 0 {
			break
		}
		cursor = next
	}
	if len(pages) != 3 || pages[1][0] != 6 || len(pages[2]) != 2 {
		t.Fatalf("pages %v", pages)
	}
}

func TestUndoSteps(t *testing.T) {
	s, _ := newStore(t)
	cmd := &Compensation{Kind: CompensationCommand, Argv: []string{"rm", "f"}}
	mk := func(args string) uint64 {
		return must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "u", Tool: "touch", Tier: sm.Compensable,
			Args: json.RawMessage(args), Compensation: cmd, CreateSession: true})).Effect.ID
	}
	committed, executing, never := mk(`1`), mk(`2`), mk(`3`)
	must[Effect](t)(s.Start(committed, Change{}))
	must[Effect](t)(s.Commit(committed, Change{}))
	must[Effect](t)(s.Start(executing, Change{}))

	stack := undoStack(t, s, "u")
	if len(stack) != 3 || stack[0].EffectID != never || stack[2].EffectID != committed || stack[0].Compensation.Argv[0] != "rm" {
		t.Fatalf("LIFO stack %+v", stack)
	}
	must[Session](t)(s.SetSessionState("u", sm.SessionCompensating, Change{}))
	if _, err := s.UndoStep(never, sm.EntryCompensating, Change{}); !errors.Is(err, sm.ErrInvalidStateTransition) {
		t.Fatalf("compensating a never-run effect: %v", err)
	}
	must[UndoEntry](t)(s.UndoStep(never, sm.EntrySkipped, Change{}))
	must[UndoEntry](t)(s.UndoStep(executing, sm.EntryCompensating, Change{Actor: "undo"}))
	u := must[UndoEntry](t)(s.UndoStep(executing, sm.EntryCompensated, Change{Actor: "undo", Attempts: 1}))
	if u.State != sm.EntryCompensated || u.Attempts != 1 {
		t.Fatalf("%+v", u)
	}
	d := must[EffectDetail](t)(s.GetEffect(executing))
	if d.Effect.State != sm.Compensated {
		t.Fatalf("executing effect should follow its entry: %s", d.Effect.State)
	}
	must[UndoEntry](t)(s.UndoStep(committed, sm.EntryCompensating, Change{}))
	must[UndoEntry](t)(s.UndoStep(committed, sm.EntryCompensationFailed, Change{Error: "boom", Attempts: 4}))
	d = must[EffectDetail](t)(s.GetEffect(committed))
	if d.Effect.State != sm.Committed || d.Undo.State != sm.EntryCompensationFailed || d.Undo.LastError != "boom" || d.Undo.Attempts != 4 {
		t.Fatalf("committed effect keeps its state, the entry carries the undo: %+v %+v", d.Effect, d.Undo)
	}
	if _, err := s.UndoStep(committed, sm.EntryCompensating, Change{}); !errors.Is(err, sm.ErrInvalidStateTransition) {
		t.Fatalf("failed entry retried without resolve: %v", err)
	}
	must[UndoEntry](t)(s.UndoStep(committed, sm.EntryResolved, Change{Actor: "ops", Reason: "fixed by hand"}))
	if got := states(must[EffectDetail](t)(s.GetEffect(committed)).History); !strings.HasSuffix(got, "undo:pending>compensating undo:compensating>compensation_failed undo:compensation_failed>resolved") {
		t.Fatalf("undo history %s", got)
	}
	must[Session](t)(s.SetSessionState("u", sm.SessionCompensated, Change{}))
	verifyClean(t, s)
}

func TestBusyLog(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "s", "t", sm.Compensable, `{}`)
	held, err := bolt.Open(s.Path(), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	quick := New(s.Path(), Options{LockTimeout: 100 * time.Millisecond})
	_, err = quick.Intercept(InterceptRequest{Session: "s", Tool: "t2", Tier: sm.Compensable})
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), s.Path()) {
		t.Fatalf("want ErrBusy naming the file, got %v", err)
	}
	if _, err := quick.GetEffect(1); !errors.Is(err, ErrBusy) {
		t.Fatalf("read while held: %v", err)
	}
	// Released within the timeout: the write gets through.
	go func() { time.Sleep(150 * time.Millisecond); held.Close() }()
	patient := New(s.Path(), Options{LockTimeout: 3 * time.Second})
	if _, err := patient.Intercept(InterceptRequest{Session: "s", Tool: "t2", Tier: sm.Compensable}); err != nil {
		t.Fatal(err)
	}
}

func TestInterceptManyIsOneAllOrNothingTransaction(t *testing.T) {
	s, _ := newStore(t)
	req := func(session, args string) InterceptRequest {
		return InterceptRequest{Session: session, Tool: "w", Tier: sm.Compensable, Args: json.RawMessage(args), CreateSession: true}
	}
	res, err := s.InterceptMany([]InterceptRequest{req("a", `1`), req("a", `2`), req("a", `1`), {Session: "a", Tool: "r", Tier: sm.Safe}})
	if err != nil {
		t.Fatal(err)
	}
	got := []Outcome{res[0].Outcome, res[1].Outcome, res[2].Outcome, res[3].Outcome}
	if !reflect.DeepEqual(got, []Outcome{OutcomeNew, OutcomeNew, OutcomeRetry, OutcomeSafe}) || res[2].Effect.ID != res[0].Effect.ID {
		t.Fatalf("%v", got)
	}
	must[Session](t)(s.SetSessionState("a", sm.SessionCompleted, Change{}))
	before := must[uint64](t)(s.LastChange())
	if _, err := s.InterceptMany([]InterceptRequest{req("b", `1`), req("a", `3`)}); !errors.Is(err, ErrSessionNotActive) || !strings.Contains(err.Error(), "call 2") {
		t.Fatalf("%v", err)
	}
	if _, err := s.GetSession("b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused batch wrote its first call: %v", err)
	}
	if after := must[uint64](t)(s.LastChange()); after != before {
		t.Fatal("a refused batch wrote history")
	}
	verifyClean(t, s)
}

// A lifecycle that starts with the intercept is two write transactions.
func TestInterceptAndStartIsOneTransaction(t *testing.T) {
	s, _ := newStore(t)
	must[Session](t)(s.CreateSession(NewSession{ID: "two"}))
	before := s.group.durableWrites()
	res := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "two", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`1`), Start: true, Owner: &Owner{PID: 7, Host: "h"}}))
	if res.Outcome != OutcomeNew || res.Effect.State != sm.Executing || res.Effect.Owner == nil || res.Effect.Owner.PID != 7 {
		t.Fatalf("%+v", res)
	}
	must[Effect](t)(s.Commit(res.Effect.ID, Change{}))
	if n := s.group.durableWrites() - before; n != 2 {
		t.Fatalf("a lifecycle took %d durable writes", n)
	}
	// A retry starts in its intercept too.
	again := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "two", Tool: "w", Tier: sm.Compensable, Args: json.RawMessage(`2`), Start: true}))
	must[Effect](t)(s.Fail(again.Effect.ID, Change{Error: "boom"}))
	retry := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "two", Tool: "w", Tier: sm.Compensable, Args: json.RawMessage(`2`), Start: true}))
	if retry.Outcome != OutcomeRetry || retry.Effect.ID != again.Effect.ID || retry.Effect.State != sm.Executing {
		t.Fatalf("%+v", retry)
	}
	// An irreversible call is not started by its intercept: it waits for approval.
	irr := must[InterceptResult](t)(s.Intercept(InterceptRequest{Session: "two", Tool: "pay", Tier: sm.Irreversible, Start: true}))
	if irr.Effect.State != sm.Pending {
		t.Fatalf("%+v", irr.Effect)
	}
	verifyClean(t, s)
}

// A clock that goes backwards changes no outcome: ids, signatures and hash
// chains do not depend on time order.
func TestClockGoingBackwards(t *testing.T) {
	s, clk := newStore(t)
	a := intercept(t, s, "c", "w", sm.Compensable, `1`)
	clk.add(-3 * time.Hour)
	b := intercept(t, s, "c", "w", sm.Compensable, `2`)
	must[Effect](t)(s.Start(b.Effect.ID, Change{}))
	clk.add(-time.Hour)
	must[Effect](t)(s.Commit(b.Effect.ID, Change{}))
	if b.Effect.ID <= a.Effect.ID {
		t.Fatalf("ids %d then %d", a.Effect.ID, b.Effect.ID)
	}
	if r := intercept(t, s, "c", "w", sm.Compensable, `2`); r.Outcome != OutcomeReplayed {
		t.Fatalf("%+v", r)
	}
	list, _, _ := s.ListEffects(EffectFilter{Session: "c"})
	if len(list) != 3 || list[0].ID < list[2].ID {
		t.Fatalf("order by id: %+v", list)
	}
	verifyClean(t, s)
}

// TestReadLimits: a limited read returns the first entries in order and still
// counts them all, so that a view can say how many it left out.
func TestReadLimits(t *testing.T) {
	s, _ := newStore(t)
	var waiting, undoable []uint64
	for i := 0; i < 5; i++ {
		waiting = append(waiting, intercept(t, s, fmt.Sprintf("agent-%d", i), "pay", sm.Irreversible, fmt.Sprintf(`{"n":%d}`, i)).Effect.ID)
		undoable = append(undoable, intercept(t, s, "ci", "write", sm.Compensable, fmt.Sprintf(`{"n":%d}`, i)).Effect.ID)
	}
	list, n, err := s.PendingApprovals("", 2)
	if err != nil || n != 5 || len(list) != 2 || list[0].EffectID != waiting[0] || list[1].EffectID != waiting[1] {
		t.Fatalf("approvals limit 2: %d waiting, %+v, %v", n, list, err)
	}
	list, n, err = s.PendingApprovals("agent-3", 2)
	if err != nil || n != 1 || len(list) != 1 || list[0].EffectID != waiting[3] {
		t.Fatalf("approvals of one session: %d waiting, %+v, %v", n, list, err)
	}
	stack, n, err := s.UndoStack("ci", 3)
	if err != nil || n != 5 || len(stack) != 3 || stack[0].EffectID != undoable[4] || stack[2].EffectID != undoable[2] {
		t.Fatalf("undo stack limit 3: %d entries, %+v, %v", n, stack, err)
	}
}
