package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// Every screen and overlay draws at every terminal size, down to one cell:
// a resized window never ends the view (a 60x8 window on a session's screen
// once did, with a slice out of range). From 40 columns on, no line is wider
// than the terminal (narrower, the renderer cuts what does not fit).
func TestViewAtEverySize(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{Now: func() time.Time { return demoEnd }})
	for i := 0; i < 3; i++ {
		if _, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: fmt.Sprintf("deploy_%d", i),
			Tier: sm.Irreversible, CreateSession: true, Args: json.RawMessage(fmt.Sprintf(`{"target":"prod-%d","why":%q}`, i, strings.Repeat("long ", 40))),
			Reason: "release", Actor: "ci"}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "write", Tier: sm.Compensable, Args: json.RawMessage(`{}`),
		Compensation: &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"true"}}, Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(t.Context(), res.Effect.ID, model.Change{Result: json.RawMessage(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	m := New(t.Context(), Options{Log: store, Actor: "tester", Now: func() time.Time { return demoEnd }})
	run := func(cmd tea.Cmd) { drive(m, cmd) }
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	run(loadSessions(t.Context(), store))
	type state struct {
		name  string
		enter func()
	}
	states := []state{
		{"sessions", func() { m.screen, m.overlay = screenSessions, overlayNone }},
		{"sessions help", func() { m.screen, m.overlay = screenSessions, overlayHelp }},
		{"session", func() {
			m.screen, m.overlay, m.session = screenSession, overlayNone, sessionView{id: "s"}
			run(loadEffects(t.Context(), store, "s", effectlog.EffectFilter{}, 0, 0))
			run(loadDetail(t.Context(), store, 1))
		}},
		{"session, detail focused", func() { m.session.focusDetail = true }},
		{"approve prompt", func() { m.session.focusDetail = false; run(m.handleKey(press("a"))) }},
		{"reject prompt", func() { m.overlay = overlayNone; run(m.handleKey(press("r"))) }},
		{"undo confirmation", func() { m.overlay = overlayNone; run(makePlan(t.Context(), store, "s")) }},
		{"filter", func() { m.overlay = overlayNone; run(m.handleKey(press("/"))) }},
	}
	for _, s := range states {
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		s.enter()
		for w := 1; w <= 130; w += 1 + w/8 {
			for h := 1; h <= 45; h += 1 + h/6 {
				m.Update(tea.WindowSizeMsg{Width: w, Height: h})
				var screen string
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("%s at %dx%d: panic: %v", s.name, w, h, r)
						}
					}()
					screen = m.render()
				}()
				for i, line := range strings.Split(screen, "\n") {
					if lw := ansi.StringWidth(line); lw > w && w >= 40 {
						t.Fatalf("%s at %dx%d: line %d is %d cells wide: %q", s.name, w, h, i, lw, line)
					}
				}
			}
		}
	}
}

// A long status message (a role's denial says what it may not do at its
// end) is wrapped onto up to three lines, and the body gives them room: the
// screen stays the window's height.
func TestStatusShowsTheWholeReason(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	m := New(t.Context(), Options{Log: store, Actor: "tester"})
	m.Update(tea.WindowSizeMsg{Width: 60, Height: 20})
	m.status, m.statusErr = "the database role ci_agent may not write a record in the name of role alice: it may not approve effect 42", true
	screen := m.render()
	if !strings.Contains(strings.ReplaceAll(screen, "\n", " "), "approve effect 42") {
		t.Fatalf("the status's end is cut:\n%s", screen)
	}
	if n := strings.Count(screen, "\n") + 1; n != 20 {
		t.Fatalf("the screen is %d lines in a window of 20:\n%s", n, screen)
	}
	m.status = strings.Repeat("word ", 200) + "END"
	screen = m.render()
	if strings.Contains(screen, "END") || !strings.Contains(screen, "…") {
		t.Fatalf("a status of 200 words is not cut at three lines:\n%s", screen)
	}
	if n := strings.Count(screen, "\n") + 1; n != 20 {
		t.Fatalf("the screen is %d lines in a window of 20:\n%s", n, screen)
	}
}

// The history in the effect's detail says the database role next to the
// --as name, as `show` does: on a shared log it is the proven identity.
func TestDetailHistoryShowsTheRole(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	if _, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "deploy", Tier: sm.Irreversible,
		CreateSession: true, Args: json.RawMessage(`{}`), Actor: "github-actions"}); err != nil {
		t.Fatal(err)
	}
	m := New(t.Context(), Options{Log: store, Session: "s", Actor: "tester"})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	for _, cmd := range []tea.Cmd{loadEffects(t.Context(), store, "s", effectlog.EffectFilter{}, 0, 0), loadDetail(t.Context(), store, 1)} {
		m.Update(cmd())
	}
	if m.session.detail == nil || len(m.session.detail.History) == 0 {
		t.Fatal("no detail loaded")
	}
	m.session.detail.History[0].Role = "ci" // as a shared log records it
	if screen := m.render(); !strings.Contains(screen, "by github-actions (role ci)") {
		t.Fatalf("the history does not say the role:\n%s", screen)
	}
}

// drive runs cmd and every command its messages ask for, to the end.
func drive(m *Model, cmd tea.Cmd) {
	for cmd != nil {
		msg := cmd()
		if msg == nil {
			return
		}
		_, cmd = m.Update(msg)
	}
}

// An action's error goes with the next key (it would seem to be about the
// effect or dialog on screen then); a failed load's stays until a load
// works.
func TestAnActionsErrorGoesWithTheNextKey(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	m := New(t.Context(), Options{Log: store, Actor: "tester"})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 20})
	m.setStatus("", errors.New("effect 5 was already approved by alice"))
	m.Update(tea.KeyPressMsg{Code: 'j', Text: "j"})
	if strings.Contains(m.render(), "already approved") {
		t.Fatalf("the error stayed after a key:\n%s", m.render())
	}
	m.loaded(errors.New("log out of reach"))
	m.Update(tea.KeyPressMsg{Code: 'j', Text: "j"})
	if !strings.Contains(m.render(), "out of reach") {
		t.Fatalf("a failed load's error went with a key:\n%s", m.render())
	}
}

// A terminal shrunk and grown again shows the whole list again, the
// selected row where it was: the rows scrolled off above while it was
// small came back only as the cursor went up to them.
func TestAGrownTerminalShowsTheRowsScrolledOff(t *testing.T) {
	store := demoStore(t)
	cases := map[string][]string{
		"":              {"ci-nightly-88", "agent-ops-3", "agent-cleanup-7", "ci-deploy-117", "▶ agent-research-42"},
		"ci-nightly-88": {"┃  12 make", "┃  13 make", "┃  14 make", "┃  15 make", "┃  16 make", "┃▶ 17 make"},
	}
	for session, rows := range cases {
		m := New(t.Context(), Options{Log: store, Session: session, Now: func() time.Time { return demoEnd }})
		if _, err := m.firstFrame(); err != nil {
			t.Fatal(err)
		}
		for range rows {
			drive(m, m.handleKey(press("down")))
		}
		for _, h := range []int{8, 24} {
			m.Update(tea.WindowSizeMsg{Width: 80, Height: h})
			m.render()
		}
		screen := m.render()
		for _, row := range rows {
			if !strings.Contains(screen, row) {
				t.Errorf("session %q: grown again, the screen lacks %q:\n%s", session, row, screen)
			}
		}
	}
}

// The effects filter finds a whole tool name (through the log's index), and
// a part of one says so rather than "no effects".
func TestEffectsFilterSaysItTakesAWholeName(t *testing.T) {
	m := New(t.Context(), Options{Log: demoStore(t), Session: "ci-nightly-88", Now: func() time.Time { return demoEnd }})
	if _, err := m.firstFrame(); err != nil {
		t.Fatal(err)
	}
	drive(m, m.applyFilter("ma"))
	if screen := m.render(); !strings.Contains(screen, `no effect matches "ma": give a whole tool name or a state`) {
		t.Fatalf("a part of a tool name:\n%s", screen)
	}
	drive(m, m.applyFilter("make"))
	if screen := m.render(); !strings.Contains(screen, "┃▶ 12 make") || strings.Contains(screen, "no effect") {
		t.Fatalf("a whole tool name:\n%s", screen)
	}
}
