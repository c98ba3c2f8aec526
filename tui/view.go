package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mattn/go-runewidth"

	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/saga"
	sm "github.com/undolog/undolog/statemachine"
)

// fit truncates or pads s to exactly w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if runewidth.StringWidth(s) > w {
		s = runewidth.Truncate(s, w, "…")
	}
	return runewidth.FillRight(s, w)
}

// column is one table column: its width and, for state columns, a colour.
type column struct {
	title string
	width int
	state bool
}

// renderRow lays cells out in columns, escaped (textfmt.Escape); the
// selected row is reversed whole.
func (m *Model) renderRow(cols []column, cells []string, selected bool) string {
	var b strings.Builder
	for i, c := range cols {
		text := fit(esc(cells[i]), c.width)
		if c.state && !selected {
			name := strings.TrimSpace(text)
			text = strings.Replace(text, name, m.st.state(name), 1)
		}
		b.WriteString(text)
		if i < len(cols)-1 {
			b.WriteString(" ")
		}
	}
	line := b.String()
	if selected {
		return m.st.selected.Render(line)
	}
	return line
}

func (m *Model) renderHeader(cols []column) string {
	cells := make([]string, len(cols))
	for i, c := range cols {
		cells[i] = c.title
	}
	return m.st.label.Render(strings.TrimRight(m.renderRow(cols, cells, false), " "))
}

// flexColumns gives the first column marked with width 0 what is left of the width.
func flexColumns(cols []column, width int) []column {
	used := len(cols) - 1
	for _, c := range cols {
		used += c.width
	}
	for i := range cols {
		if cols[i].width == 0 {
			cols[i].width = max(6, width-used)
		}
	}
	return cols
}

// scrolled returns the first visible row so that cursor stays on screen.
func scrolled(offset, cursor, rows int) int {
	if cursor < offset {
		return cursor
	}
	if cursor >= offset+rows {
		return cursor - rows + 1
	}
	return offset
}

// View renders the whole screen.
func (m *Model) View() string {
	var body string
	switch m.overlay {
	case overlayHelp:
		body = m.st.box.Render(m.st.title.Render("Keys") + "\n\n" + m.help.FullHelpView(m.keys.FullHelp()))
	case overlayMenu:
		body = m.menuView()
	case overlayPrompt:
		body = m.st.box.Width(min(m.width-2, 76)).Render(esc(m.prompt.title) + "\n\n" + m.prompt.input.View() + "\n\n" + m.st.dim.Render("enter: confirm  esc: cancel"))
	case overlayFilter:
		body = m.st.box.Width(min(m.width-2, 76)).Render("Filter by tool or state:\n\n" + m.filter.View() + "\n\n" + m.st.dim.Render("enter: apply  esc: cancel"))
	case overlayConfirmUndo:
		body = m.confirmUndoView()
	case overlayUndo:
		body = m.undoView()
	default:
		if m.screen == screenSessions {
			body = m.sessionsView()
		} else {
			body = m.sessionView()
		}
	}
	lines := strings.Split(body, "\n")
	h := m.bodyHeight()
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	status := m.st.status.Render(fit(esc(m.status), m.width))
	if m.statusErr {
		status = m.st.errText.Render(fit("error: "+esc(m.status), m.width))
	}
	return m.titleLine() + "\n" + strings.Join(lines, "\n") + "\n" + status + "\n" + m.help.ShortHelpView(m.keys.ShortHelp())
}

func (m *Model) titleLine() string {
	crumb := "sessions"
	if m.screen == screenSession {
		crumb = "sessions › " + esc(m.session.id)
	}
	follow := "follow off"
	if m.follow {
		follow = "follow on"
	}
	left := m.st.title.Render("undolog") + "  " + crumb
	right := follow
	pad := m.width - runewidth.StringWidth("undolog  "+crumb) - runewidth.StringWidth(right)
	if pad < 1 {
		return left
	}
	return left + strings.Repeat(" ", pad) + m.st.dim.Render(right)
}

func (m *Model) sessionsView() string {
	v := &m.sessions
	if !v.loaded {
		return "loading…"
	}
	if len(v.list) == 0 {
		if v.filter != "" {
			return "no session matches " + strconv.Quote(v.filter)
		}
		return "no sessions yet: undolog session start, undolog exec or undolog demo make some"
	}
	cols := flexColumns([]column{{"SESSION", 0, false}, {"STATE", 17, true}, {"AGE", 4, false},
		{"EFFECTS", 7, false}, {"BY STATE", 24, false}, {"WAIT", 6, false}}, m.width)
	rows := m.bodyHeight() - 1
	v.offset = scrolled(v.offset, v.cursor, rows)
	out := []string{m.renderHeader(cols)}
	now := m.opts.Now()
	for i := v.offset; i < len(v.list) && i < v.offset+rows; i++ {
		s := v.list[i]
		wait := ""
		if s.PendingApprovals > 0 {
			wait = "●" + strconv.Itoa(s.PendingApprovals)
		}
		line := m.renderRow(cols, []string{s.ID, string(s.State), textfmt.Ago(now, s.CreatedAt), strconv.Itoa(s.Effects),
			countsLine(s.Counts), wait}, i == v.cursor)
		if wait != "" && i != v.cursor {
			line = strings.Replace(line, wait, m.st.badge.Render(wait), 1)
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// countsLine abbreviates per-state counts: 3C 1P 2R ...
func countsLine(counts map[sm.State]int) string {
	abbrev := map[sm.State]string{sm.Pending: "pend", sm.Executing: "exec", sm.Committed: "done", sm.Compensating: "comp…",
		sm.Compensated: "undone", sm.CompensationFailed: "FAIL", sm.Approved: "ok", sm.Rejected: "rej", sm.Replayed: "rep"}
	var parts []string
	for _, st := range sm.States {
		if n := counts[st]; n > 0 {
			parts = append(parts, strconv.Itoa(n)+" "+abbrev[st])
		}
	}
	return strings.Join(parts, " ")
}

func (m *Model) sessionView() string {
	v := &m.session
	if !v.loaded {
		return "loading…"
	}
	s := v.sess
	head := fmt.Sprintf("%s  %s  %s", m.st.title.Render(esc(s.ID)), m.st.state(string(s.State)), textfmt.Count(s.Effects, "effect"))
	if s.PendingApprovals > 0 {
		head += "  " + m.st.badge.Render(fmt.Sprintf("● %d awaiting approval", s.PendingApprovals))
	}
	if v.filter != "" {
		head += "  filter: " + esc(v.filter)
	}
	if v.page > 0 || v.next != 0 {
		head += fmt.Sprintf("  page %d", v.page+1)
	}
	cols := flexColumns([]column{{"ID", 6, false}, {"TOOL", 0, false}, {"TIER", 12, false}, {"STATE", 19, true},
		{"AGE", 4, false}, {"RPL", 3, false}, {"UNDO", 19, true}}, m.width)
	out := []string{head, m.renderHeader(cols)}
	rows := m.tableHeight()
	v.offset = scrolled(v.offset, v.cursor, rows)
	now := m.opts.Now()
	for i := v.offset; i < v.offset+rows; i++ {
		if i >= len(v.effects) {
			if i == 0 {
				out = append(out, m.st.dim.Render("no effects"))
			} else {
				out = append(out, "")
			}
			continue
		}
		e := v.effects[i]
		undo := "-"
		if u, ok := v.entries[e.ID]; ok {
			undo = string(u.State)
		}
		out = append(out, m.renderRow(cols, []string{itoa(e.ID), e.Tool, string(e.Tier), string(e.State),
			textfmt.Ago(now, e.CreatedAt), strconv.Itoa(e.ReplayCount), undo}, i == v.cursor && !v.focusDetail))
	}
	sep := strings.Repeat("─", m.width)
	if v.focusDetail {
		sep = m.st.label.Render(fit("── detail (tab: back to the table) ", m.width))
	}
	out = append(out, m.st.dim.Render(sep))
	detail := m.detailLines()
	room := m.bodyHeight() - len(out)
	v.detailTop = max(0, min(v.detailTop, len(detail)-room))
	end := min(len(detail), v.detailTop+room)
	out = append(out, detail[v.detailTop:end]...)
	return strings.Join(out, "\n")
}

// detailLines renders the selected effect: fields, args and result as pretty
// JSON, the approval, the undo entry and the history timeline.
func (m *Model) detailLines() []string {
	d := m.session.detail
	if d == nil {
		return nil
	}
	e := d.Effect
	now := m.opts.Now()
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	add("%s %d  %s  %s  %s", m.st.label.Render("effect"), e.ID, esc(e.Tool), e.Tier, m.st.state(string(e.State)))
	if e.ReplayOf != nil {
		add("replay of effect %d", *e.ReplayOf)
	}
	if e.ReplayCount > 0 {
		add("replayed %s, last %s ago", textfmt.Count(e.ReplayCount, "time"), textfmt.Ago(now, *e.LastReplayedAt))
	}
	if e.Error != "" {
		add("%s %s", m.st.label.Render("error:"), esc(e.Error))
	}
	if a := d.Approval; a != nil {
		line := a.Outcome
		switch {
		case a.DecidedAt != nil:
			line += fmt.Sprintf(" by %s %s ago", a.DecidedBy, textfmt.Ago(now, *a.DecidedAt))
			if a.Decision != "" {
				line += ": " + a.Decision
			}
		case a.ExpiresAt != nil:
			line += ", expires in " + textfmt.Duration(a.ExpiresAt.Sub(now))
		}
		add("%s %s", m.st.label.Render("approval:"), esc(line))
	}
	if u := d.Undo; u != nil {
		line := string(u.State) + "  " + u.Compensation.Kind + ": " + saga.DescribeCall(u.Compensation)
		if u.LastError != "" {
			line += "  last error: " + u.LastError
		}
		add("%s %s", m.st.label.Render("undo:"), esc(line))
	}
	out = append(out, m.st.label.Render("args:"))
	out = append(out, prettyJSON(e.Args)...)
	if len(e.Result) > 0 && string(e.Result) != "null" {
		out = append(out, m.st.label.Render("result:"))
		out = append(out, prettyJSON(e.Result)...)
	}
	out = append(out, m.st.label.Render("history:"))
	for _, r := range d.History {
		to := r.To
		if r.Kind == model.KindUndo {
			to = "undo:" + r.To
		}
		line := fmt.Sprintf("  %2d %s %-26s %s by %s", r.Seq, r.At.Format("15:04:05"), to, sm.TriggerText(r.Trigger), r.Actor)
		if r.Reason != "" {
			line += " (" + r.Reason + ")"
		}
		if r.Error != "" {
			line += " error: " + r.Error
		}
		out = append(out, esc(line))
	}
	for i := range out {
		out[i] = fitANSI(out[i], m.width)
	}
	return out
}

// fitANSI cuts a line that may hold colour codes to w cells.
func fitANSI(s string, w int) string {
	if runewidth.StringWidth(s) <= w || strings.Contains(s, "\x1b") {
		return s
	}
	return runewidth.Truncate(s, w, "…")
}

// prettyJSON indents raw, each line escaped: a JSON string may hold C1
// controls and bidirectional marks as they are (only C0 must be escaped).
func prettyJSON(raw []byte) []string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "  ", "  "); err != nil {
		return []string{"  " + esc(string(raw))}
	}
	lines := strings.Split("  "+b.String(), "\n")
	for i, l := range lines {
		lines[i] = esc(l)
	}
	return lines
}

// esc is how the view shows text that was stored: textfmt.Escape.
var esc = textfmt.Escape

func (m *Model) menuView() string {
	e := m.menu.effect
	lines := []string{fmt.Sprintf("Move effect %d (%s, %s) from %s to:", e.ID, esc(e.Tool), e.Tier, e.State), ""}
	for i, st := range m.menu.options {
		line := "  " + string(st)
		if i == m.menu.cursor {
			line = m.st.selected.Render("> " + string(st))
		}
		lines = append(lines, line)
	}
	lines = append(lines, "", m.st.dim.Render("enter: choose  esc: cancel"))
	return m.st.box.Render(strings.Join(lines, "\n"))
}

func (m *Model) confirmUndoView() string {
	p := m.plan
	// Each line is escaped whole: it quotes tool names and commands.
	escf := func(format string, args ...any) string { return esc(fmt.Sprintf(format, args...)) }
	lines := []string{escf("Undo session %s, last in first out:", p.Session), ""}
	n := 0
	for _, s := range p.Steps {
		e := s.Effect
		switch s.Action {
		case saga.ActionDone:
			lines = append(lines, escf("   -  effect %d %s: already %s", e.ID, e.Tool, s.Entry.State))
		case saga.ActionSkip:
			n++
			lines = append(lines, escf("  %2d. effect %d %s: skip, it never ran", n, e.ID, e.Tool))
		case saga.ActionBlocked:
			n++
			lines = append(lines, escf("  %2d. effect %d %s: BLOCKED, resolve it first", n, e.ID, e.Tool))
		default:
			n++
			lines = append(lines, escf("  %2d. effect %d %s (%s): %s", n, e.ID, e.Tool, e.State, s.Call))
		}
	}
	if len(p.Steps) == 0 {
		lines = append(lines, "  (nothing to undo)")
	}
	for _, e := range p.NotUndoable {
		lines = append(lines, escf("  not undoable: effect %d %s (irreversible, %s)", e.ID, e.Tool, e.State))
	}
	lines = append(lines, "", m.st.title.Render(escf("Undo %d steps of session %s? (y/n)", p.Work(), p.Session)))
	return m.st.box.Width(min(m.width-2, 100)).Render(strings.Join(lines, "\n"))
}

func (m *Model) undoView() string {
	lines := []string{fmt.Sprintf("Undoing session %s…", esc(m.undo.session)), ""}
	for _, l := range m.undo.lines {
		lines = append(lines, esc(l))
	}
	if m.undo.done {
		lines = append(lines, "", m.st.dim.Render("press any key"))
	}
	return m.st.box.Width(min(m.width-2, 100)).Render(strings.Join(lines, "\n"))
}
