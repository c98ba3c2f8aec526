package tui

import (
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/saga"
	sm "github.com/undolog/undolog/statemachine"
)

// apply hands msg to m and then what its commands answer, as the program
// would: the view as it stands once its reads are done (it does not watch).
func apply(m *Model, msg tea.Msg) { settle(m, []tea.Msg{msg}, 8) }

// opened is the view on session, its first screen loaded.
func opened(t *testing.T, store effectlog.Log, session string) *Model {
	t.Helper()
	m := New(t.Context(), Options{Log: store, Session: session, Actor: "tester", Now: func() time.Time { return demoEnd },
		Location: time.UTC, Width: 100, Height: 30})
	if _, err := m.firstFrame(); err != nil {
		t.Fatal(err)
	}
	return m
}

// selectEffect moves the selection to effect id.
func selectEffect(t *testing.T, m *Model, id uint64) {
	t.Helper()
	for range len(m.session.effects) {
		apply(m, press("k"))
	}
	for range len(m.session.effects) {
		if e := m.session.selected(); e != nil && e.ID == id {
			return
		}
		apply(m, press("j"))
	}
	t.Fatalf("effect %d is not listed", id)
}

// The footer offers only what the log accepts for the selected effect: no
// approve, reject or transition on a committed one of a halted session, a
// and r on a call that awaits approval, R on a failed compensation.
func TestFooterOffersOnlyWhatTheRowAllows(t *testing.T) {
	store := demoStore(t)
	m := opened(t, store, "agent-research-42")
	selectEffect(t, m, 1) // write_file, committed
	if f := m.footer(); strings.Contains(f, "approve") || strings.Contains(f, "reject") || strings.Contains(f, "resolve") {
		t.Fatalf("committed effect: footer %q", f)
	}
	selectEffect(t, m, 4) // send_email, awaiting approval
	if f := m.footer(); !strings.Contains(f, "a approve") || !strings.Contains(f, "r reject") || strings.Contains(f, "resolve") || strings.Contains(f, "transition") {
		t.Fatalf("pending irreversible effect: footer %q", f)
	}

	m = opened(t, store, "ci-deploy-117") // halted
	for _, e := range m.session.effects {
		selectEffect(t, m, e.ID)
		f := m.footer()
		failed := m.session.entries[e.ID].State == sm.EntryCompensationFailed
		if strings.Contains(f, "approve") || strings.Contains(f, "transition") && len(allowedNext(e, m.session.sess.State, true)) == 0 {
			t.Errorf("effect %d %s: footer %q", e.ID, e.State, f)
		}
		if strings.Contains(f, "R resolve") != failed {
			t.Errorf("effect %d (undo entry %s): footer %q", e.ID, m.session.entries[e.ID].State, f)
		}
	}
}

// R on a failed compensation asks what was done by hand (required, as
// `undolog resolve --reason` is) and records it: the next undo walks on.
func TestResolveAFailedCompensation(t *testing.T) {
	store := demoStore(t)
	m := opened(t, store, "ci-deploy-117")
	var failed uint64
	for id, u := range m.session.entries {
		if u.State == sm.EntryCompensationFailed {
			failed = id
		}
	}
	if failed == 0 {
		t.Fatal("the demo has no failed compensation")
	}
	selectEffect(t, m, failed)
	apply(m, press("R"))
	if m.overlay != overlayPrompt || !strings.Contains(m.render(), "What was done by hand:") {
		t.Fatalf("R: no dialog:\n%s", m.render())
	}
	apply(m, press("enter"))
	if m.overlay != overlayPrompt || !strings.Contains(m.status, "a reason is required") {
		t.Fatalf("empty reason: overlay %v, status %q", m.overlay, m.status)
	}
	apply(m, tea.PasteMsg{Content: "rolled back by hand"})
	apply(m, press("enter"))
	d, err := store.GetEffect(t.Context(), failed)
	if err != nil {
		t.Fatal(err)
	}
	if d.Undo == nil || d.Undo.State != sm.EntryResolved {
		t.Fatalf("undo entry %+v, status %q", d.Undo, m.status)
	}
	last := d.History[len(d.History)-1]
	if last.Actor != "tester" || last.Reason != "rolled back by hand" {
		t.Fatalf("history %+v", last)
	}
	if f := m.footer(); strings.Contains(f, "resolve") {
		t.Fatalf("resolved: footer still offers it: %q", f)
	}
	// On any other effect R refuses, and changes nothing.
	selectEffect(t, m, m.session.effects[0].ID)
	apply(m, press("R"))
	if m.overlay != overlayNone || !m.statusErr {
		t.Fatalf("R on effect %d: overlay %v, status %q", m.session.effects[0].ID, m.overlay, m.status)
	}
}

// History dates its rows, in the view's zone, named.
func TestHistoryShowsDateAndZone(t *testing.T) {
	m := New(t.Context(), Options{Log: demoStore(t), Session: "agent-research-42", Now: func() time.Time { return demoEnd },
		Location: time.FixedZone("CET", 3600), Width: 100, Height: 40})
	if _, err := m.firstFrame(); err != nil {
		t.Fatal(err)
	}
	if s := m.render(); !strings.Contains(s, "2026-11-30 10:05:00 CET") {
		t.Fatalf("no dated history row:\n%s", s)
	}
}

// On a session's screen the filter applies as it is typed; esc clears it,
// and only then goes back.
func TestEffectsFilterIsLiveAndEscClearsIt(t *testing.T) {
	m := opened(t, demoStore(t), "agent-research-42")
	tools := func() []string {
		var out []string
		for _, e := range m.session.effects {
			out = append(out, e.Tool)
		}
		return out
	}
	apply(m, press("/"))
	for _, r := range "create_ticket" {
		apply(m, press(string(r)))
	}
	if got := tools(); m.overlay != overlayFilter || len(got) != 1 || got[0] != "create_ticket" {
		t.Fatalf("typed, not entered: overlay %v, effects %v", m.overlay, got)
	}
	apply(m, press("enter"))
	if got := tools(); m.overlay != overlayNone || len(got) != 1 || !strings.Contains(m.render(), "filter: create_ticket") {
		t.Fatalf("entered: overlay %v, effects %v\n%s", m.overlay, got, m.render())
	}
	apply(m, press("esc"))
	if got := tools(); m.screen != screenSession || len(got) != 4 || m.session.filter != "" {
		t.Fatalf("esc: screen %v, filter %q, effects %v", m.screen, m.session.filter, got)
	}
	apply(m, press("esc"))
	if m.screen != screenSessions {
		t.Fatalf("esc again: screen %v", m.screen)
	}
}

// Dialogs and help stand centred over the screen, which stays in sight,
// dimmed where there is colour.
func TestDialogsAreCentredOverTheDimmedView(t *testing.T) {
	for _, color := range []bool{false, true} {
		m := New(t.Context(), Options{Log: demoStore(t), Session: "agent-research-42", Now: func() time.Time { return demoEnd },
			Location: time.UTC, Width: 100, Height: 30, Color: color})
		if _, err := m.firstFrame(); err != nil {
			t.Fatal(err)
		}
		for _, open := range []string{"?", "t"} {
			selectEffect(t, m, 4)
			apply(m, press(open))
			screen := m.render()
			lines := strings.Split(ansi.Strip(screen), "\n")
			top, left := -1, -1
			for i, l := range lines {
				if j := strings.Index(l, "┌"); j >= 0 {
					top, left = i, ansi.StringWidth(l[:j])
					break
				}
			}
			bottom := top + len(inDialog(lines)) + 1
			width := ansi.StringWidth(lines[top][:strings.Index(lines[top], "┐")]) + 1 - left
			if top < 1 || abs(left-(m.width-width)/2) > 1 || abs(top-(len(lines)-(bottom-top+2))/2) > 1 {
				t.Fatalf("colour %v, %q: box at line %d column %d, %d wide, %d high, not centred:\n%s", color, open, top, left, width, bottom-top+2, ansi.Strip(screen))
			}
			if !strings.HasPrefix(strings.TrimSpace(lines[0]), "undolog") || !strings.Contains(ansi.Strip(screen), "agent-research-42") {
				t.Fatalf("colour %v, %q: the screen under the dialog is gone:\n%s", color, open, ansi.Strip(screen))
			}
			if first := strings.SplitN(screen, "\n", 2)[0]; color != strings.HasPrefix(first, "\x1b[2m") {
				t.Fatalf("colour %v, %q: title line %q", color, open, first)
			}
			apply(m, press("esc"))
		}
	}
}

func abs(n int) int { return max(n, -n) }

// A tall sessions screen shows the selected session's detail under its list,
// spelled out; on a wide one the waiting badge stays beside its row's counts.
func TestSessionsScreenUsesItsHeight(t *testing.T) {
	m := New(t.Context(), Options{Log: demoStore(t), Now: func() time.Time { return demoEnd }, Location: time.UTC, Width: 160, Height: 40})
	if _, err := m.firstFrame(); err != nil {
		t.Fatal(err)
	}
	for m.sessions.selected().ID != "agent-research-42" {
		apply(m, press("j"))
	}
	lines := strings.Split(m.render(), "\n")
	screen := strings.Join(lines, "\n")
	for _, want := range []string{"─ session agent-research-42 ─", "state: awaiting_approval", "1 pending, 2 committed, 1 replayed", "● 1 awaiting approval"} {
		if !strings.Contains(screen, want) {
			t.Errorf("no %q under the list:\n%s", want, screen)
		}
	}
	for _, l := range lines {
		if i := strings.Index(l, "●1"); i >= 0 && ansi.StringWidth(l[:i]) > 100 {
			t.Errorf("the waiting badge stands at column %d of %q", ansi.StringWidth(l[:i]), l)
		}
	}
	// On a short screen the list keeps the rows.
	apply(m, tea.WindowSizeMsg{Width: 80, Height: 10})
	if s := m.render(); strings.Contains(s, "─ session ") || !strings.Contains(s, "▶ agent-research-42") {
		t.Errorf("80x10:\n%s", s)
	}
}

// A session's screen frames the table and the detail; the pane the keys
// move has the thick border (it shows without colour), and ↑/↓ scroll the
// detail's viewport once tab gives it the focus.
func TestPanesShowTheFocus(t *testing.T) {
	store, _ := longArgsStore(t, "mail", "send_email")
	m := New(t.Context(), Options{Log: store, Session: "mail", Now: func() time.Time { return demoEnd }, Location: time.UTC, Width: 80, Height: 24})
	if _, err := m.firstFrame(); err != nil {
		t.Fatal(err)
	}
	tops := func() (table, detail string) {
		for _, l := range strings.Split(m.render(), "\n") {
			switch {
			case strings.Contains(l, " effects "):
				table = l
			case strings.Contains(l, " effect 18 "):
				detail = l
			}
		}
		return table, detail
	}
	table, detail := tops()
	if !strings.HasPrefix(table, "┏") || !strings.HasPrefix(detail, "╭") || !strings.Contains(detail, "lines 1-") {
		t.Fatalf("the table has the focus:\n%s", m.render())
	}
	apply(m, press("tab"))
	apply(m, press("j"))
	apply(m, press("j"))
	table, detail = tops()
	if !strings.HasPrefix(table, "╭") || !strings.HasPrefix(detail, "┏") || !strings.Contains(detail, "lines 3-") {
		t.Fatalf("the detail has the focus, scrolled by 2:\n%s", m.render())
	}
}

// A session undone already is offered no undo, on the sessions screen (its
// footer once offered u on every row) and on its own; u on it says so, as
// `undolog undo` does, and opens no plan.
func TestAnUndoneSessionIsOfferedNoUndo(t *testing.T) {
	store := demoStore(t)
	if _, err := (&saga.Runner{Log: store, Actor: "bob", Progress: io.Discard}).Run(t.Context(), "ci-nightly-88"); err != nil {
		t.Fatal(err)
	}
	m := opened(t, store, "")
	for m.sessions.selected().ID != "agent-ops-3" {
		apply(m, press("j"))
	}
	if f := m.footer(); !strings.Contains(f, "u undo session") {
		t.Fatalf("halted session: footer %q", f)
	}
	for m.sessions.selected().ID != "ci-nightly-88" {
		apply(m, press("k"))
	}
	if f := m.footer(); strings.Contains(f, "undo") {
		t.Fatalf("compensated session: footer %q", f)
	}
	apply(m, press("u"))
	if m.overlay != overlayNone || m.status != "session ci-nightly-88 is compensated already: nothing to undo" {
		t.Fatalf("u on a compensated session: overlay %v, status %q", m.overlay, m.status)
	}
	apply(m, press("enter"))
	if f := m.footer(); m.screen != screenSession || strings.Contains(f, "undo") {
		t.Fatalf("its own screen: footer %q", f)
	}
	apply(m, press("u"))
	if m.overlay != overlayNone || !strings.Contains(m.status, "nothing to undo") {
		t.Fatalf("u on its screen: overlay %v, status %q", m.overlay, m.status)
	}
}

// An undo the view ran that stops at a failed compensation says the way
// on in the view's keys (R on the effect), not only in the command line's.
func TestAStoppedUndoPointsToR(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "write", Tier: sm.Compensable, CreateSession: true,
		Args: json.RawMessage(`{}`), Compensation: &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"false"}}, Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(t.Context(), res.Effect.ID, model.Change{}); err != nil {
		t.Fatal(err)
	}
	m := opened(t, store, "s")
	apply(m, press("u"))
	apply(m, press("y"))
	want := "effect 1's undo failed: fix it by hand, then press R on it in session s and undo again"
	if screen := m.render(); !m.undo.failed || !strings.Contains(screen, want) || !strings.Contains(m.status, want) {
		t.Fatalf("undo stopped: status %q\n%s", m.status, screen)
	}
	apply(m, press("q")) // closes the box
	apply(m, press("R"))
	if m.overlay != overlayPrompt || !strings.Contains(m.render(), "What was done by hand:") {
		t.Fatalf("R after the stop: no dialog:\n%s", m.render())
	}
}
