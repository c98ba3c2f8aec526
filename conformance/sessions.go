package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

func testSessions(t *testing.T, newStore opener) {
	s, clk := newStore(t)
	a := must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "deploy-117", Meta: map[string]string{"pipeline": "api"}}))
	if a.State != sm.SessionActive || a.Meta["pipeline"] != "api" {
		t.Fatalf("%+v", a)
	}
	if _, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: "deploy-117"}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("duplicate: %v", err)
	}
	clk.add(time.Hour)
	b := must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{}))
	if !strings.HasPrefix(b.ID, "sess-20261130-") {
		t.Fatalf("generated id %q", b.ID)
	}
	must[model.Session](t)(s.SetSessionState(t.Context(), "deploy-117", sm.SessionCompleted, model.Change{Actor: "ci"}))
	if _, err := s.SetSessionState(t.Context(), "deploy-117", sm.SessionFailed, model.Change{}); !errors.Is(err, sm.ErrInvalidStateTransition) {
		t.Fatalf("completed -> failed: %v", err)
	}
	all, _, _ := s.ListSessions(t.Context(), effectlog.SessionFilter{})
	if len(all) != 2 || all[0].ID != b.ID {
		t.Fatalf("newest first: %+v", all)
	}
	done, _, _ := s.ListSessions(t.Context(), effectlog.SessionFilter{State: sm.SessionCompleted})
	if len(done) != 1 || done[0].ID != "deploy-117" {
		t.Fatalf("by state: %+v", done)
	}
	recent, _, _ := s.ListSessions(t.Context(), effectlog.SessionFilter{Since: clk.now().Add(-time.Minute)})
	if len(recent) != 1 || recent[0].ID != b.ID {
		t.Fatalf("since: %+v", recent)
	}
	page, next, _ := s.ListSessions(t.Context(), effectlog.SessionFilter{Limit: 1})
	rest, next2, _ := s.ListSessions(t.Context(), effectlog.SessionFilter{Limit: 1, Cursor: next})
	if len(page) != 1 || len(rest) != 1 || rest[0].ID != "deploy-117" || next == 0 || next2 != 0 {
		t.Fatalf("paging: %v %v %d %d", page, rest, next, next2)
	}
	if _, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "deploy-117", Tool: "x", Tier: sm.Compensable}); !errors.Is(err, model.ErrSessionNotActive) {
		t.Fatalf("completed session took an effect: %v", err)
	}
}

// testUpstreamDir: the directory a proxy's upstream ran in round-trips
// with its command, through creation and SetUpstreamAt, and the session's
// check holds it to its history.
func testUpstreamDir(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	a := must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Upstream: []string{"srv", "scratch"}, UpstreamDir: "/work/a"}))
	if a.UpstreamDir != "/work/a" {
		t.Fatalf("created: %+v", a)
	}
	got := must[model.Session](t)(s.VerifySession(t.Context(), "p"))
	if got.UpstreamDir != "/work/a" || len(got.Upstream) != 2 {
		t.Fatalf("read back: %+v", got)
	}
	must[model.Session](t)(s.SetUpstreamAt(t.Context(), "p", []string{"srv", "scratch"}, "/work/b", nil))
	got = must[model.Session](t)(s.VerifySession(t.Context(), "p"))
	if got.UpstreamDir != "/work/b" {
		t.Fatalf("after SetUpstreamAt: %+v", got)
	}
	before := len(must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), "p")))
	must[model.Session](t)(s.SetUpstreamAt(t.Context(), "p", []string{"srv", "scratch"}, "/work/b", nil))
	if after := len(must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), "p"))); after != before {
		t.Fatalf("the same upstream and directory again added a record: %d -> %d", before, after)
	}
	// Without a directory: as before, none.
	must[model.Session](t)(s.SetUpstream(t.Context(), "p", []string{"srv"}))
	if got = must[model.Session](t)(s.VerifySession(t.Context(), "p")); got.UpstreamDir != "" {
		t.Fatalf("SetUpstream kept a directory: %+v", got)
	}
}

// testUpstreamStateEnv: what located an upstream's state round-trips with
// its command through creation and SetUpstreamAt, as its history states it:
// a variable that was unset stays told apart from one not recorded, and the
// same again writes nothing.
func testUpstreamStateEnv(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	a, empty := "/work/a/memory.jsonl", ""
	must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Upstream: []string{"srv"}, UpstreamDir: "/work",
		UpstreamEnv: model.StateEnv{"MEMORY_FILE_PATH": &a, "UNSET": nil, "EMPTY": &empty}}))
	got := must[model.Session](t)(s.VerifySession(t.Context(), "p"))
	if v, ok := got.UpstreamEnv["UNSET"]; len(got.UpstreamEnv) != 3 || *got.UpstreamEnv["MEMORY_FILE_PATH"] != a || *got.UpstreamEnv["EMPTY"] != "" || !ok || v != nil {
		t.Fatalf("read back: %+v", got.UpstreamEnv)
	}
	b := "/work/b/memory.jsonl"
	must[model.Session](t)(s.SetUpstreamAt(t.Context(), "p", []string{"srv"}, "/work", model.StateEnv{"MEMORY_FILE_PATH": &b}))
	got = must[model.Session](t)(s.VerifySession(t.Context(), "p"))
	if len(got.UpstreamEnv) != 1 || *got.UpstreamEnv["MEMORY_FILE_PATH"] != b {
		t.Fatalf("after SetUpstreamAt: %+v", got.UpstreamEnv)
	}
	// The calls before were made on another state (the first variable that
	// differs, by name): undo refuses the session.
	if want := `EMPTY was "", then not recorded`; got.UpstreamEnvMoved != want {
		t.Fatalf("the state moved: %q, want %q", got.UpstreamEnvMoved, want)
	}
	before := len(must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), "p")))
	must[model.Session](t)(s.SetUpstreamAt(t.Context(), "p", []string{"srv"}, "/work", model.StateEnv{"MEMORY_FILE_PATH": &b}))
	if after := len(must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), "p"))); after != before {
		t.Fatalf("the same upstream, directory and state again added a record: %d -> %d", before, after)
	}
	must[model.Session](t)(s.SetUpstreamAt(t.Context(), "p", []string{"srv"}, "/work", model.StateEnv{"MEMORY_FILE_PATH": nil}))
	if got = must[model.Session](t)(s.VerifySession(t.Context(), "p")); got.UpstreamEnv == nil || got.UpstreamEnv["MEMORY_FILE_PATH"] != nil {
		t.Fatalf("a variable now unset: %+v", got.UpstreamEnv)
	}
	must[model.Session](t)(s.SetUpstreamAt(t.Context(), "p", []string{"srv"}, "/work", nil))
	if got = must[model.Session](t)(s.VerifySession(t.Context(), "p")); got.UpstreamEnv != nil {
		t.Fatalf("nothing recorded now: %+v", got.UpstreamEnv)
	}
	for _, env := range []model.StateEnv{{"": &a}, {"A=B": &a}, {"BAD": ptr("\xff")}} {
		if _, err := s.SetUpstreamAt(t.Context(), "p", []string{"srv"}, "/work", env); !errors.Is(err, model.ErrInvalidInput) {
			t.Fatalf("SetUpstreamAt with %v: %v", env, err)
		}
	}
	verifyClean(t, s)
}

func ptr(s string) *string { return &s }

// testNoNewEffect: an intercept with NoNewEffect resolves a repeat as any
// intercept does, and for a call that would be new writes nothing (no
// session, no effect): the proxy looks a call up before its capture.
func testNoNewEffect(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	look := func(args string) effectlog.InterceptResult {
		t.Helper()
		return must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "p", Tool: "w", Tier: sm.Compensable,
			Args: json.RawMessage(args), CreateSession: true, NoNewEffect: true}))
	}
	if res := look(`{"a":1}`); res.Outcome != model.OutcomeUnregistered || res.Effect.ID != 0 {
		t.Fatalf("a call into no session: %+v", res)
	}
	if _, err := s.GetSession(t.Context(), "p"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the look-up made the session: %v", err)
	}
	id := intercept(t, s, "p", "w", sm.Compensable, `{"a":1}`).Effect.ID
	if res := look(`{"a":2}`); res.Outcome != model.OutcomeUnregistered {
		t.Fatalf("another call: %+v", res)
	}
	if res := look(`{"a":1}`); res.Outcome != model.OutcomePending || res.Effect.ID != id {
		t.Fatalf("the registered call: %+v", res)
	}
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
	must[model.Effect](t)(s.Commit(t.Context(), id, model.Change{Result: json.RawMessage(`{"ok":true}`)}))
	if res := look(`{"a":1}`); res.Outcome != model.OutcomeReplayed || string(res.Effect.Result) != `{"ok":true}` {
		t.Fatalf("the committed call: %+v", res)
	}
	if all, _, _ := s.ListEffects(t.Context(), effectlog.EffectFilter{Session: "p"}); len(all) != 2 {
		t.Fatalf("effects: %+v", all)
	}
}

func testListEffectsFiltersAndPages(t *testing.T, newStore opener) {
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
	ids := func(list []model.Effect) (out []uint64) {
		for _, e := range list {
			out = append(out, e.ID)
		}
		return
	}
	all, _, _ := s.ListEffects(t.Context(), effectlog.EffectFilter{})
	if got := ids(all); len(got) != 10 || got[0] != 10 || got[9] != 1 {
		t.Fatalf("all newest first: %v", got)
	}
	asc, _, _ := s.ListEffects(t.Context(), effectlog.EffectFilter{Session: "a", Ascending: true})
	if got := ids(asc); len(got) != 5 || got[0] != 1 || got[4] != 9 {
		t.Fatalf("session a ascending: %v", got)
	}
	combo, _, _ := s.ListEffects(t.Context(), effectlog.EffectFilter{Session: "b", Tool: "mail"})
	if got := ids(combo); len(got) != 2 || got[0] != 8 || got[1] != 2 {
		t.Fatalf("session b, mail: %v", got)
	}
	byTier, _, _ := s.ListEffects(t.Context(), effectlog.EffectFilter{Tier: sm.Irreversible})
	if got := ids(byTier); len(got) != 3 {
		t.Fatalf("irreversible: %v", got)
	}
	byState, _, _ := s.ListEffects(t.Context(), effectlog.EffectFilter{State: sm.Pending, Tool: "write"})
	if got := ids(byState); len(got) != 4 {
		t.Fatalf("pending write: %v", got)
	}
	since, _, _ := s.ListEffects(t.Context(), effectlog.EffectFilter{Since: clk.now().Add(-3*time.Minute - time.Second)})
	if got := ids(since); len(got) != 3 || got[2] != 8 {
		t.Fatalf("since: %v", got)
	}
	var pages [][]uint64
	var cursor uint64
	for {
		page, next, err := s.ListEffects(t.Context(), effectlog.EffectFilter{Limit: 4, Cursor: cursor})
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

func testReadLimits(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	var waiting, undoable []uint64
	for i := 0; i < 5; i++ {
		waiting = append(waiting, intercept(t, s, fmt.Sprintf("agent-%d", i), "pay", sm.Irreversible, fmt.Sprintf(`{"n":%d}`, i)).Effect.ID)
		undoable = append(undoable, intercept(t, s, "ci", "write", sm.Compensable, fmt.Sprintf(`{"n":%d}`, i)).Effect.ID)
	}
	list, n, err := s.PendingApprovals(t.Context(), "", 2)
	if err != nil || n != 5 || len(list) != 2 || list[0].EffectID != waiting[0] || list[1].EffectID != waiting[1] {
		t.Fatalf("approvals limit 2: %d waiting, %+v, %v", n, list, err)
	}
	list, n, err = s.PendingApprovals(t.Context(), "agent-3", 2)
	if err != nil || n != 1 || len(list) != 1 || list[0].EffectID != waiting[3] {
		t.Fatalf("approvals of one session: %d waiting, %+v, %v", n, list, err)
	}
	stack, n, err := s.UndoStack(t.Context(), "ci", 3)
	if err != nil || n != 5 || len(stack) != 3 || stack[0].EffectID != undoable[4] || stack[2].EffectID != undoable[2] {
		t.Fatalf("undo stack limit 3: %d entries, %+v, %v", n, stack, err)
	}
}

func testUndoSteps(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	cmd := &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"rm", "f"}}
	mk := func(args string) uint64 {
		return must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "u", Tool: "touch", Tier: sm.Compensable,
			Args: json.RawMessage(args), Compensation: cmd, CreateSession: true})).Effect.ID
	}
	committed, executing, never := mk(`1`), mk(`2`), mk(`3`)
	must[model.Effect](t)(s.Start(t.Context(), committed, model.Change{}))
	must[model.Effect](t)(s.Commit(t.Context(), committed, model.Change{}))
	must[model.Effect](t)(s.Start(t.Context(), executing, model.Change{}))

	stack := undoStack(t, s, "u")
	if len(stack) != 3 || stack[0].EffectID != never || stack[2].EffectID != committed || stack[0].Compensation.Argv[0] != "rm" {
		t.Fatalf("LIFO stack %+v", stack)
	}
	must[model.Session](t)(s.SetSessionState(t.Context(), "u", sm.SessionCompensating, model.Change{}))
	if _, err := s.UndoStep(t.Context(), never, sm.EntryCompensating, model.Change{}); !errors.Is(err, sm.ErrInvalidStateTransition) {
		t.Fatalf("compensating a never-run effect: %v", err)
	}
	must[model.UndoEntry](t)(s.UndoStep(t.Context(), never, sm.EntrySkipped, model.Change{}))
	must[model.UndoEntry](t)(s.UndoStep(t.Context(), executing, sm.EntryCompensating, model.Change{Actor: "undo"}))
	u := must[model.UndoEntry](t)(s.UndoStep(t.Context(), executing, sm.EntryCompensated, model.Change{Actor: "undo", Attempts: 1}))
	if u.State != sm.EntryCompensated || u.Attempts != 1 {
		t.Fatalf("%+v", u)
	}
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), executing))
	if d.Effect.State != sm.Compensated {
		t.Fatalf("executing effect should follow its entry: %s", d.Effect.State)
	}
	must[model.UndoEntry](t)(s.UndoStep(t.Context(), committed, sm.EntryCompensating, model.Change{}))
	must[model.UndoEntry](t)(s.UndoStep(t.Context(), committed, sm.EntryCompensationFailed, model.Change{Error: "boom", Attempts: 4}))
	d = must[model.EffectDetail](t)(s.GetEffect(t.Context(), committed))
	if d.Effect.State != sm.Committed || d.Undo.State != sm.EntryCompensationFailed || d.Undo.LastError != "boom" || d.Undo.Attempts != 4 {
		t.Fatalf("committed effect keeps its state, the entry carries the undo: %+v %+v", d.Effect, d.Undo)
	}
	if _, err := s.UndoStep(t.Context(), committed, sm.EntryCompensating, model.Change{}); !errors.Is(err, sm.ErrInvalidStateTransition) {
		t.Fatalf("failed entry retried without resolve: %v", err)
	}
	must[model.UndoEntry](t)(s.UndoStep(t.Context(), committed, sm.EntryResolved, model.Change{Actor: "ops", Reason: "fixed by hand"}))
	if got := states(must[model.EffectDetail](t)(s.GetEffect(t.Context(), committed)).History); !strings.HasSuffix(got, "undo:pending>compensating undo:compensating>compensation_failed undo:compensation_failed>resolved") {
		t.Fatalf("undo history %s", got)
	}
	must[model.Session](t)(s.SetSessionState(t.Context(), "u", sm.SessionCompensated, model.Change{}))
	verifyClean(t, s)
}

// Close lets the log go with everything written kept, and the log can be
// used again after it.
func testCloseKeepsWhatWasWritten(t *testing.T, open opener) {
	log, _ := open(t)
	res := intercept(t, log, "s", "w", sm.Compensable, `{"n":1}`)
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := log.GetEffect(t.Context(), res.Effect.ID)
	if err != nil || d.Effect.State != sm.Pending || string(d.Effect.Args) != `{"n":1}` {
		t.Fatalf("after Close: %+v %v", d.Effect, err)
	}
	if _, err := log.Start(t.Context(), res.Effect.ID, model.Change{}); err != nil {
		t.Fatalf("a write after Close: %v", err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	verifyClean(t, log)
}
