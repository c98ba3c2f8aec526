package tui

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/saga"
	sm "github.com/undolog/undolog/statemachine"
)

// The view as a person meets it (issue 16), at the two sizes people use, with
// colour and with NO_COLOR (which the view gets as Color false).
type layout struct {
	w, h  int
	color bool
}

var layouts = []layout{{80, 24, false}, {80, 24, true}, {160, 45, false}, {160, 45, true}}

func (l layout) String() string {
	c := "NO_COLOR"
	if l.color {
		c = "color"
	}
	return fmt.Sprintf("%dx%d-%s", l.w, l.h, c)
}

func eachLayout(t *testing.T, fn func(t *testing.T, l layout)) {
	for _, l := range layouts {
		t.Run(l.String(), func(t *testing.T) { fn(t, l) })
	}
}

const testAddress = "/srv/logs/undolog.db"

func startAt(t *testing.T, store effectlog.Log, session string, l layout) *teatest.TestModel {
	t.Helper()
	m := New(t.Context(), Options{Log: store, Session: session, Actor: "tester", Now: func() time.Time { return demoEnd },
		Refresh: 100 * time.Millisecond, Color: l.color, Address: testAddress})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(l.w, l.h))
	t.Cleanup(func() {
		tm.Quit()
		tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
		store.Close()
	})
	return tm
}

// frame quits and returns the last frame, without colour codes, as lines.
func frame(t *testing.T, tm *teatest.TestModel, l layout) []string {
	t.Helper()
	raw := string(finalView(t, tm))
	if l.color != strings.Contains(raw, "\x1b[") {
		t.Errorf("colour codes in the frame: %v, want %v", !l.color, l.color)
	}
	lines := strings.Split(ansi.Strip(raw), "\n")
	if len(lines) != l.h {
		t.Errorf("the frame has %d lines, want %d", len(lines), l.h)
	}
	for i, line := range lines {
		if w := ansi.StringWidth(line); w > l.w {
			t.Errorf("line %d is %d cells wide, more than %d: %q", i, w, l.w, line)
		}
	}
	return lines
}

// marked returns the lines that carry the cursor mark.
func marked(lines []string) []string {
	var out []string
	for _, line := range lines {
		if strings.HasPrefix(strings.TrimLeft(line, "│┃ "), strings.TrimSpace(cursorMark)) {
			out = append(out, line)
		}
	}
	return out
}

func has(lines []string, s string) bool { return strings.Contains(strings.Join(lines, "\n"), s) }

// Item 1: the selected row is marked by text, so NO_COLOR shows it too.
func TestCursorMarkShowsTheSelectionInEveryLayout(t *testing.T) {
	eachLayout(t, func(t *testing.T, l layout) {
		tm := startAt(t, demoStore(t), "", l)
		waitFor(t, tm, "agent-research-42")
		tm.Send(press("jj")) // the third session, newest first
		lines := frame(t, tm, l)
		if got := marked(lines); len(got) != 1 || !strings.Contains(got[0], "agent-cleanup-7") {
			t.Fatalf("marked rows %q, want the one of agent-cleanup-7", got)
		}
	})
	eachLayout(t, func(t *testing.T, l layout) {
		tm := startAt(t, demoStore(t), "agent-research-42", l)
		waitFor(t, tm, "send_email")
		tm.Send(press("jj"))
		lines := frame(t, tm, l)
		if got := marked(lines); len(got) != 1 || !strings.Contains(got[0], "create_ticket") {
			t.Fatalf("marked rows %q, want the one of effect 3 (create_ticket)", got)
		}
	})
}

// Item 2: the sessions filter applies when entered, replaces the one before
// instead of adding to it, and an empty one shows every session again.
func TestSessionsFilterAppliesAtOnceAndReplaces(t *testing.T) {
	all := []string{"ci-nightly-88", "agent-ops-3", "agent-cleanup-7", "ci-deploy-117", "agent-research-42"}
	cases := []struct {
		keys []string
		want []string
	}{
		{[]string{"/", "halted", "enter"}, []string{"agent-ops-3", "agent-cleanup-7", "ci-deploy-117"}},
		{[]string{"/", "halt", "enter"}, []string{"agent-ops-3", "agent-cleanup-7", "ci-deploy-117"}}, // a state's start
		{[]string{"/", "ci"}, []string{"ci-nightly-88", "ci-deploy-117"}},                             // live, before enter
		{[]string{"/", "ci", "-d"}, []string{"ci-deploy-117"}},
		{[]string{"/", "halted", "enter", "/", "ctrl+u", "deploy", "enter"}, []string{"ci-deploy-117"}},
		{[]string{"/", "halted", "enter", "/", "esc"}, all}, // esc clears it
		{[]string{"/", "halted", "enter", "esc"}, all},
		{[]string{"/", "ci", "esc"}, all},
	}
	for _, l := range []layout{layouts[0], layouts[3]} {
		for _, c := range cases {
			t.Run(l.String()+"/"+strings.Join(c.keys, ""), func(t *testing.T) {
				tm := startAt(t, demoStore(t), "", l)
				waitFor(t, tm, "agent-research-42")
				for _, k := range c.keys {
					tm.Send(press(k))
				}
				lines := frame(t, tm, l)
				var shown []string
				for _, s := range all {
					if has(lines[2:len(lines)-2], s) {
						shown = append(shown, s)
					}
				}
				if !reflect.DeepEqual(shown, c.want) {
					t.Fatalf("shows %v, want %v:\n%s", shown, c.want, strings.Join(lines, "\n"))
				}
				if has(lines, "no sessions yet") || has(lines, "halteddeploy") {
					t.Fatalf("stale filter:\n%s", strings.Join(lines, "\n"))
				}
			})
		}
	}
}

// longArgs is an effect whose one argument is far wider than any terminal,
// ending in a marker only a reader of all of it sees.
func longArgsStore(t *testing.T, session, tool string) (effectlog.FileLog, string) {
	store := demoStore(t)
	value := strings.Repeat("the quarterly numbers of every region, ", 12) + "END-OF-ARGS"
	args, _ := json.Marshal(map[string]string{"body": value, "to": "board@example.com"})
	if _, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: session, Tool: tool, Tier: sm.Irreversible,
		Args: args, CreateSession: true, ApprovalTimeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	return store, value
}

// joined undoes the wrapping of lines: what a reader reads across them; of
// a dialog drawn over the screen, its text alone.
func joined(lines []string) string {
	if box := inDialog(lines); box != nil {
		lines = box
	}
	var parts []string
	for _, l := range lines {
		parts = append(parts, strings.TrimSpace(strings.Trim(l, "│┃")))
	}
	return strings.Join(parts, " ")
}

// inDialog is the text inside the dialog's box drawn over lines; nil when
// none is.
func inDialog(lines []string) []string {
	for i, l := range lines {
		j := strings.Index(l, "┌")
		if j < 0 {
			continue
		}
		left := ansi.StringWidth(l[:j])
		right := left + ansi.StringWidth(l[j:strings.Index(l, "┐")])
		var out []string
		for _, l := range lines[i+1:] {
			if strings.Contains(l, "└") {
				break
			}
			out = append(out, ansi.Cut(l, left+1, right))
		}
		return out
	}
	return nil
}

// Item 3: long arguments are wrapped, not cut, in the detail (scrolled to
// the end with tab and ↓) and in the approve dialog (scrolled with ↓).
func TestAnApproverReadsAllTheArguments(t *testing.T) {
	eachLayout(t, func(t *testing.T, l layout) {
		store, _ := longArgsStore(t, "mail", "send_email")
		tm := startAt(t, store, "mail", l)
		waitFor(t, tm, "send_email")
		tm.Send(press("tab"))
		for range 40 {
			tm.Send(press("j"))
		}
		lines := frame(t, tm, l)
		// (Wrapped, the marker may break at its hyphen.)
		if !strings.Contains(strings.ReplaceAll(joined(lines), " ", ""), "END-OF-ARGS") || !has(lines, "history:") {
			t.Fatalf("the detail's end is not shown:\n%s", strings.Join(lines, "\n"))
		}
		if has(lines[1:len(lines)-2], "…") {
			t.Fatalf("something is cut:\n%s", strings.Join(lines, "\n"))
		}
	})
	eachLayout(t, func(t *testing.T, l layout) {
		store, value := longArgsStore(t, "mail", "send_email")
		tm := startAt(t, store, "mail", l)
		waitFor(t, tm, "send_email")
		tm.Send(press("a"))
		waitFor(t, tm, "Approve effect 18 (send_email)?")
		for range 40 {
			tm.Send(press("down"))
		}
		lines := frame(t, tm, l)
		if !has(lines, "END-OF-ARGS") || !has(lines, "Reason (optional):") {
			t.Fatalf("the dialog does not end with the arguments' end:\n%s", strings.Join(lines, "\n"))
		}
		if l.h == 45 && !strings.Contains(strings.ReplaceAll(joined(lines), " ", ""), strings.ReplaceAll(value, " ", "")) {
			t.Fatalf("at %s the dialog does not hold all of the argument:\n%s", l, strings.Join(lines, "\n"))
		}
	})
}

// Item 4: at 80 columns a long tool name is cut, not the tier and state; the
// footer keeps help and quit; a long session name shows whole.
func TestNarrowTerminalKeepsWhatMatters(t *testing.T) {
	tool := "mcp__corporate_mail_gateway__send_email_with_attachments_v2"
	session := "agent-quarterly-finance-review-2026-11-30"
	eachLayout(t, func(t *testing.T, l layout) {
		store, _ := longArgsStore(t, session, tool)
		tm := startAt(t, store, session, l)
		waitFor(t, tm, "expires in")
		lines := frame(t, tm, l)
		if !has(lines, "  irreversible  pending") {
			t.Fatalf("the detail header lost tier or state:\n%s", strings.Join(lines, "\n"))
		}
		if row := marked(lines); len(row) != 1 || !strings.Contains(row[0], "irreversible") || !strings.Contains(row[0], "pending") {
			t.Fatalf("the row lost tier or state: %q", row)
		}
		footer := lines[len(lines)-1]
		if !strings.HasSuffix(strings.TrimSpace(footer), "? help • q quit") || !strings.Contains(footer, "a approve") {
			t.Fatalf("footer %q", footer)
		}
	})
	eachLayout(t, func(t *testing.T, l layout) {
		store, _ := longArgsStore(t, session, tool)
		tm := startAt(t, store, "", l)
		waitFor(t, tm, session)
		lines := frame(t, tm, l)
		if !has(lines, session+" ") {
			t.Fatalf("the session name is cut:\n%s", strings.Join(lines, "\n"))
		}
		footer := lines[len(lines)-1]
		if !strings.HasSuffix(strings.TrimSpace(footer), "? help • q quit") || strings.Contains(footer, "approve") || strings.Contains(footer, "transition") {
			t.Fatalf("sessions footer %q offers keys that do nothing there, or lost help/quit", footer)
		}
	})
}

// Item 4: `?` lists the screen's keys and explains the columns.
func TestHelpExplainsTheColumns(t *testing.T) {
	for _, l := range []layout{layouts[0], layouts[3]} {
		t.Run(l.String(), func(t *testing.T) {
			tm := startAt(t, demoStore(t), "", l)
			waitFor(t, tm, "agent-research-42")
			tm.Send(press("?"))
			lines := frame(t, tm, l)
			for _, column := range []string{"BY STATE", "WAIT ●N", "RPL", "UNDO"} {
				if !has(lines, column) {
					t.Errorf("help does not explain %q:\n%s", column, strings.Join(lines, "\n"))
				}
			}
			if has(lines, "a approve") || has(lines, "t transition") || has(lines, "r reject") {
				t.Errorf("the sessions screen's help offers keys of the session screen:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// abbreviation is a word the view once used for a state, or an effect state's or a
// trigger's name from the spec, none of which a person should have to look
// up (the commands spell them: textfmt's words).
var abbreviation = regexp.MustCompile(`(^|[^\pL_])(pend|done|rep|ok|FAIL|rej|exec|comp…|compensation_failed|undo:[a-z]+)([^\pL_]|$)|RPC|Intercept →|orchestrator|Proxy resumes|via dashboard`)

// Issue 33 item 2: the view speaks the commands' words. Every screen of the
// demo log (each session's detail, each effect's detail and history, the
// help) is read for an abbreviation or a spec name; the words the commands
// use are there instead.
func TestTheViewSpeaksTheCommandsWords(t *testing.T) {
	store := demoStore(t)
	// An undone session, for the words of an undo.
	if _, err := (&saga.Runner{Log: store, Actor: "bob", Progress: io.Discard}).Run(t.Context(), "agent-research-42"); err != nil {
		t.Fatal(err)
	}
	var screens []string
	read := func(m *Model) { screens = append(screens, ansi.Strip(m.render())) }
	// Tall enough that each effect's history shows whole.
	opened := func(t *testing.T, store effectlog.Log, session string) *Model {
		m := New(t.Context(), Options{Log: store, Session: session, Now: func() time.Time { return demoEnd },
			Location: time.UTC, Width: 100, Height: 80})
		if _, err := m.firstFrame(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := opened(t, store, "")
	for range m.sessions.list {
		read(m)
		apply(m, press("j"))
	}
	apply(m, press("?"))
	read(m)
	for _, s := range m.sessions.list {
		v := opened(t, store, s.ID)
		for range v.session.effects {
			read(v)
			apply(v, press("j"))
		}
	}
	all := strings.Join(screens, "\n")
	for _, screen := range screens {
		for _, line := range strings.Split(screen, "\n") {
			if strings.Contains(line, `"`) {
				continue // stored JSON, a call's args and result, as they are
			}
			if loc := abbreviation.FindStringIndex(line); loc != nil {
				t.Errorf("the view shows %q, not a word a person reads:\n%s", line[loc[0]:loc[1]], screen)
			}
		}
	}
	for _, word := range []string{"committed, undone", "1 undo failed", "not undone", "effect     registered", "undo entry undone by bob", "approved by", "(2 undone)"} {
		if !strings.Contains(all, word) {
			t.Errorf("no screen says %q", word)
		}
	}
	// An undone effect's row: its state and its undo entry's in words.
	if row := regexp.MustCompile(`committed, undone +\S+ +\d+ +undone `); !row.MatchString(all) {
		t.Errorf("no effect row reads committed, undone ... undone:\n%s", all)
	}
}

// Item 6: the title names the log the view is on.
func TestTitleNamesTheLog(t *testing.T) {
	eachLayout(t, func(t *testing.T, l layout) {
		tm := start2(t, l)
		lines := frame(t, tm, l)
		if !strings.Contains(lines[0], testAddress) {
			t.Fatalf("title %q does not name %s", lines[0], testAddress)
		}
	})
}

func start2(t *testing.T, l layout) *teatest.TestModel {
	tm := startAt(t, demoStore(t), "agent-research-42", l)
	waitFor(t, tm, "send_email")
	return tm
}

// Item 5: the demo's main session undoes in the view, every step.
func TestDemoMainSessionUndoes(t *testing.T) {
	store := demoStore(t)
	tm := startAt(t, store, "", layouts[0])
	waitFor(t, tm, "agent-research-42")
	tm.Send(press("jjjj"))
	tm.Send(press("u"))
	waitFor(t, tm, "Undo 2 steps of session agent-research-42? (y/n)")
	tm.Send(press("y"))
	waitFor(t, tm, "session agent-research-42 compensated: 2 undone")
	if s, _ := store.GetSession(t.Context(), "agent-research-42"); s.State != sm.SessionCompensated {
		t.Fatalf("session %s", s.State)
	}
}

// Item 5: the undo plan flags a compensation whose template does not expand.
func TestUndoPlanFlagsATemplateThatDoesNotExpand(t *testing.T) {
	store := logaddr.File(t.TempDir()+"/u.db", logaddr.Options{})
	if _, err := store.CreateSession(t.Context(), effectlog.NewSession{ID: "tickets", Upstream: []string{"mcp-server-tickets"}}); err != nil {
		t.Fatal(err)
	}
	for i, tmpl := range []string{`{"id":"{{result.id}}"}`, `{"id":"{{ .result.id }}"}`} {
		res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "tickets", Tool: "create_ticket", Tier: sm.Compensable,
			Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), CreateSession: true,
			Compensation: &model.Compensation{Kind: model.CompensationMCP, Tool: "close_ticket", Args: json.RawMessage(tmpl)}})
		if err != nil {
			t.Fatal(err)
		}
		store.Start(t.Context(), res.Effect.ID, model.Change{})
		store.Commit(t.Context(), res.Effect.ID, model.Change{Result: json.RawMessage(`{"id":"FIN-1"}`)})
	}
	tm := startAt(t, store, "", layouts[2])
	waitFor(t, tm, "tickets")
	tm.Send(press("u"))
	waitFor(t, tm, "(y/n)")
	lines := frame(t, tm, layouts[2])
	var flagged []string
	for i, line := range lines {
		if strings.Contains(line, "WILL FAIL") {
			step := i - 1 // the step's first line: a long one wraps
			for step > 0 && !strings.Contains(lines[step], ". effect ") {
				step--
			}
			flagged = append(flagged, lines[step])
		}
	}
	if !strings.Contains(joined(lines), "function not defined: result/0") {
		t.Errorf("the flag does not say why:\n%s", strings.Join(lines, "\n"))
	}
	if len(flagged) != 1 || !strings.Contains(flagged[0], "effect 1 ") || !has(lines, `close_ticket {"id":"FIN-1"}`) {
		t.Fatalf("flagged %q:\n%s", flagged, strings.Join(lines, "\n"))
	}
}

// A rejection, as on the command line, needs no reason; it is recorded with
// its actor.
func TestRejectWithoutAReason(t *testing.T) {
	d, last := decideInView(t, "r")
	if d.Effect.State != sm.Rejected || last.Reason != "" || last.Actor != "tester" {
		t.Fatalf("%s %+v", d.Effect.State, last)
	}
}
