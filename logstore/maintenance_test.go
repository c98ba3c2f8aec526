package logstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

func TestGCDropsOldFinishedSessionsAndCompactShrinks(t *testing.T) {
	s, clk := newStore(t)
	fill := func(session string, n int) {
		for i := 0; i < n; i++ {
			res := intercept(t, s, session, "w", sm.Compensable, fmt.Sprintf(`{"i":%d,"pad":"%0200d"}`, i, i))
			must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{}))
			must[model.Effect](t)(s.Commit(t.Context(), res.Effect.ID, model.Change{Result: json.RawMessage(`1`)}))
			intercept(t, s, session, "w", sm.Compensable, fmt.Sprintf(`{"i":%d,"pad":"%0200d"}`, i, i)) // a replay
		}
		irr := intercept(t, s, session, "pay", sm.Irreversible, `{}`)
		must[model.Effect](t)(s.Approve(t.Context(), irr.Effect.ID, model.Change{}))
	}
	fill("old-done", 300)
	must[model.Session](t)(s.SetSessionState(t.Context(), "old-done", sm.SessionCompleted, model.Change{}))
	fill("old-live", 5)
	clk.add(48 * time.Hour)
	fill("new-done", 5)
	must[model.Session](t)(s.SetSessionState(t.Context(), "new-done", sm.SessionCompleted, model.Change{}))

	rep := must[GCReport](t)(s.GC(t.Context(), clk.now().Add(-24*time.Hour), []sm.SessionState{sm.SessionCompleted, sm.SessionCompensated}))
	if len(rep.Sessions) != 1 || rep.Sessions[0] != "old-done" || rep.Effects != 601 {
		t.Fatalf("%+v", rep)
	}
	if _, err := s.GetSession(t.Context(), "old-done"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("dropped session still there: %v", err)
	}
	if _, err := s.GetEffect(t.Context(), 1); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("dropped effect still there: %v", err)
	}
	for _, id := range []string{"old-live", "new-done"} {
		if sess := must[model.Session](t)(s.GetSession(t.Context(), id)); sess.Effects != 11 {
			t.Fatalf("%s: %+v", id, sess)
		}
	}
	// The dropped call is a new call again.
	if res := intercept(t, s, "old-live", "w", sm.Compensable, `{"fresh":1}`); res.Outcome != model.OutcomeNew {
		t.Fatalf("%+v", res)
	}
	verifyClean(t, s)

	before, after, err := s.Compact()
	if err != nil {
		t.Fatal(err)
	}
	if after >= before*2/3 {
		t.Fatalf("compaction shrank %d to %d bytes only", before, after)
	}
	rep2 := verifyClean(t, s)
	if rep2.Sessions != 2 || rep2.Effects != 23 {
		t.Fatalf("after compaction: %+v", rep2)
	}
	if res := intercept(t, s, "old-live", "w", sm.Compensable, `{"after":1}`); res.Outcome != model.OutcomeNew {
		t.Fatal("the compacted log does not take writes")
	}
}

func TestCompactRefusedWhileHeld(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "a", "w", sm.Compensable, `{}`)
	held, err := bolt.Open(s.Path(), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	quick := New(s.Path(), Options{LockTimeout: 100 * time.Millisecond})
	if _, _, err := quick.Compact(); !errors.Is(err, model.ErrBusy) {
		t.Fatalf("%v", err)
	}
}

// GC picks its victims in one read and drops each in a write of its own; a
// session that moved meanwhile (undo started on it, or it changed) is kept,
// and the report does not name it.
func TestGCKeepsSessionsThatMovedAfterItLooked(t *testing.T) {
	s, clk := newStore(t)
	for _, id := range []string{"undone-meanwhile", "touched-meanwhile", "still-failed"} {
		res := intercept(t, s, id, "w", sm.Compensable, `{"s":"`+id+`"}`)
		must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{}))
		must[model.Effect](t)(s.Commit(t.Context(), res.Effect.ID, model.Change{}))
		must[model.Session](t)(s.SetSessionState(t.Context(), id, sm.SessionFailed, model.Change{}))
	}
	must[model.Session](t)(s.SetSessionState(t.Context(), "touched-meanwhile", sm.SessionCompensating, model.Change{}))
	must[model.Session](t)(s.SetSessionState(t.Context(), "touched-meanwhile", sm.SessionHalted, model.Change{}))
	clk.add(48 * time.Hour)

	gcBeforeDrop = func(id string) {
		switch id {
		case "undone-meanwhile": // undo's first step, between GC's read and its drop
			must[model.Session](t)(s.SetSessionState(t.Context(), id, sm.SessionCompensating, model.Change{Reason: "undo started"}))
		case "touched-meanwhile": // still halted, but changed just now
			must[model.Session](t)(s.SetSessionState(t.Context(), id, sm.SessionCompensating, model.Change{}))
			must[model.Session](t)(s.SetSessionState(t.Context(), id, sm.SessionHalted, model.Change{}))
		}
	}
	t.Cleanup(func() { gcBeforeDrop = nil })
	rep := must[GCReport](t)(s.GC(t.Context(), clk.now().Add(-24*time.Hour), []sm.SessionState{sm.SessionFailed, sm.SessionHalted}))
	if len(rep.Sessions) != 1 || rep.Sessions[0] != "still-failed" || rep.Effects != 1 {
		t.Fatalf("%+v", rep)
	}
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "undone-meanwhile")); sess.State != sm.SessionCompensating || sess.Effects != 1 {
		t.Fatalf("%+v", sess)
	}
	if stack, _, err := s.UndoStack(t.Context(), "undone-meanwhile", 0); err != nil || len(stack) != 1 {
		t.Fatalf("undo stack %v %v", stack, err)
	}
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "touched-meanwhile")); sess.State != sm.SessionHalted {
		t.Fatalf("%+v", sess)
	}
	verifyClean(t, s)
}
