package tui

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/undolog/undolog/demo"
	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// demoEnd is the fixed "now" of the demo log the tests view.
var demoEnd = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func demoStore(t *testing.T) effectlog.FileLog {
	t.Helper()
	path := filepath.Join(t.TempDir(), "undolog.db")
	if err := demo.Write(t.Context(), path, demoEnd); err != nil {
		t.Fatal(err)
	}
	return logaddr.File(path, logaddr.Options{Now: func() time.Time { return demoEnd }})
}

func start(t *testing.T, store effectlog.Log, session string) *teatest.TestModel {
	t.Helper()
	m := New(t.Context(), Options{Log: store, Session: session, Actor: "tester", Now: func() time.Time { return demoEnd }, Location: time.UTC,
		Refresh: 100 * time.Millisecond})
	return startModel(t, m, store)
}

// startModel runs m, the view over store, until the test ends.
func startModel(t *testing.T, m *Model, store effectlog.Log) *teatest.TestModel {
	t.Helper()
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(80, 24))
	// The view stops, and lets the log go, before the test's directory goes:
	// a read it started late would make the journal again beside a log
	// being removed.
	t.Cleanup(func() {
		tm.Quit()
		tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
		store.Close()
	})
	return tm
}

// waitFor waits until the screen shows every one of texts.
func waitFor(t *testing.T, tm *teatest.TestModel, texts ...string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		for _, s := range texts {
			if !bytes.Contains(b, []byte(s)) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(5*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
}

// press is the key s, or the characters of s typed at once.
func press(s string) tea.KeyPressMsg {
	switch s {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "ctrl+u":
		return tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl}
	}
	r := []rune(s)
	return tea.KeyPressMsg{Code: r[0], Text: s}
}

// finalView quits and returns the last frame the model renders.
func finalView(t *testing.T, tm *teatest.TestModel) []byte {
	t.Helper()
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	return []byte(tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model).render())
}

func TestGoldenSessions(t *testing.T) {
	tm := start(t, demoStore(t), "")
	waitFor(t, tm, "agent-research-42", "ci-nightly-88")
	golden.RequireEqual(t, finalView(t, tm))
}

func TestGoldenSession(t *testing.T) {
	tm := start(t, demoStore(t), "agent-research-42")
	waitFor(t, tm, "send_email")
	tm.Send(press("jjj"))
	waitFor(t, tm, "expires in")
	golden.RequireEqual(t, finalView(t, tm))
}

func TestGoldenHelp(t *testing.T) {
	tm := start(t, demoStore(t), "")
	waitFor(t, tm, "agent-research-42")
	tm.Send(press("?"))
	waitFor(t, tm, "Columns")
	golden.RequireEqual(t, finalView(t, tm))
}

func TestGoldenTransitionMenu(t *testing.T) {
	tm := start(t, demoStore(t), "agent-research-42")
	waitFor(t, tm, "send_email")
	tm.Send(press("jjj"))
	waitFor(t, tm, "expires in")
	tm.Send(press("t"))
	waitFor(t, tm, "Move effect 4")
	golden.RequireEqual(t, finalView(t, tm))
}

func TestGoldenUndoConfirmation(t *testing.T) {
	tm := start(t, demoStore(t), "")
	waitFor(t, tm, "ci-nightly-88")
	tm.Send(press("jjjj")) // agent-research-42
	tm.Send(press("u"))
	waitFor(t, tm, "(y/n)")
	golden.RequireEqual(t, finalView(t, tm))
}

// ci-deploy-117 resumes at an entry that failed for good: the view does not
// start a walk that would stop there, and says what to do.
func TestUndoOfABlockedPlanSaysResolveFirst(t *testing.T) {
	tm := start(t, demoStore(t), "")
	waitFor(t, tm, "ci-nightly-88")
	tm.Send(press("jjj"))
	tm.Send(press("u"))
	waitFor(t, tm, "failed before: fix it, then press R on it")
	tm.Quit()
}

// The transition menu offers exactly the next states the log accepts: the
// spec's table for the effect's tier and state, less what the session's state
// refuses. Each state of the table is tried on a copy of the log.
func TestTransitionMenuListsExactlyTheValidStates(t *testing.T) {
	build := func() effectlog.FileLog {
		store := demoStore(t)
		mk := func(session string, tier sm.Tier, args string, steps ...sm.State) {
			res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: session, Tool: "t", Tier: tier, Args: json.RawMessage(args), CreateSession: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, to := range steps {
				if _, err := store.Transition(t.Context(), res.Effect.ID, to, model.Change{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		mk("menu", sm.Compensable, `1`)
		mk("menu", sm.Compensable, `2`, sm.Executing)
		mk("menu", sm.Compensable, `3`, sm.Executing, sm.Compensating)
		mk("menu", sm.Irreversible, `4`, sm.Approved)
		mk("menu", sm.Irreversible, `5`, sm.Approved, sm.Executing)
		// A failed session: its pending effects can neither start nor be decided.
		mk("failed", sm.Compensable, `6`)
		mk("failed", sm.Irreversible, `7`)
		mk("failed", sm.Compensable, `8`, sm.Executing, sm.Committed)
		if _, err := store.SetSessionState(t.Context(), "failed", sm.SessionFailed, model.Change{}); err != nil {
			t.Fatal(err)
		}
		// A request nobody answered in time: pending, and nobody decides it now.
		if _, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "late", Tool: "t", Tier: sm.Irreversible,
			Args: json.RawMessage(`9`), CreateSession: true, ApprovalTimeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
		later := logaddr.File(store.Path(), logaddr.Options{Now: func() time.Time { return demoEnd.Add(time.Hour) }})
		if n, err := later.ExpireApprovals(t.Context(), "late"); err != nil || n != 1 {
			t.Fatal(n, err)
		}
		later.Close()
		return store
	}
	store := build()
	defer store.Close()
	// Each transition of the table is tried on a log of its own.
	accepted := func(id uint64, to sm.State) bool {
		other := build()
		defer other.Close()
		_, err := other.Transition(t.Context(), id, to, model.Change{})
		return err == nil
	}
	effects, _, err := store.ListEffects(t.Context(), effectlog.EffectFilter{})
	if err != nil {
		t.Fatal(err)
	}
	checked, refused := 0, 0
	for _, e := range effects {
		var want []sm.State
		for _, to := range sm.Next(e.Tier, e.State) {
			if accepted(e.ID, to) {
				want = append(want, to)
			} else {
				refused++
			}
		}
		m := New(t.Context(), Options{Log: store, Session: e.Session, Actor: "tester", Now: func() time.Time { return demoEnd }})
		m.Update(loadEffects(t.Context(), store, e.Session, effectlog.EffectFilter{}, 0, 0)())
		for m.session.selected() != nil && m.session.selected().ID != e.ID {
			m.session.cursor++
		}
		m.Update(loadDetail(t.Context(), store, e.ID)())
		m.Update(press("t"))
		if len(want) == 0 {
			if m.overlay == overlayMenu || !m.statusErr {
				t.Errorf("effect %d (%s %s): menu opened with no state the log accepts", e.ID, e.Tier, e.State)
			}
			continue
		}
		if m.overlay != overlayMenu || !reflect.DeepEqual(m.menu.options, want) {
			t.Errorf("effect %d (%s %s): menu %v, want %v", e.ID, e.Tier, e.State, m.menu.options, want)
		}
		var shown []sm.State
		for _, line := range inDialog(strings.Split(m.render(), "\n")) {
			item := strings.TrimSpace(line)
			item = strings.TrimPrefix(item, "> ")
			if st, err := sm.ParseState(item); err == nil {
				shown = append(shown, st)
			}
		}
		if !reflect.DeepEqual(shown, want) {
			t.Errorf("effect %d (%s %s): menu shows %v, want %v", e.ID, e.Tier, e.State, shown, want)
		}
		checked++
	}
	if checked < 6 || refused == 0 {
		t.Fatalf("%d effects had a menu, %d transitions of the table were refused: the test proves little", checked, refused)
	}
}

// decideInView opens the dialog of key (a or r) on the demo's waiting effect 4,
// types reason with keys (the typing of each tea.KeyPressMsg is sent too),
// confirms it and returns the effect as the log then has it, and its last
// history record.
func decideInView(t *testing.T, key string, reason ...any) (model.EffectDetail, model.HistoryRecord) {
	t.Helper()
	store := demoStore(t)
	tm := start(t, store, "agent-research-42")
	waitFor(t, tm, "send_email")
	tm.Send(press("jjj"))
	waitFor(t, tm, "expires in")
	tm.Send(press(key))
	waitFor(t, tm, "effect 4 (send_email)?", "cfo@example.com")
	for _, r := range reason {
		switch r := r.(type) {
		case string:
			tm.Type(r)
		case tea.KeyPressMsg:
			tm.Send(r)
		}
	}
	tm.Send(press("enter"))
	waitFor(t, tm, "effect 4 "+map[string]string{"a": "approved", "r": "rejected"}[key]+" by tester")
	d, err := store.GetEffect(t.Context(), 4)
	if err != nil {
		t.Fatal(err)
	}
	return d, d.History[len(d.History)-1]
}

func TestApproveWritesHistoryWithActor(t *testing.T) {
	d, last := decideInView(t, "a", "right after review")
	if d.Effect.State != sm.Approved || last.Actor != "tester" || last.Reason != "right after review" || d.Approval.DecidedBy != "tester" {
		t.Fatalf("%+v %+v", d.Effect, last)
	}
}

// The reason's input moves its cursor: a letter left out is typed in where
// it belongs, not at the end.
func TestReasonIsEditedMidText(t *testing.T) {
	left := tea.KeyPressMsg{Code: tea.KeyLeft}
	if _, last := decideInView(t, "r", "not to the cfo", left, left, left, "CEO but "); last.Reason != "not to the CEO but cfo" {
		t.Fatalf("reason %q", last.Reason)
	}
}

func TestUndoRunsCompensationsLIFO(t *testing.T) {
	dir := t.TempDir()
	store := logaddr.File(filepath.Join(dir, "u.db"), logaddr.Options{})
	order := filepath.Join(dir, "order")
	for i := 1; i <= 3; i++ {
		res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "lifo", Tool: "step", Tier: sm.Compensable, CreateSession: true,
			Args:         json.RawMessage(`{"n":` + string(rune('0'+i)) + `}`),
			Compensation: &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"sh", "-c", "echo " + string(rune('0'+i)) + " >> " + order}}})
		if err != nil {
			t.Fatal(err)
		}
		store.Start(t.Context(), res.Effect.ID, model.Change{})
		store.Commit(t.Context(), res.Effect.ID, model.Change{})
	}
	tm := start(t, store, "")
	waitFor(t, tm, "lifo")
	tm.Send(press("u"))
	waitFor(t, tm, "Undo 3 steps of session lifo? (y/n)")
	tm.Send(press("y"))
	waitFor(t, tm, "3 undone")
	if v := finalView(t, tm); !bytes.Contains(v, []byte("Undo of session lifo finished")) {
		t.Fatalf("a finished undo is not titled so:\n%s", v)
	}
	data, _ := os.ReadFile(order)
	if got := strings.Fields(string(data)); !reflect.DeepEqual(got, []string{"3", "2", "1"}) {
		t.Fatalf("compensations ran in order %v", got)
	}
	tm.Quit()
}

// What another process does shows without a key press, and the view does not
// hold the log: the other writer gets through at once.
func TestLiveRefreshAndNoLockHeld(t *testing.T) {
	store := demoStore(t)
	tm := start(t, store, "agent-research-42")
	waitFor(t, tm, "send_email")
	// The other process shares the demo's clock: on the real one, the demo's
	// approvals have expired on any day after the demo's.
	other := logaddr.File(store.Path(), logaddr.Options{LockTimeout: 300 * time.Millisecond, Now: func() time.Time { return demoEnd }})
	began := time.Now()
	if _, err := other.Approve(t.Context(), 4, model.Change{Actor: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tm, "approved")
	if d := time.Since(began); d > time.Second {
		t.Fatalf("the change showed after %v", d)
	}
	tm.Quit()
}

// The log replaced under a running view (here by garbage) shows as an error in
// the status line; the view keeps running and recovers when the log is back.
func TestLogReplacedWhileRunning(t *testing.T) {
	store := demoStore(t)
	good, err := os.ReadFile(store.Path())
	if err != nil {
		t.Fatal(err)
	}
	tm := start(t, store, "")
	waitFor(t, tm, "agent-research-42")
	if err := os.WriteFile(store.Path()+".tmp", []byte("garbage, not a log"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Rename(store.Path()+".tmp", store.Path())
	waitFor(t, tm, "error: not a valid undolog log")
	os.WriteFile(store.Path()+".tmp", good, 0o600)
	os.Rename(store.Path()+".tmp", store.Path())
	tm.Send(press("?"))
	waitFor(t, tm, "Columns")
	tm.Quit()
}

// The view has no operator to confirm a manual compensation and no way to
// resolve a blocked step: such a plan is not started there (it would fail
// the step for good and halt the session); the status names the command
// that can.
func TestUndoThatNeedsAShellIsNotStartedHere(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	defer store.Close()
	res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "hand", Tool: "paper", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true, Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(t.Context(), res.Effect.ID, model.Change{}); err != nil {
		t.Fatal(err)
	}
	m := New(t.Context(), Options{Log: store, Session: "hand", Actor: "tester", CLI: "undolog --log /x.db"})
	m.Update(makePlan(t.Context(), store, "hand")())
	if m.overlay == overlayConfirmUndo || !m.statusErr || !strings.Contains(m.status, "run undolog --log /x.db undo hand in a shell") {
		t.Fatalf("overlay %v, status %q", m.overlay, m.status)
	}
	if s, _ := store.GetSession(t.Context(), "hand"); s.State != sm.SessionActive {
		t.Fatalf("session %s", s.State)
	}
}

// Ctrl-Z suspends the view: the terminal is raw, so it is a key, not a
// signal, and the program must stop itself.
func TestCtrlZSuspends(t *testing.T) {
	m := New(t.Context(), Options{Log: demoStore(t)})
	_, cmd := m.Update(tea.KeyPressMsg{Code: 'z', Mod: tea.ModCtrl})
	if cmd == nil {
		t.Fatal("ctrl+z: no command")
	}
	if got := cmd(); got != (tea.SuspendMsg{}) {
		t.Fatalf("ctrl+z: %#v, want tea.SuspendMsg", got)
	}
}

// Back from a session's screen, the keys act on the session just seen, also
// when the view opened on it (its list not yet read): u then plans that
// session's undo, not the one the cursor was on.
func TestBackFromASessionSelectsIt(t *testing.T) {
	tm := start(t, demoStore(t), "ci-deploy-117")
	waitFor(t, tm, "ci-deploy-117  halted")
	tm.Send(press("esc"))
	waitFor(t, tm, "ci-nightly-88", "agent-research-42")
	tm.Send(press("u"))
	waitFor(t, tm, "failed before: fix it, then press R on it")
	tm.Quit()
}
