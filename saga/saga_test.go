package saga

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/logstore"
	sm "github.com/undolog/undolog/statemachine"
)

func committed(t *testing.T, store logstore.Log, session string, comp *logstore.Compensation, args string) uint64 {
	t.Helper()
	res, err := store.Intercept(logstore.InterceptRequest{Session: session, Tool: "step", Tier: sm.Compensable,
		Args: json.RawMessage(args), Compensation: comp, CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Start(res.Effect.ID, logstore.Change{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(res.Effect.ID, logstore.Change{}); err != nil {
		t.Fatal(err)
	}
	return res.Effect.ID
}

func TestBackoffDoublesAndCaps(t *testing.T) {
	store := logstore.New(filepath.Join(t.TempDir(), "u.db"), logstore.Options{})
	id := committed(t, store, "s", &logstore.Compensation{Kind: logstore.CompensationCommand, Argv: []string{"false"},
		MaxRetries: 5, InitialBackoffMS: 1500}, `1`)
	var slept []time.Duration
	r := &Runner{Store: store, Actor: "test", Sleep: func(_ context.Context, d time.Duration) error {
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
	d, _ := store.GetEffect(id)
	if d.Undo.Attempts != 6 || d.Undo.State != sm.EntryCompensationFailed {
		t.Fatalf("%+v", d.Undo)
	}
}

func TestSucceedsOnARetryAndWalksLIFO(t *testing.T) {
	dir := t.TempDir()
	store := logstore.New(filepath.Join(dir, "u.db"), logstore.Options{})
	order := filepath.Join(dir, "order")
	flaky := filepath.Join(dir, "flaky")
	mk := func(script string) *logstore.Compensation {
		return &logstore.Compensation{Kind: logstore.CompensationCommand, Argv: []string{"sh", "-c", script}}
	}
	first := committed(t, store, "s", mk(`echo "$UNDOLOG_EFFECT_ID" >> `+order), `1`)
	// Fails on its first attempt, succeeds on the second.
	second := committed(t, store, "s", mk(`if [ "$UNDOLOG_ATTEMPT" = 1 ]; then exit 1; fi; echo "$UNDOLOG_EFFECT_ID" >> `+order+`; touch `+flaky), `2`)
	r := &Runner{Store: store, Actor: "test", Sleep: func(context.Context, time.Duration) error { return nil }}
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
	if d, _ := store.GetEffect(second); d.Undo.Attempts != 2 {
		t.Fatalf("attempts %d", d.Undo.Attempts)
	}
	if rep, _ := store.Verify(); len(rep.Problems) != 0 {
		t.Fatal(rep.Problems)
	}
}

func TestInterruptLeavesEntryInDoubt(t *testing.T) {
	dir := t.TempDir()
	store := logstore.New(filepath.Join(dir, "u.db"), logstore.Options{})
	runs := filepath.Join(dir, "runs")
	id := committed(t, store, "s", &logstore.Compensation{Kind: logstore.CompensationCommand,
		Argv: []string{"sh", "-c", `echo run >> ` + runs + `; [ "$UNDOLOG_ATTEMPT" != 1 ] || [ -e ` + runs + `.2 ] || exec sleep 5`}}, `1`)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	r := &Runner{Store: store, Actor: "test"}
	if _, err := r.Run(ctx, "s"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
	d, _ := store.GetEffect(id)
	if d.Undo.State != sm.EntryCompensating || d.Undo.Owner != nil {
		t.Fatalf("entry %s, owner %v", d.Undo.State, d.Undo.Owner)
	}
	plan, err := MakePlan(store, "s")
	if err != nil || len(plan.Steps) != 1 || plan.Steps[0].Action != ActionInDoubt {
		t.Fatalf("%+v %v", plan, err)
	}
	// It may have run: the next walk stops there and changes nothing...
	if _, err := (&Runner{Store: store, Actor: "test"}).Run(context.Background(), "s"); !errors.Is(err, ErrInDoubt) {
		t.Fatalf("%v", err)
	}
	if after, _ := store.GetEffect(id); len(after.History) != len(d.History) {
		t.Fatal("a walk stopped in doubt changed the log")
	}
	// ...unless told to run it again.
	os.WriteFile(runs+".2", nil, 0o600)
	res, err := (&Runner{Store: store, Actor: "test", RetryInDoubt: true}).Run(context.Background(), "s")
	if err != nil || res.State != "compensated" {
		t.Fatalf("%+v %v", res, err)
	}
	if data, _ := os.ReadFile(runs); strings.Count(string(data), "run") != 2 {
		t.Fatalf("ran %q", data)
	}
	if rep, _ := store.Verify(); len(rep.Problems) != 0 {
		t.Fatal(rep.Problems)
	}
}

// Of two undos at once, only one runs a compensation; the other finds it
// in progress and runs nothing, and a reclaim of a live owner is refused.
func TestAPendingCompensationHasOneRunner(t *testing.T) {
	store := logstore.New(filepath.Join(t.TempDir(), "u.db"), logstore.Options{})
	id := committed(t, store, "s", &logstore.Compensation{Kind: logstore.CompensationCommand, Argv: []string{"true"}}, `1`)
	live := logstore.NewOwner(time.Now())
	if _, err := store.UndoStep(id, sm.EntryCompensating, logstore.Change{Owner: live}); err != nil {
		t.Fatal(err)
	}
	plan, err := MakePlan(store, "s")
	if err != nil || plan.Steps[0].Action != ActionInProgress {
		t.Fatalf("%+v %v", plan, err)
	}
	for _, retry := range []bool{false, true} {
		_, err := (&Runner{Store: store, Actor: "test", RetryInDoubt: retry}).Run(context.Background(), "s")
		if !errors.Is(err, logstore.ErrInProgress) {
			t.Fatalf("retry %v: %v", retry, err)
		}
	}
	if sess, _ := store.GetSession("s"); sess.State == sm.SessionCompensating {
		t.Fatal("a refused undo moved the session")
	}
}
