package tui

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os/exec"
	"path/filepath"
	"slices"
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

// The sessions list at 80x24, with and without colour, shows on each
// session's row its name, its state, its counts in words whole and its
// waiting badge (issue 33: BY STATE was cut at 80 columns); EFFECTS and AGE
// give way first.
func TestSessionsRowsShowWhatAPersonNeedsAt80x24(t *testing.T) {
	rows := map[string][]string{
		"ci-nightly-88":     {"completed", "3 committed, 3 replayed"},
		"agent-ops-3":       {"halted", "1 committed, 1 rejected"},
		"agent-cleanup-7":   {"halted", "1 undo failed"},
		"ci-deploy-117":     {"halted", "3 committed (1 undo failed), 1 undone"},
		"agent-research-42": {"awaiting_approval", "1 pending, 2 committed, 1 replayed", "●1"},
	}
	eachLayout(t, func(t *testing.T, l layout) {
		tm := startAt(t, demoStore(t), "", l)
		waitFor(t, tm, "agent-research-42")
		lines := frame(t, tm, l)
		for name, cells := range rows {
			var row string
			for _, line := range lines {
				if strings.Contains(line, " "+name+" ") && !strings.Contains(line, "session "+name) {
					row = line
					break
				}
			}
			at := 0
			for _, cell := range append([]string{name}, cells...) {
				i := strings.Index(row[at:], " "+cell)
				if i < 0 {
					t.Fatalf("%s's row lacks %q (in its order):\n%s", name, cell, strings.Join(lines, "\n"))
				}
				at += i + len(cell) + 1
			}
		}
	})
}

// hostileName is as long a session name as the log takes.
var hostileName = "agent-" + strings.Repeat("very-long-name-", 8) + strings.Repeat("x", 128-6-15*8)

// hostileLog is the demo log and a session a person cannot read at a
// glance: the longest name, labels of control bytes and wide characters, a
// tool named in wide characters and an emoji, a compensation that fails
// and a call awaiting approval.
func hostileLog(t *testing.T) effectlog.Log {
	t.Helper()
	store := demoStore(t)
	ctx := t.Context()
	wide := "日本語のメモ🙂 " + hostile
	if _, err := store.CreateSession(ctx, effectlog.NewSession{ID: hostileName, Meta: map[string]string{"note": wide, "wide": strings.Repeat("全角", 30)}, Actor: hostile}); err != nil {
		t.Fatal(err)
	}
	call := func(tool string, tier sm.Tier, comp *model.Compensation) uint64 {
		res, err := store.Intercept(ctx, effectlog.InterceptRequest{Session: hostileName, Tool: tool, Tier: tier,
			Args: json.RawMessage(`{"note":"全角テキスト\u009b2J","esc":"\u001b[2J"}`), Reason: wide, Actor: hostile,
			Compensation: comp, Start: tier != sm.Irreversible})
		if err != nil {
			t.Fatal(err)
		}
		return res.Effect.ID
	}
	id := call("書き込み_ファイル_とても長いツール名前", sm.Compensable, &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"false"}})
	if _, err := store.Commit(ctx, id, model.Change{Result: json.RawMessage(`{"ok":"はい"}`)}); err != nil {
		t.Fatal(err)
	}
	call("送信🙂"+strings.Repeat("w", 40), sm.Irreversible, nil)
	return store
}

// Every screen, at 80x24, 120x40 and 200x60, without colour and with it
// on a dark and a light background, with a hostile session among the
// demo's: no line is wider than the terminal, nothing reaches it but text,
// the other sessions keep their counts whole beside the long name (which
// gives way), the session's whole name shows in its detail and a cut title
// says it is cut, and every dialog stands whole on the screen (the
// transition menu once ran off its right edge at 80 columns).
func TestEveryScreenReadableWithAHostileSession(t *testing.T) {
	store := hostileLog(t)
	counts := []string{"3 committed, 3 replayed", "1 committed, 1 rejected", "1 undo failed", "3 committed (1 undo failed),", "1 pending, 1 committed"}
	for _, size := range [][2]int{{80, 24}, {120, 40}, {200, 60}} {
		for _, look := range []string{"NO_COLOR", "dark", "light"} {
			w, h := size[0], size[1]
			t.Run(fmt.Sprintf("%dx%d-%s", w, h, look), func(t *testing.T) {
				m := New(t.Context(), Options{Log: store, Actor: "tester", Now: func() time.Time { return demoEnd }, Location: time.UTC,
					Width: w, Height: h, Color: look != "NO_COLOR", Address: testAddress})
				if _, err := m.firstFrame(); err != nil {
					t.Fatal(err)
				}
				if look == "light" {
					apply(m, tea.BackgroundColorMsg{Color: color.White})
				}
				screen := func(what string) []string {
					t.Helper()
					raw := m.render()
					plain := ansi.Strip(raw)
					requireTerminalSafe(t, what, plain)
					lines := strings.Split(plain, "\n")
					if len(lines) != h {
						t.Errorf("%s: %d lines, want %d", what, len(lines), h)
					}
					for i, l := range lines {
						if lw := ansi.StringWidth(l); lw > w {
							t.Errorf("%s: line %d is %d cells wide: %q", what, i, lw, l)
						}
					}
					return lines
				}
				dialog := func(what string) {
					t.Helper()
					lines := screen(what)
					top, bottom := -1, -1
					for i, l := range lines {
						if strings.Contains(l, "┌") && top < 0 {
							top = i
							if !strings.Contains(l, "┐") {
								t.Errorf("%s: the dialog's top right corner is off the screen:\n%s", what, strings.Join(lines, "\n"))
							}
						}
						if strings.Contains(l, "└") {
							bottom = i
							if !strings.Contains(l, "┘") {
								t.Errorf("%s: the dialog's bottom right corner is off the screen:\n%s", what, strings.Join(lines, "\n"))
							}
						}
					}
					if top < 0 || bottom <= top {
						t.Errorf("%s: no whole dialog on the screen:\n%s", what, strings.Join(lines, "\n"))
					}
					apply(m, press("esc"))
				}

				lines := screen("sessions")
				for _, c := range counts {
					if !has(lines, " "+c+" ") {
						t.Errorf("sessions: %q is not whole:\n%s", c, strings.Join(lines, "\n"))
					}
				}
				apply(m, press("?"))
				dialog("help over the sessions")
				apply(m, press("/"))
				apply(m, press("very-long"))
				apply(m, press("enter"))
				if lines := screen("sessions of the long name"); !strings.Contains(strings.Join(lines, ""), hostileName) &&
					!strings.Contains(joinedPane(lines, "session:"), hostileName) {
					t.Errorf("the session's whole name shows nowhere:\n%s", strings.Join(lines, "\n"))
				}
				apply(m, press("u"))
				dialog("undo plan")
				apply(m, press("enter"))
				lines = screen("session")
				if title := strings.TrimRight(lines[0], " "); !strings.Contains(title, hostileName) && !strings.HasSuffix(title, "…") {
					t.Errorf("the title cuts the name and does not say so: %q", title)
				}
				apply(m, press("j")) // the call awaiting approval
				for _, key := range []string{"a", "r", "t", "?"} {
					apply(m, press(key))
					dialog("key " + key)
				}
			})
		}
	}
}

// joinedPane is the text from the line that holds label to the bottom of
// its pane, its lines joined without their borders and indent.
func joinedPane(lines []string, label string) string {
	var parts []string
	for _, l := range lines {
		if len(parts) == 0 && !strings.Contains(l, label) {
			continue
		}
		if strings.Contains(l, "╰") {
			break
		}
		parts = append(parts, strings.TrimSpace(strings.Trim(strings.TrimSpace(l), "│")))
	}
	return strings.ReplaceAll(strings.Join(parts, ""), label+" ", "")
}

// The header bar: with colour the view's name stands on the accent colour
// (a background), on a dark and a light terminal; without, it is the word.
func TestTheHeaderBarNamesTheView(t *testing.T) {
	for _, look := range []string{"dark", "light", "NO_COLOR"} {
		m := New(t.Context(), Options{Log: demoStore(t), Now: func() time.Time { return demoEnd }, Location: time.UTC,
			Width: 100, Height: 30, Color: look != "NO_COLOR", Address: testAddress})
		if _, err := m.firstFrame(); err != nil {
			t.Fatal(err)
		}
		if look == "light" {
			apply(m, tea.BackgroundColorMsg{Color: color.White})
		}
		title := strings.SplitN(m.render(), "\n", 2)[0]
		bar, _, _ := strings.Cut(title, "sessions")
		if look == "NO_COLOR" {
			if !strings.HasPrefix(title, "undolog  sessions") {
				t.Errorf("%s: title %q", look, title)
			}
			continue
		}
		if !strings.Contains(bar, " undolog ") || !strings.Contains(bar, "\x1b[") || !strings.Contains(bar, ";48;") && !strings.Contains(bar, "[48;") {
			t.Errorf("%s: the view's name is no bar on the accent colour: %q", look, title)
		}
	}
}

// A long list of sessions keeps the selected one's detail in sight under
// it, at 80x24 too: the list scrolls in what the detail leaves.
func TestALongListKeepsTheDetailInSight(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{Now: func() time.Time { return demoEnd }})
	for i := range 40 {
		if _, err := store.CreateSession(t.Context(), effectlog.NewSession{ID: fmt.Sprintf("run-%02d", i), Actor: "ci"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		m := New(t.Context(), Options{Log: store, Now: func() time.Time { return demoEnd }, Location: time.UTC, Width: size[0], Height: size[1]})
		if _, err := m.firstFrame(); err != nil {
			t.Fatal(err)
		}
		for range 30 {
			apply(m, press("j"))
		}
		id := m.sessions.selected().ID
		screen := m.render()
		if !strings.Contains(screen, "▶ "+id) || !strings.Contains(screen, "─ session "+id+" ─") || !strings.Contains(screen, "state: active") {
			t.Errorf("%v: the selected session %s or its detail is out of sight:\n%s", size, id, screen)
		}
	}
}

// The view is drawn with lipgloss v2 and bubbles v2's text input, help,
// viewport and key bindings (issue 33), not with hand-made equivalents.
func TestTheViewIsBuiltOnLipglossAndBubbles(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	imports := strings.Fields(string(out))
	for _, want := range []string{"charm.land/lipgloss/v2", "charm.land/bubbles/v2/textinput", "charm.land/bubbles/v2/help",
		"charm.land/bubbles/v2/viewport", "charm.land/bubbles/v2/key"} {
		if !slices.Contains(imports, want) {
			t.Errorf("package tui does not import %s", want)
		}
	}
}
