package tui

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// hostile retitles the window, clears the screen, colours (CSI and C1 CSI),
// reverses what follows, deletes, returns the cursor and tabs.
const hostile = "\x1b]0;owned\x07\x1b[2J\x1b[1;31m\u009b2Jred\u202eexe.txt\x7fX\rover\tcol"

// requireTerminalSafe fails if a screen holds anything a terminal acts on
// beyond its line breaks (the test view has no colours).
func requireTerminalSafe(t *testing.T, what, screen string) {
	t.Helper()
	for i, r := range screen {
		if r != '\n' && textfmt.Unsafe(r) {
			t.Fatalf("%s holds %U at byte %d:\n%q", what, r, i, screen)
		}
	}
}

// Every field an agent or operator stored shows escaped in the view: args and
// results (raw C1 and bidi inside JSON strings), key, reasons, actors, errors,
// compensation commands, the undo plan, the undo walk and the status line.
func TestViewEscapesStoredText(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{Now: func() time.Time { return demoEnd }})
	if _, err := store.CreateSession(t.Context(), effectlog.NewSession{ID: "hostile", Meta: map[string]string{"note": hostile}, Actor: hostile}); err != nil {
		t.Fatal(err)
	}
	mk := func(tool string, tier sm.Tier, comp *model.Compensation) uint64 {
		res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "hostile", Tool: tool, Tier: tier,
			Args: json.RawMessage(`{"esc":"\u001b[2J","note":"` + "\u009b2J\u202ex" + `"}`), Key: hostile + tool,
			Reason: hostile, Actor: hostile, Compensation: comp})
		if err != nil {
			t.Fatal(err)
		}
		return res.Effect.ID
	}
	step := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	wire := mk("send_wire", sm.Irreversible, nil)
	_, err := store.Approve(t.Context(), wire, model.Change{Actor: hostile, Reason: hostile})
	step(err)
	// Its compensation fails with hostile output: the undo walk stops on it.
	note := mk("write_note", sm.Compensable, &model.Compensation{Kind: model.CompensationCommand, MaxRetries: 1,
		Argv: []string{"sh", "-c", `printf '\033]0;owned\007\033[2J\302\233\342\200\256' >&2; exit 3`, hostile}})
	_, err = store.Start(t.Context(), note, model.Change{Actor: hostile, Reason: hostile})
	step(err)
	_, err = store.Commit(t.Context(), note, model.Change{Actor: hostile, Result: json.RawMessage(`{"out":"` + "\u009b31m\u202e" + `"}`)})
	step(err)
	failed := mk("fetch", sm.Compensable, nil)
	_, err = store.Start(t.Context(), failed, model.Change{})
	step(err)
	_, err = store.Fail(t.Context(), failed, model.Change{Actor: hostile, Error: hostile})
	step(err)

	m := New(t.Context(), Options{Log: store, Session: "hostile", Actor: "tester", Now: func() time.Time { return demoEnd }})
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 60})
	run := func(cmd tea.Cmd) {
		// Runs cmd and what its messages ask for, until the undo walk is done.
		for cmd != nil {
			msg := cmd()
			if msg == nil {
				return
			}
			_, cmd = m.Update(msg)
			if _, done := msg.(undoDoneMsg); done {
				return
			}
		}
	}
	run(loadEffects(t.Context(), store, "hostile", effectlog.EffectFilter{}, 0, 0))
	for i, id := range []uint64{wire, note, failed} {
		m.session.cursor = i
		run(loadDetail(t.Context(), store, id))
		screen := m.render()
		requireTerminalSafe(t, "effect detail", screen)
		if !strings.Contains(screen, `\x1b]0;owned\x07`) {
			t.Fatalf("effect %d: the stored text is not shown escaped:\n%s", id, screen)
		}
	}
	// A decision on a decided effect: the status line quotes the decider.
	m.session.cursor = 0
	wireEffect, err := store.GetEffect(t.Context(), wire)
	step(err)
	run(decide(t.Context(), store, wireEffect.Effect, sm.Approved, "tester", ""))
	requireTerminalSafe(t, "status line", m.render())

	m.screen = screenSessions
	run(loadSessions(t.Context(), store))
	// The selected session's detail under the list: its labels.
	if !strings.Contains(m.render(), `note=\x1b]0;owned\x07`) {
		t.Fatalf("the session's meta is not shown escaped:\n%s", m.render())
	}
	requireTerminalSafe(t, "session detail", m.render())
	run(makePlan(t.Context(), store, "hostile"))
	if m.overlay != overlayConfirmUndo {
		t.Fatalf("no undo confirmation: %s", m.status)
	}
	requireTerminalSafe(t, "undo confirmation", m.render())
	run(m.handleKey(press("y")))
	if !m.undo.done {
		t.Fatal("the undo walk did not end")
	}
	requireTerminalSafe(t, "undo walk", m.render())

	// An error that quotes stored text, as the walk's stop does.
	m.Update(undoDoneMsg{err: errors.New("compensation failed: " + hostile)})
	requireTerminalSafe(t, "undo stop", m.render())

	m.overlay, m.screen = overlayNone, screenSession
	run(loadEffects(t.Context(), store, "hostile", effectlog.EffectFilter{}, 0, 0))
	m.session.cursor = 1
	run(loadDetail(t.Context(), store, note))
	if !strings.Contains(m.render(), `exit status 3: \x1b]0;owned\x07\x1b[2J\u009b\u202e`) {
		t.Fatalf("no undo error in the detail:\n%s", m.render())
	}
	requireTerminalSafe(t, "undo entry detail", m.render())

	// The decision dialog shows the effect's args; the title the log's
	// address (an environment variable may hold anything).
	m.opts.Address = hostile
	// (Every effect here is past deciding: the dialog is opened as a and r do.)
	e := m.session.selected()
	m.openPrompt("Approve effect "+itoa(e.ID)+" ("+e.Tool+")?", false, e.Args, nil)
	if !strings.Contains(m.render(), `\u009b2J\u202ex`) && !strings.Contains(m.render(), `\x9b2J`) {
		t.Fatalf("the dialog does not show the args escaped:\n%s", m.render())
	}
	requireTerminalSafe(t, "decision dialog and title", m.render())
	// A filter typed (pasted) with controls, shown in the title.
	m.overlay, m.screen, m.sessions.filter = overlayNone, screenSessions, hostile
	requireTerminalSafe(t, "sessions filter", m.render())
	run(m.handleKey(press("/")))
	requireTerminalSafe(t, "filter line", m.render())
}
