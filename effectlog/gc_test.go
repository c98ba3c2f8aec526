package effectlog_test

import (
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// GC picks its victims in one read and drops each in a write of its own; a
// session that moved meanwhile (undo started on it, or it changed) is kept,
// and the report does not name it.
func TestGCKeepsSessionsThatMovedAfterItLooked(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	s := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{Now: now})
	t.Cleanup(func() { s.Close() })
	ok := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"undone-meanwhile", "touched-meanwhile", "still-failed"} {
		res, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: id, Tool: "w", Tier: sm.Compensable,
			Args: json.RawMessage(`{"s":"` + id + `"}`), CreateSession: true})
		ok(res, err)
		ok(s.Start(t.Context(), res.Effect.ID, model.Change{}))
		ok(s.Commit(t.Context(), res.Effect.ID, model.Change{}))
		ok(s.SetSessionState(t.Context(), id, sm.SessionFailed, model.Change{}))
	}
	ok(s.SetSessionState(t.Context(), "touched-meanwhile", sm.SessionCompensating, model.Change{}))
	ok(s.SetSessionState(t.Context(), "touched-meanwhile", sm.SessionHalted, model.Change{}))
	mu.Lock()
	clock = clock.Add(48 * time.Hour)
	mu.Unlock()

	t.Cleanup(effectlog.SetGCBeforeDrop(func(id string) {
		switch id {
		case "undone-meanwhile": // undo's first step, between GC's read and its drop
			ok(s.SetSessionState(t.Context(), id, sm.SessionCompensating, model.Change{Reason: "undo started"}))
		case "touched-meanwhile": // still halted, but changed just now
			ok(s.SetSessionState(t.Context(), id, sm.SessionCompensating, model.Change{}))
			ok(s.SetSessionState(t.Context(), id, sm.SessionHalted, model.Change{}))
		}
	}))
	rep, err := s.GC(t.Context(), now().Add(-24*time.Hour), []sm.SessionState{sm.SessionFailed, sm.SessionHalted})
	if err != nil || len(rep.Sessions) != 1 || rep.Sessions[0] != "still-failed" || rep.Effects != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	if sess, err := s.GetSession(t.Context(), "undone-meanwhile"); err != nil || sess.State != sm.SessionCompensating || sess.Effects != 1 {
		t.Fatalf("%+v %v", sess, err)
	}
	if stack, _, err := s.UndoStack(t.Context(), "undone-meanwhile", 0); err != nil || len(stack) != 1 {
		t.Fatalf("undo stack %v %v", stack, err)
	}
	if sess, err := s.GetSession(t.Context(), "touched-meanwhile"); err != nil || sess.State != sm.SessionHalted {
		t.Fatalf("%+v %v", sess, err)
	}
	if rep, err := s.Verify(t.Context()); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("verify: %+v %v", rep.Problems, err)
	}
}
