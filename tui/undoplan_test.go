package tui

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// The undo a person confirms in the view is the plan it showed them: a step
// another process logged meanwhile runs nothing, and the view shows the plan
// as it now is to confirm again. A session with nothing to compensate says
// so rather than asking to undo 0 steps.
func TestViewUndoesOnlyThePlanItShowed(t *testing.T) {
	dir := t.TempDir()
	store := logaddr.File(filepath.Join(dir, "u.db"), logaddr.Options{})
	step := func(session, tool string, n int) {
		t.Helper()
		res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: session, Tool: tool, Tier: sm.Compensable, CreateSession: true,
			Args: json.RawMessage(`{"n":` + string(rune('0'+n)) + `}`), Start: true,
			Compensation: &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"touch", filepath.Join(dir, tool)}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Commit(t.Context(), res.Effect.ID, model.Change{}); err != nil {
			t.Fatal(err)
		}
	}
	step("s", "first", 1)
	m := New(t.Context(), Options{Log: store, Session: "s", Actor: "tester"})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	run := func(cmd tea.Cmd) { drive(m, cmd) }
	run(makePlan(t.Context(), store, "s"))
	if m.overlay != overlayConfirmUndo || !strings.Contains(m.render(), "Undo 1 step of session s?") {
		t.Fatalf("no confirmation of the 1-step plan:\n%s", m.render())
	}
	step("s", "second", 2) // another process, while the question is on screen
	run(m.handleKey(press("y")))
	for _, name := range []string{"first", "second"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Fatalf("the compensation of %s ran after the plan changed", name)
		}
	}
	screen := m.render()
	if m.overlay != overlayConfirmUndo || !strings.Contains(screen, "Undo 2 steps of session s?") || !strings.Contains(screen, "plan changed") {
		t.Fatalf("the changed plan is not shown to confirm again:\n%s", screen)
	}
	run(m.handleKey(press("y")))
	for _, name := range []string{"first", "second"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("the confirmed plan did not compensate %s: %v", name, err)
		}
	}

	if _, err := store.CreateSession(t.Context(), effectlog.NewSession{ID: "empty"}); err != nil {
		t.Fatal(err)
	}
	m.overlay = overlayNone
	run(makePlan(t.Context(), store, "empty"))
	if screen := m.render(); m.overlay != overlayConfirmUndo || strings.Contains(screen, "0 steps") || !strings.Contains(screen, "Nothing to undo: mark session empty undone?") {
		t.Fatalf("a session with nothing to undo:\n%s", screen)
	}
}

// A decision in the view is on the call it showed: with the log replaced
// under the view (another log's effect 1 at the same path), the approval
// is refused, and the other log's call stays undecided.
func TestViewDecidesOnlyTheCallItShowed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "u.db")
	irreversible := func(store effectlog.Log, tool string) {
		t.Helper()
		if _, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: tool, Tier: sm.Irreversible,
			CreateSession: true, Args: json.RawMessage(`{"what":"` + tool + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	store := logaddr.File(path, logaddr.Options{})
	irreversible(store, "harmless")
	other := logaddr.File(filepath.Join(dir, "other.db"), logaddr.Options{})
	irreversible(other, "drop_prod")
	if _, _, err := other.(effectlog.FileLog).Compact(); err != nil { // its journal folded in: one file to move
		t.Fatal(err)
	}
	other.Close()

	m := New(t.Context(), Options{Log: store, Session: "s", Actor: "tester"})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	run := func(cmd tea.Cmd) { drive(m, cmd) }
	run(loadEffects(t.Context(), store, "s", effectlog.EffectFilter{}, 0, 0))
	run(m.handleKey(press("a")))
	if !strings.Contains(m.render(), "Approve effect 1 (harmless)?") {
		t.Fatalf("no approval asked:\n%s", m.render())
	}
	store.Close()
	for _, suffix := range []string{"", "-journal"} {
		os.Remove(path + suffix)
	}
	if err := os.Rename(filepath.Join(dir, "other.db"), path); err != nil {
		t.Fatal(err)
	}
	run(m.handleKey(press("enter")))
	if !m.statusErr || !strings.Contains(m.status, "is not the call that was shown") {
		t.Fatalf("the approval went through on another call: %q", m.status)
	}
	d, err := store.GetEffect(t.Context(), 1)
	if err != nil || d.Effect.Tool != "drop_prod" || d.Effect.State != sm.Pending {
		t.Fatalf("the other log's effect 1: %+v %v", d.Effect, err)
	}
}

func TestTransitionMenuClosesWhenItsEffectMoves(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "write_file", Tier: sm.Compensable,
		CreateSession: true, Args: json.RawMessage(`{"path":"a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	m := New(t.Context(), Options{Log: store, Session: "s", Actor: "tester"})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	run := func(cmd tea.Cmd) { drive(m, cmd) }
	run(loadEffects(t.Context(), store, "s", effectlog.EffectFilter{}, 0, 0))
	run(m.handleKey(press("t")))
	if m.overlay != overlayMenu {
		t.Fatalf("no transition menu:\n%s", m.render())
	}
	// Another process starts the call while the menu is open.
	if _, err := store.Transition(t.Context(), res.Effect.ID, sm.Executing, model.Change{Actor: "agent"}); err != nil {
		t.Fatal(err)
	}
	run(loadEffects(t.Context(), store, "s", effectlog.EffectFilter{}, 0, 0))
	if m.overlay == overlayMenu {
		t.Fatalf("the menu offers what a pending effect allows to an executing one:\n%s", m.render())
	}
	if !m.statusErr || !strings.Contains(m.status, "moved from pending to executing") {
		t.Fatalf("status %q does not say the effect moved", m.status)
	}
}

// A load that failed (a server gone) says so in the status; the next load
// that works (the server back) clears it, and not a person's own message.
func TestALoadThatWorksAgainClearsItsError(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	if _, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
		CreateSession: true, Args: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	m := New(t.Context(), Options{Log: store, Session: "s", Actor: "tester"})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	m.Update(effectsMsg{err: errors.New("connection refused")})
	if !m.statusErr || !strings.Contains(m.status, "connection refused") {
		t.Fatalf("a failed load: status %q", m.status)
	}
	drive(m, loadEffects(t.Context(), store, "s", effectlog.EffectFilter{}, 0, 0))
	if m.status != "" {
		t.Fatalf("the load worked again and the status still says %q", m.status)
	}
	m.setStatus("", errors.New("effect 1 is executing"))
	drive(m, loadEffects(t.Context(), store, "s", effectlog.EffectFilter{}, 0, 0))
	if m.status != "effect 1 is executing" {
		t.Fatalf("a load cleared a person's message: %q", m.status)
	}
}
