package conformance

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

func testCompensableLifecycleAndReplay(t *testing.T, newStore opener) {
	s, clk := newStore(t)
	res := intercept(t, s, "agent-1", "send_email", sm.Compensable, `{"to":"a@b.c","body":"hi"}`)
	if res.Outcome != model.OutcomeNew || res.Effect.State != sm.Pending || res.Effect.ID == 0 {
		t.Fatalf("%+v", res)
	}
	id := res.Effect.ID
	stack := undoStack(t, s, "agent-1")
	if len(stack) != 1 || stack[0].EffectID != id || stack[0].State != sm.EntryPending || stack[0].Compensation.Kind != model.CompensationManual {
		t.Fatalf("undo entry not written ahead: %+v", stack)
	}
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{Actor: "tester", Owner: &model.Owner{PID: 42, Host: "h"}}))
	clk.add(time.Second)
	e := must[model.Effect](t)(s.Commit(t.Context(), id, model.Change{Actor: "tester", Result: json.RawMessage(`{ "message_id" : "m1" }`)}))
	if e.State != sm.Committed || string(e.Result) != `{"message_id":"m1"}` || e.Owner != nil {
		t.Fatalf("%+v", e)
	}
	// The same call with other key order and spacing is a replay.
	clk.add(time.Second)
	rep := intercept(t, s, "agent-1", "send_email", sm.Compensable, ` { "body":"hi", "to":"a@b.c" }`)
	if rep.Outcome != model.OutcomeReplayed || rep.Effect.State != sm.Replayed || rep.Effect.ReplayOf == nil || *rep.Effect.ReplayOf != id {
		t.Fatalf("replay: %+v", rep)
	}
	if string(rep.Effect.Result) != `{"message_id":"m1"}` || rep.Signature != res.Signature || rep.Effect.ID == id {
		t.Fatalf("replay result: %+v", rep)
	}
	owner := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	if owner.Effect.State != sm.Committed || owner.Effect.ReplayCount != 1 || owner.Effect.LastReplayedAt == nil || !owner.Effect.LastReplayedAt.Equal(clk.now()) {
		t.Fatalf("owner after replay: %+v", owner.Effect)
	}
	if got := states(owner.History); got != "effect:>pending effect:pending>executing effect:executing>committed" {
		t.Fatalf("owner history %s", got)
	}
	if owner.History[1].Actor != "tester" || owner.History[2].Trigger != "Commit RPC" {
		t.Fatalf("history fields %+v", owner.History)
	}
	replay := must[model.EffectDetail](t)(s.GetEffect(t.Context(), rep.Effect.ID))
	if got := states(replay.History); got != "effect:>pending effect:pending>replayed" {
		t.Fatalf("replay history %s", got)
	}
	sess := must[model.Session](t)(s.GetSession(t.Context(), "agent-1"))
	if sess.Effects != 2 || sess.Counts[sm.Committed] != 1 || sess.Counts[sm.Replayed] != 1 || sess.State != sm.SessionActive {
		t.Fatalf("session %+v", sess)
	}
	// A different key is a different call.
	other := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "agent-1", Tool: "send_email", Tier: sm.Compensable,
		Args: json.RawMessage(`{"to":"a@b.c","body":"hi"}`), Key: "second"}))
	if other.Outcome != model.OutcomeNew || other.Signature == res.Signature {
		t.Fatalf("keyed call: %+v", other)
	}
	verifyClean(t, s)
}

func testNumbersAreExact(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	a := intercept(t, s, "n", "pay", sm.Compensable, `{"to":12345678901234567891}`)
	b := intercept(t, s, "n", "pay", sm.Compensable, `{"to":12345678901234567000}`)
	if a.Outcome != model.OutcomeNew || b.Outcome != model.OutcomeNew || a.Signature == b.Signature {
		t.Fatalf("one call: %+v\n%+v", a, b)
	}
	if string(a.Effect.Args) != `{"to":12345678901234567891}` || string(b.Effect.Args) != `{"to":12345678901234567000}` {
		t.Fatalf("args %s, %s", a.Effect.Args, b.Effect.Args)
	}
	r := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "n", Tool: "login", Tier: sm.Compensable,
		Args: json.RawMessage(`{"id":9007199254740993,"password":"x"}`), Redact: []string{"*.password", "*.token"}}))
	if string(r.Effect.Args) != `{"id":9007199254740993,"password":"[redacted]"}` {
		t.Fatalf("redacted args %s", r.Effect.Args)
	}
	must[model.Effect](t)(s.Start(t.Context(), r.Effect.ID, model.Change{}))
	e := must[model.Effect](t)(s.Commit(t.Context(), r.Effect.ID, model.Change{Result: json.RawMessage(`{"token":"t","n":98765432109876543210.5,"tiny":1e-400}`)}))
	if string(e.Result) != `{"n":98765432109876543210.5,"tiny":1e-400,"token":"[redacted]"}` {
		t.Fatalf("redacted result %s", e.Result)
	}
	verifyClean(t, s)
}

// The tier is not part of a call's signature, so the first registration
// would decide it: a call registered compensable and repeated as
// irreversible would run without an approval. It is refused, and nothing is
// written.
func testSameCallAnotherTierIsRefused(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	first := intercept(t, s, "ci", "publish", sm.Compensable, `{"v":1}`)
	before := must[uint64](t)(s.LastChange(t.Context()))
	_, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "ci", Tool: "publish", Tier: sm.Irreversible,
		Args: json.RawMessage(`{"v":1}`), CreateSession: true})
	if !errors.Is(err, model.ErrConflict) || !strings.Contains(err.Error(), "registered compensable") {
		t.Fatalf("the same call as irreversible: %v", err)
	}
	if after := must[uint64](t)(s.LastChange(t.Context())); after != before {
		t.Fatalf("a refused intercept wrote (feed at %d, was %d)", after, before)
	}
	if d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), first.Effect.ID)); d.Effect.Tier != sm.Compensable || d.Effect.State != sm.Pending {
		t.Fatalf("%+v", d.Effect)
	}
	verifyClean(t, s)
}

func testRetryAfterFail(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	id := intercept(t, s, "ci", "deploy", sm.Compensable, `{"v":1}`).Effect.ID
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
	e := must[model.Effect](t)(s.Fail(t.Context(), id, model.Change{Error: "exit 1"}))
	if e.State != sm.Pending || e.Error != "exit 1" {
		t.Fatalf("%+v", e)
	}
	again := intercept(t, s, "ci", "deploy", sm.Compensable, `{"v":1}`)
	if again.Outcome != model.OutcomeRetry || again.Effect.ID != id {
		t.Fatalf("%+v", again)
	}
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
	if in := intercept(t, s, "ci", "deploy", sm.Compensable, `{"v":1}`); in.Outcome != model.OutcomeInProgress || in.Effect.ID != id {
		t.Fatalf("while executing: %+v", in)
	}
	must[model.Effect](t)(s.Commit(t.Context(), id, model.Change{Result: json.RawMessage(`"ok"`)}))
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	if got := states(d.History); got != "effect:>pending effect:pending>executing effect:executing>pending effect:pending>executing effect:executing>committed" {
		t.Fatalf("history %s", got)
	}
	if d.History[2].Error != "exit 1" {
		t.Fatalf("fail record lost its error: %+v", d.History[2])
	}
	verifyClean(t, s)
}

func testInvalidTransitionsChangeNothing(t *testing.T, newStore opener) {
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
	before := must[uint64](t)(s.LastChange(t.Context()))
	for _, c := range cases {
		old := must[model.EffectDetail](t)(s.GetEffect(t.Context(), c.id))
		_, err := s.Transition(t.Context(), c.id, c.to, model.Change{})
		if !errors.Is(err, sm.ErrInvalidStateTransition) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%d -> %s: %v", c.id, c.to, err)
		}
		now := must[model.EffectDetail](t)(s.GetEffect(t.Context(), c.id))
		if now.Effect.UpdatedAt != old.Effect.UpdatedAt || len(now.History) != len(old.History) || now.Effect.State != old.Effect.State {
			t.Errorf("%d -> %s changed the effect", c.id, c.to)
		}
	}
	if after := must[uint64](t)(s.LastChange(t.Context())); after != before {
		t.Fatalf("refused requests wrote %d history records", after-before)
	}
	must[model.Effect](t)(s.Start(t.Context(), comp, model.Change{}))
	must[model.Effect](t)(s.Commit(t.Context(), comp, model.Change{}))
	before = must[uint64](t)(s.LastChange(t.Context()))
	for _, to := range []sm.State{sm.Executing, sm.Pending, sm.Compensating} {
		_, err := s.Transition(t.Context(), comp, to, model.Change{})
		want := sm.ReasonTerminal
		if to == sm.Compensating {
			want = "Compensation retry path not implemented."
		}
		if !errors.Is(err, sm.ErrInvalidStateTransition) || !strings.Contains(err.Error(), want) {
			t.Errorf("committed -> %s: %v", to, err)
		}
	}
	if _, err := s.Commit(t.Context(), comp, model.Change{Result: json.RawMessage(`{bad`)}); !errors.Is(err, model.ErrInvalidInput) {
		t.Errorf("bad result: %v", err)
	}
	if _, err := s.Transition(t.Context(), 999, sm.Executing, model.Change{}); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("missing effect: %v", err)
	}
	if _, err := s.Transition(t.Context(), comp, "finished", model.Change{}); !errors.Is(err, model.ErrInvalidInput) {
		t.Errorf("unknown state: %v", err)
	}
	if after := must[uint64](t)(s.LastChange(t.Context())); after != before {
		t.Fatalf("refused requests wrote %d history records", after-before)
	}
	verifyClean(t, s)
}

func testBadInterceptInput(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	bad := []effectlog.InterceptRequest{
		{Session: "s", Tool: "t", Tier: "maybe"},
		{Session: "", Tool: "t", Tier: sm.Compensable},
		{Session: "has space", Tool: "t", Tier: sm.Compensable},
		{Session: "s", Tool: "", Tier: sm.Compensable},
		{Session: "s", Tool: "a\x00b", Tier: sm.Compensable},
		{Session: "s", Tool: "t", Tier: sm.Compensable, Args: json.RawMessage(`{"a":`)},
		{Session: "s", Tool: "t", Tier: sm.Compensable, Args: json.RawMessage(`{"a":1,"a":2}`)},
		{Session: "s", Tool: "t", Tier: sm.Compensable, Compensation: &model.Compensation{Kind: "command"}},
		{Session: "s", Tool: "t", Tier: sm.Compensable, Compensation: &model.Compensation{Kind: "teleport"}},
		{Session: "s", Tool: "t", Tier: sm.Irreversible, Compensation: &model.Compensation{Kind: "manual"}},
	}
	for _, req := range bad {
		req.CreateSession = true
		if _, err := s.Intercept(t.Context(), req); !errors.Is(err, model.ErrInvalidInput) {
			t.Errorf("%+v: %v", req, err)
		}
	}
	if n := must[uint64](t)(s.LastChange(t.Context())); n != 0 {
		t.Fatalf("bad input wrote %d history records", n)
	}
	if list, _, err := s.ListSessions(t.Context(), effectlog.SessionFilter{}); err != nil || len(list) != 0 {
		t.Fatalf("bad input created sessions: %v %v", list, err)
	}
	if _, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "nosuch", Tool: "t", Tier: sm.Compensable}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("unknown session without CreateSession: %v", err)
	}
}

func testInterceptManyIsOneAllOrNothingTransaction(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	req := func(session, args string) effectlog.InterceptRequest {
		return effectlog.InterceptRequest{Session: session, Tool: "w", Tier: sm.Compensable, Args: json.RawMessage(args), CreateSession: true}
	}
	res, err := s.InterceptMany(t.Context(), []effectlog.InterceptRequest{req("a", `1`), req("a", `2`), req("a", `1`), {Session: "a", Tool: "r", Tier: sm.Safe}})
	if err != nil {
		t.Fatal(err)
	}
	got := []model.Outcome{res[0].Outcome, res[1].Outcome, res[2].Outcome, res[3].Outcome}
	if !reflect.DeepEqual(got, []model.Outcome{model.OutcomeNew, model.OutcomeNew, model.OutcomePending, model.OutcomeSafe}) || res[2].Effect.ID != res[0].Effect.ID {
		t.Fatalf("%v", got)
	}
	must[model.Session](t)(s.SetSessionState(t.Context(), "a", sm.SessionCompleted, model.Change{}))
	before := must[uint64](t)(s.LastChange(t.Context()))
	if _, err := s.InterceptMany(t.Context(), []effectlog.InterceptRequest{req("b", `1`), req("a", `3`)}); !errors.Is(err, model.ErrSessionNotActive) || !strings.Contains(err.Error(), "call 2") {
		t.Fatalf("%v", err)
	}
	if _, err := s.GetSession(t.Context(), "b"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("a refused batch wrote its first call: %v", err)
	}
	if after := must[uint64](t)(s.LastChange(t.Context())); after != before {
		t.Fatal("a refused batch wrote history")
	}
	verifyClean(t, s)
}

func testClockGoingBackwards(t *testing.T, newStore opener) {
	s, clk := newStore(t)
	a := intercept(t, s, "c", "w", sm.Compensable, `1`)
	clk.add(-3 * time.Hour)
	b := intercept(t, s, "c", "w", sm.Compensable, `2`)
	must[model.Effect](t)(s.Start(t.Context(), b.Effect.ID, model.Change{}))
	clk.add(-time.Hour)
	must[model.Effect](t)(s.Commit(t.Context(), b.Effect.ID, model.Change{}))
	if b.Effect.ID <= a.Effect.ID {
		t.Fatalf("ids %d then %d", a.Effect.ID, b.Effect.ID)
	}
	if r := intercept(t, s, "c", "w", sm.Compensable, `2`); r.Outcome != model.OutcomeReplayed {
		t.Fatalf("%+v", r)
	}
	list, _, _ := s.ListEffects(t.Context(), effectlog.EffectFilter{Session: "c"})
	if len(list) != 3 || list[0].ID < list[2].ID {
		t.Fatalf("order by id: %+v", list)
	}
	verifyClean(t, s)
}

// A safe call is answered at once and writes nothing.
func testSafeCallsWriteNothing(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	res := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s1", Tool: "read", Tier: sm.Safe,
		Args: json.RawMessage(`{"a":1}`), CreateSession: true}))
	if res.Outcome != model.OutcomeSafe || res.Effect.ID != 0 || len(res.Signature) != 64 {
		t.Fatalf("%+v", res)
	}
	if n := must[uint64](t)(s.LastChange(t.Context())); n != 0 {
		t.Fatalf("a safe call wrote %d history records", n)
	}
	if list, _, err := s.ListSessions(t.Context(), effectlog.SessionFilter{}); err != nil || len(list) != 0 {
		t.Fatalf("a safe call created a session: %v %v", list, err)
	}
	if list, _, err := s.ListEffects(t.Context(), effectlog.EffectFilter{}); err != nil || len(list) != 0 {
		t.Fatalf("a safe call wrote an effect: %v %v", list, err)
	}
}

// A string cut inside an emoji (a lone surrogate) and a NUL are text MCP
// servers accept: the call is logged, its args and result are kept to the
// byte (both engines: no database type that refuses or changes them), the
// same call spelt another way has the same signature, and verify passes.
func testLoneSurrogatesAndNULsAreKept(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	const args = `{"name":"cut \ud83d","nul":"a\u0000b","pair":"😀"}`
	res := intercept(t, s, "u", "write", sm.Compensable, `{"pair":"\ud83d\ude00","nul":"a\u0000b","name":"cut \uD83D"}`)
	if res.Outcome != model.OutcomeNew || string(res.Effect.Args) != args {
		t.Fatalf("%+v", res)
	}
	id := res.Effect.ID
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{Owner: &model.Owner{PID: 42, Host: "h"}}))
	same := intercept(t, s, "u", "write", sm.Compensable, args)
	if same.Signature != res.Signature || same.Effect.ID != id || same.Outcome != model.OutcomeInProgress {
		t.Fatalf("the same call: %+v", same)
	}
	if other := intercept(t, s, "u", "write", sm.Compensable, `{"name":"cut \ufffd","nul":"a\u0000b","pair":"😀"}`); other.Signature == res.Signature {
		t.Fatalf("U+FFFD shares the signature of a lone surrogate: %+v", other)
	}
	const result = `{"content":[{"text":"made \ude00\u0000","type":"text"}]}`
	if e := must[model.Effect](t)(s.Commit(t.Context(), id, model.Change{Result: json.RawMessage(result)})); string(e.Result) != result {
		t.Fatalf("result %s", e.Result)
	}
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	if string(d.Effect.Args) != args || string(d.Effect.Result) != result {
		t.Fatalf("read back: args %s result %s", d.Effect.Args, d.Effect.Result)
	}
	verifyClean(t, s)
}

// An error (a tool's text) holding a NUL is kept as sent, by an engine with
// text columns too; an actor holding one (an actor is a text column of a
// shared log) is refused by every engine alike, and nothing is written.
func testNULsInActorsAndErrors(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	res := intercept(t, s, "z", "write", sm.Compensable, `{}`)
	must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{}))
	must[model.Effect](t)(s.Fail(t.Context(), res.Effect.ID, model.Change{Error: "tool error: bad\x00byte"}))
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID))
	if d.Effect.Error != "tool error: bad\x00byte" {
		t.Fatalf("error %q", d.Effect.Error)
	}
	before := must[uint64](t)(s.LastChange(t.Context()))
	_, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "z", Tool: "other", Tier: sm.Compensable, Args: json.RawMessage(`{}`), Actor: "mcp:a\x00b"})
	if !errors.Is(err, model.ErrInvalidInput) {
		t.Fatalf("an actor with a NUL: %v", err)
	}
	if _, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: "y", Actor: "a\x00b"}); !errors.Is(err, model.ErrInvalidInput) {
		t.Fatalf("a session's actor with a NUL: %v", err)
	}
	if after := must[uint64](t)(s.LastChange(t.Context())); after != before {
		t.Fatalf("a refused write moved the log from %d to %d", before, after)
	}
	verifyClean(t, s)
}
