package saga

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

func committed(t *testing.T, store effectlog.Log, session string, comp *model.Compensation, args string) uint64 {
	t.Helper()
	res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: session, Tool: "step", Tier: sm.Compensable,
		Args: json.RawMessage(args), Compensation: comp, CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Start(t.Context(), res.Effect.ID, model.Change{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(t.Context(), res.Effect.ID, model.Change{}); err != nil {
		t.Fatal(err)
	}
	return res.Effect.ID
}

func TestBackoffDoublesAndCaps(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	id := committed(t, store, "s", &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"false"},
		MaxRetries: 5, InitialBackoffMS: 1500}, `1`)
	var slept []time.Duration
	r := &Runner{Log: store, Actor: "test", Sleep: func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		return nil
	}}
	res, err := r.Run(context.Background(), "s")
	if !errors.Is(err, ErrCompensationFailed) || res.Failed == nil || *res.Failed != id || res.State != "halted" {
		t.Fatalf("%+v %v", res, err)
	}
	want := []time.Duration{1500 * time.Millisecond, 3 * time.Second, MaxBackoff, MaxBackoff, MaxBackoff}
	if !reflect.DeepEqual(slept, want) {
		t.Fatalf("slept %v, want %v", slept, want)
	}
	d, _ := store.GetEffect(t.Context(), id)
	if d.Undo.Attempts != 6 || d.Undo.State != sm.EntryCompensationFailed {
		t.Fatalf("%+v", d.Undo)
	}
}

func TestSucceedsOnARetryAndWalksLIFO(t *testing.T) {
	dir := t.TempDir()
	store := logaddr.File(filepath.Join(dir, "u.db"), logaddr.Options{})
	order := filepath.Join(dir, "order")
	flaky := filepath.Join(dir, "flaky")
	mk := func(script string) *model.Compensation {
		return &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"sh", "-c", script}}
	}
	first := committed(t, store, "s", mk(`echo "$UNDOLOG_EFFECT_ID" >> `+order), `1`)
	// Fails on its first attempt, succeeds on the second.
	second := committed(t, store, "s", mk(`if [ "$UNDOLOG_ATTEMPT" = 1 ]; then exit 1; fi; echo "$UNDOLOG_EFFECT_ID" >> `+order+`; touch `+flaky), `2`)
	r := &Runner{Log: store, Actor: "test", Sleep: func(context.Context, time.Duration) error { return nil }}
	res, err := r.Run(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Compensated, []uint64{second, first}) || res.State != "compensated" {
		t.Fatalf("%+v", res)
	}
	data, _ := os.ReadFile(order)
	if got := strings.Fields(string(data)); !reflect.DeepEqual(got, []string{"2", "1"}) {
		t.Fatalf("ran in order %v", got)
	}
	if d, _ := store.GetEffect(t.Context(), second); d.Undo.Attempts != 2 {
		t.Fatalf("attempts %d", d.Undo.Attempts)
	}
	if rep, _ := store.Verify(t.Context()); len(rep.Problems) != 0 {
		t.Fatal(rep.Problems)
	}
}

func TestInterruptLeavesEntryInDoubt(t *testing.T) {
	dir := t.TempDir()
	store := logaddr.File(filepath.Join(dir, "u.db"), logaddr.Options{})
	runs := filepath.Join(dir, "runs")
	id := committed(t, store, "s", &model.Compensation{Kind: model.CompensationCommand,
		Argv: []string{"sh", "-c", `echo run >> ` + runs + `; [ "$UNDOLOG_ATTEMPT" != 1 ] || [ -e ` + runs + `.2 ] || exec sleep 5`}}, `1`)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	r := &Runner{Log: store, Actor: "test"}
	if _, err := r.Run(ctx, "s"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
	d, _ := store.GetEffect(t.Context(), id)
	if d.Undo.State != sm.EntryCompensating || d.Undo.Owner != nil {
		t.Fatalf("entry %s, owner %v", d.Undo.State, d.Undo.Owner)
	}
	plan, err := MakePlan(t.Context(), store, "s")
	if err != nil || len(plan.Steps) != 1 || plan.Steps[0].Action != ActionInDoubt {
		t.Fatalf("%+v %v", plan, err)
	}
	// It may have run: the next walk stops there and changes nothing...
	if _, err := (&Runner{Log: store, Actor: "test"}).Run(context.Background(), "s"); !errors.Is(err, ErrInDoubt) {
		t.Fatalf("%v", err)
	}
	if after, _ := store.GetEffect(t.Context(), id); len(after.History) != len(d.History) {
		t.Fatal("a walk stopped in doubt changed the log")
	}
	// ...unless told to run it again.
	os.WriteFile(runs+".2", nil, 0o600)
	res, err := (&Runner{Log: store, Actor: "test", RetryInDoubt: true}).Run(context.Background(), "s")
	if err != nil || res.State != "compensated" {
		t.Fatalf("%+v %v", res, err)
	}
	if data, _ := os.ReadFile(runs); strings.Count(string(data), "run") != 2 {
		t.Fatalf("ran %q", data)
	}
	if rep, _ := store.Verify(ctx); len(rep.Problems) != 0 {
		t.Fatal(rep.Problems)
	}
}

// Of two undos at once, only one runs a compensation; the other finds it
// in progress and runs nothing, and a reclaim of a live owner is refused.
func TestAPendingCompensationHasOneRunner(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	id := committed(t, store, "s", &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"true"}}, `1`)
	live := model.NewOwner(time.Now())
	if _, err := store.UndoStep(t.Context(), id, sm.EntryCompensating, model.Change{Owner: live}); err != nil {
		t.Fatal(err)
	}
	plan, err := MakePlan(t.Context(), store, "s")
	if err != nil || plan.Steps[0].Action != ActionInProgress {
		t.Fatalf("%+v %v", plan, err)
	}
	for _, retry := range []bool{false, true} {
		_, err := (&Runner{Log: store, Actor: "test", RetryInDoubt: retry}).Run(context.Background(), "s")
		if !errors.Is(err, model.ErrInProgress) {
			t.Fatalf("retry %v: %v", retry, err)
		}
	}
	if sess, _ := store.GetSession(t.Context(), "s"); sess.State == sm.SessionCompensating {
		t.Fatal("a refused undo moved the session")
	}
}

// flipInFile changes the one copy of old in the log file to new (same
// length), as a flipped byte on disk would; the log is compacted first so
// that the file holds every record once and the journal none.
func flipInFile(t *testing.T, store effectlog.FileLog, old, new string) {
	t.Helper()
	if _, _, err := store.Compact(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(store.Path())
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte(old)); n != 1 {
		t.Fatalf("%q is in the log %d times", old, n)
	}
	if err := os.WriteFile(store.Path(), bytes.Replace(data, []byte(old), []byte(new), 1), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestUndoRefusesATamperedCompensation: a compensation whose record fails its
// check is not run, nor is any other: the plan is refused with a clear error
// and the session is left as it was.
func TestUndoRefusesATamperedCompensation(t *testing.T) {
	dir := t.TempDir()
	store := logaddr.File(filepath.Join(dir, "u.db"), logaddr.Options{})
	first := committed(t, store, "s", &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"touch", filepath.Join(dir, "first-ran")}}, `1`)
	committed(t, store, "s", &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"touch", filepath.Join(dir, "ran-original")}}, `2`)
	flipInFile(t, store, "ran-original", "ran-tampered")
	if _, err := MakePlan(t.Context(), store, "s"); !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "damaged or tampered") {
		t.Fatalf("plan of a tampered compensation: %v", err)
	}
	r := &Runner{Log: store, Actor: "test", Sleep: func(context.Context, time.Duration) error { return nil }}
	if _, err := r.Run(context.Background(), "s"); !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "damaged or tampered") {
		t.Fatalf("undo of a tampered compensation: %v", err)
	}
	for _, name := range []string{"ran-original", "ran-tampered", "first-ran"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Fatalf("%s exists: a compensation ran", name)
		}
	}
	if sess, _ := store.GetSession(t.Context(), "s"); sess.State != sm.SessionActive {
		t.Fatalf("session %s, want it left active", sess.State)
	}
	if d, _ := store.GetEffect(t.Context(), first); d.Undo.State != sm.EntryPending {
		t.Fatalf("entry of effect %d is %s", first, d.Undo.State)
	}
}

// unreachable is an MCP client that never connected, as a connector that
// returns a nil *Client with its error hands one back.
type unreachable struct{}

func (*unreachable) CallTool(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	panic("CallTool on a client that never connected")
}
func (*unreachable) Close() error { panic("Close on a client that never connected") }

// TestUnreachableServerIsAFailedAttempt: an MCP server that does not connect
// fails the attempt; the attempts are retried, then the entry is
// compensation_failed and the session halted, and a later walk neither panics
// nor calls a client that never connected.
func TestUnreachableServerIsAFailedAttempt(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	id := committed(t, store, "s", &model.Compensation{Kind: model.CompensationMCP, Tool: "delete", Args: json.RawMessage(`{}`)}, `1`)
	if _, err := store.SetUpstream(t.Context(), "s", []string{"sh", "-c", "exit 1"}); err != nil {
		t.Fatal(err)
	}
	dials := 0
	r := &Runner{Log: store, Actor: "test", Sleep: func(context.Context, time.Duration) error { return nil },
		StartServer: func(context.Context, []string, string) (ToolCaller, error) {
			dials++
			var c *unreachable
			return c, errors.New("connect to MCP server sh -c exit 1: EOF")
		}}
	res, err := r.Run(context.Background(), "s")
	if !errors.Is(err, ErrCompensationFailed) || res.State != "halted" || !strings.Contains(err.Error(), "connect to MCP server") {
		t.Fatalf("%+v %v", res, err)
	}
	if dials != DefaultMaxRetries+1 {
		t.Fatalf("dialled %d times, want %d", dials, DefaultMaxRetries+1)
	}
	if d, _ := store.GetEffect(t.Context(), id); d.Undo.State != sm.EntryCompensationFailed || d.Undo.Attempts != DefaultMaxRetries+1 {
		t.Fatalf("%+v", d.Undo)
	}
}

// stubTools records the upstream servers undo asked to start.
type stubTools struct{ started [][]string }

func (s *stubTools) dial(_ context.Context, upstream []string, _ string) (ToolCaller, error) {
	s.started = append(s.started, upstream)
	return stubCaller{}, nil
}

type stubCaller struct{}

func (stubCaller) CallTool(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}
func (stubCaller) Close() error { return nil }

// TestUndoRefusesATamperedUpstream: the MCP server command a session
// recorded is started by undo only while the session's history covers it.
func TestUndoRefusesATamperedUpstream(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	// "<", ">" are escaped in the copy the history states (JSON), so that
	// the session record's copy is the one changed below.
	if _, err := store.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Upstream: []string{"mcp-server", "<original>"}}); err != nil {
		t.Fatal(err)
	}
	id := committed(t, store, "p", &model.Compensation{Kind: model.CompensationMCP, Tool: "delete"}, `1`)
	tools := &stubTools{}
	if res, err := (&Runner{Log: store, Actor: "test", StartServer: tools.dial}).Run(context.Background(), "p"); err != nil || res.State != "compensated" {
		t.Fatalf("undo of an intact session: %+v %v", res, err)
	}
	if len(tools.started) != 1 {
		t.Fatalf("started %v", tools.started)
	}

	store = logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	if _, err := store.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Upstream: []string{"mcp-server", "<original>"}}); err != nil {
		t.Fatal(err)
	}
	id = committed(t, store, "p", &model.Compensation{Kind: model.CompensationMCP, Tool: "delete"}, `1`)
	flipInFile(t, store, "<original>", "<tampered>")
	tools = &stubTools{}
	if _, err := MakePlan(t.Context(), store, "p"); !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "damaged or tampered") {
		t.Fatalf("plan of a session with a tampered upstream: %v", err)
	}
	_, err := (&Runner{Log: store, Actor: "test", StartServer: tools.dial}).Run(context.Background(), "p")
	if !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "damaged or tampered") {
		t.Fatalf("undo of a session with a tampered upstream: %v", err)
	}
	if len(tools.started) != 0 {
		t.Fatalf("undo started %v", tools.started)
	}
	if d, _ := store.GetEffect(t.Context(), id); d.Undo.State != sm.EntryPending {
		t.Fatalf("entry is %s", d.Undo.State)
	}
}

// TestUndoRefusesATamperedEntryState: an undo entry set back to pending
// after its compensation ran, or a session whose state disagrees with its
// history, runs nothing again.
func TestUndoRefusesATamperedEntryState(t *testing.T) {
	// Binary records: an undo entry's value starts with its form, 'U' and
	// its state's token (compensated 5, pending 1); a session's with its
	// form, 'S', its id and its state's token (compensated 5, failed 21).
	entryState := func(id uint64, token byte) string {
		key := append([]byte("s\x00"), 0, 0, 0, 0, 0, 0, 0, byte(id))
		return string(key) + "\x03U" + string([]byte{token})
	}
	sessionState := func(token byte) string { return "\x03S\x01s" + string([]byte{token}) }
	for name, flips := range map[string][][2]string{
		"entry and session": {{entryState(1, 5), entryState(1, 1)}, {sessionState(5), sessionState(21)}},
		"entry":             {{entryState(1, 5), entryState(1, 1)}},
		"session":           {{sessionState(5), sessionState(21)}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			store := logaddr.File(filepath.Join(dir, "u.db"), logaddr.Options{})
			runs := filepath.Join(dir, "runs")
			id := committed(t, store, "s", &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"sh", "-c", "echo run >> " + runs}}, `1`)
			if id != 1 {
				t.Fatalf("effect %d", id)
			}
			if res, err := (&Runner{Log: store, Actor: "test"}).Run(context.Background(), "s"); err != nil || res.State != "compensated" {
				t.Fatalf("%+v %v", res, err)
			}
			for _, f := range flips {
				flipInFile(t, store, f[0], f[1])
			}
			if rep, _ := store.Verify(t.Context()); len(rep.Problems) == 0 {
				t.Fatal("verify found nothing")
			}
			_, err := (&Runner{Log: store, Actor: "test"}).Run(context.Background(), "s")
			if !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "damaged or tampered") {
				t.Fatalf("undo of a tampered entry or session: %v", err)
			}
			if data, _ := os.ReadFile(runs); strings.Count(string(data), "run") != 1 {
				t.Fatalf("the compensation ran %d times", strings.Count(string(data), "run"))
			}
		})
	}
}

// startedMeanwhile is a log on which another undo moves the session to
// compensating just before this one does.
type startedMeanwhile struct {
	effectlog.Log
	done bool
}

func (l *startedMeanwhile) SetSessionState(ctx context.Context, id string, to sm.SessionState, c model.Change) (model.Session, error) {
	if to == sm.SessionCompensating && !l.done {
		l.done = true
		if _, err := l.Log.SetSessionState(ctx, id, to, model.Change{Actor: "the other undo"}); err != nil {
			return model.Session{}, err
		}
	}
	return l.Log.SetSessionState(ctx, id, to, c)
}

// Two undos that both find the session not yet compensating: the one that
// moves it second goes on with the walk (and meets the other's steps as in
// progress), not with an invalid transition compensating -> compensating.
func TestAnUndoStartedMeanwhileIsJoined(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	committed(t, store, "s", &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"true"}}, `1`)
	if _, err := store.SetSessionState(t.Context(), "s", sm.SessionFailed, model.Change{}); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Log: &startedMeanwhile{Log: store}, Actor: "test"}
	res, err := r.Run(t.Context(), "s")
	if err != nil || res.State != string(sm.SessionCompensated) || len(res.Compensated) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
}

// An undo a person confirmed runs only the plan they saw: a step logged
// since (another process's call) makes it refuse with nothing run, and the
// plan as it now is runs once confirmed.
func TestConfirmedPlanRunsOnlyAsShown(t *testing.T) {
	dir := t.TempDir()
	store := logaddr.File(filepath.Join(dir, "u.db"), logaddr.Options{})
	touch := func(name string) *model.Compensation {
		return &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"touch", filepath.Join(dir, name)}}
	}
	committed(t, store, "s", touch("undo-1"), `{"n":1}`)
	shown, err := MakePlan(t.Context(), store, "s")
	if err != nil {
		t.Fatal(err)
	}
	committed(t, store, "s", touch("undo-2"), `{"n":2}`)
	r := &Runner{Log: store, Actor: "test", Confirmed: &shown}
	if _, err := r.Run(t.Context(), "s"); !errors.Is(err, ErrPlanChanged) || !errors.Is(err, model.ErrConflict) {
		t.Fatalf("undo of a plan that changed since it was shown: %v, want ErrPlanChanged", err)
	}
	for _, name := range []string{"undo-1", "undo-2"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Fatalf("%s ran, though the plan was refused", name)
		}
	}
	if s, err := store.GetSession(t.Context(), "s"); err != nil || s.State != sm.SessionActive {
		t.Fatalf("the session after a refused undo: %v %v, want active", s.State, err)
	}
	now, err := MakePlan(t.Context(), store, "s")
	if err != nil {
		t.Fatal(err)
	}
	r.Confirmed = &now
	if res, err := r.Run(t.Context(), "s"); err != nil || len(res.Compensated) != 2 {
		t.Fatalf("undo of the plan as it is: %+v %v", res, err)
	}
}

// The plan says where each call runs, and flags one that cannot run here:
// its command's directory or its server's is gone, or its session has no
// server.
func TestPlanFlagsWhatCannotRunHere(t *testing.T) {
	dir := t.TempDir()
	store := logaddr.File(filepath.Join(dir, "u.db"), logaddr.Options{})
	gone, here := filepath.Join(dir, "gone"), filepath.Join(dir, "here")
	for _, d := range []string{gone, here} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mcp := &model.Compensation{Kind: model.CompensationMCP, Tool: "delete", Args: json.RawMessage(`{}`)}
	committed(t, store, "command", &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"rm", "f"}, Dir: gone}, `1`)
	committed(t, store, "serverless", mcp, `2`)
	committed(t, store, "server-gone", mcp, `3`)
	committed(t, store, "server-here", mcp, `4`)
	for session, d := range map[string]string{"server-gone": gone, "server-here": here} {
		if _, err := store.SetUpstreamAt(t.Context(), session, []string{"mcp-server-x"}, d, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	for session, want := range map[string][2]string{
		"command":     {" (in " + gone + ")", "its directory " + gone + " is not there"},
		"serverless":  {" (no MCP server recorded)", "its session recorded none"},
		"server-gone": {" (server: mcp-server-x)", "its MCP server's directory " + gone + " is not there"},
		"server-here": {" (server: mcp-server-x)", ""},
	} {
		plan, err := MakePlan(t.Context(), store, session)
		if err != nil {
			t.Fatal(err)
		}
		s := plan.Steps[0]
		if where := plan.Where(s); where != want[0] {
			t.Errorf("%s: the plan says the call runs %q, want %q", session, where, want[0])
		}
		if want[1] == "" && s.Problem != "" || !strings.Contains(s.Problem, want[1]) {
			t.Errorf("%s: problem %q, want %q", session, s.Problem, want[1])
		}
	}
}

// An irreversible call of the session still running keeps undo off the
// calls before it (what it does may rest on them): undo refuses, moving
// nothing, until it has ended.
func TestUndoWaitsForARunningIrreversibleCall(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	marker := filepath.Join(t.TempDir(), "undone")
	first := committed(t, store, "s", &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"touch", marker}}, `1`)
	res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "deploy", Tier: sm.Irreversible, Args: json.RawMessage(`2`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Approve(t.Context(), res.Effect.ID, model.Change{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Start(t.Context(), res.Effect.ID, model.Change{Owner: model.NewOwner(time.Now()).WithLease(time.Now().Add(time.Minute))}); err != nil {
		t.Fatal(err)
	}
	plan, err := MakePlan(t.Context(), store, "s")
	if err != nil || plan.Waits() == nil {
		t.Fatalf("the plan does not say it waits: %v %v", plan.Waits(), err)
	}
	out, err := (&Runner{Log: store, Actor: "alice"}).Run(t.Context(), "s")
	if !errors.Is(err, model.ErrInProgress) || len(out.Compensated) != 0 {
		t.Fatalf("undo under a running call: %+v %v", out, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the call before it was undone")
	}
	if d, _ := store.GetEffect(t.Context(), first); d.Undo.State != sm.EntryPending {
		t.Fatalf("its undo entry moved: %s", d.Undo.State)
	}
	if sess, _ := store.GetSession(t.Context(), "s"); sess.State != sm.SessionActive {
		t.Fatalf("the session moved: %s", sess.State)
	}
	// An undo whose plan was made before the call started is refused in
	// the transaction that would start it (no race between the two).
	if _, err := store.SetSessionState(t.Context(), "s", sm.SessionCompensating, model.Change{Actor: "alice"}); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("an undo's start under a running call: %v", err)
	}
}
