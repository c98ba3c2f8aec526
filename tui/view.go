package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/saga"
)

// fit truncates or pads s to exactly w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", max(0, w-ansi.StringWidth(s)))
}

// column is one table column: its width and, for state columns, a colour.
type column struct {
	title string
	width int
	state bool
}

// cursorMark leads the selected row. It is text, not a colour: with NO_COLOR
// (which drops every style) it still shows what a, r or t act on.
const (
	cursorMark = "▶ "
	noMark     = "  "
)

// renderRow lays cells out in columns, escaped (textfmt.Escape), after the
// cursor column; the selected row is also reversed whole.
// A state column's cell is in the colour of its text, or of tints[i]: the
// state name behind words ("committed, undone" in compensated's colour).
func (m *Model) renderRow(cols []column, cells []string, tints map[int]string, selected bool) string {
	var b strings.Builder
	if selected {
		b.WriteString(cursorMark)
	} else {
		b.WriteString(noMark)
	}
	for i, c := range cols {
		text := fit(esc(cells[i]), c.width)
		if c.state && !selected {
			name, tint := strings.TrimSpace(text), strings.TrimSpace(text)
			if t, ok := tints[i]; ok {
				tint = t
			}
			text = strings.Replace(text, name, m.st.paint(name, tint), 1)
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
	return m.st.label.Render(strings.TrimRight(m.renderRow(cols, cells, nil, false), " "))
}

// flexColumns gives the column marked with width 0 what is left of the
// width, but no more than most: the columns after it stay beside what they
// describe on a wide terminal.
func flexColumns(cols []column, width, most int) []column {
	used := len(cols) - 1 + ansi.StringWidth(noMark)
	for _, c := range cols {
		used += c.width
	}
	for i := range cols {
		if cols[i].width == 0 {
			cols[i].width = max(6, min(most, width-used))
		}
	}
	return cols
}

// widest is the width of the widest of title and values: a column as wide
// as what it shows now, so that narrow terminals keep room for names.
func widest(title string, values ...string) int {
	w := ansi.StringWidth(title)
	for _, v := range values {
		w = max(w, ansi.StringWidth(esc(v)))
	}
	return w
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

// View is the screen for the program: drawn inline, from the corner where
// Run left the cursor, in the alternate screen Run entered (see Run); the
// terminal's cursor stands in a dialog's input.
func (m *Model) View() tea.View {
	v := tea.NewView("")
	v.Content, v.Cursor = m.draw()
	return v
}

// render renders the whole screen.
func (m *Model) render() string {
	screen, _ := m.draw()
	return screen
}

// draw renders the whole screen, and where the cursor stands on it (nil:
// hidden, as it is but in an input).
func (m *Model) draw() (string, *tea.Cursor) {
	var dialog string
	var cursor *tea.Cursor
	switch m.overlay {
	case overlayHelp:
		dialog = m.helpView()
	case overlayMenu:
		dialog = m.menuView()
	case overlayPrompt:
		dialog, cursor = m.promptView()
	case overlayConfirmUndo:
		dialog = m.confirmUndoView()
	case overlayUndo:
		dialog = m.undoView()
	}
	var body string
	if m.screen == screenSessions {
		body = m.sessionsView()
	} else {
		body = m.sessionView()
	}
	if m.overlay == overlayFilter {
		var line string
		line, cursor = m.filterLine()
		body = line + "\n" + body
	}
	lines := strings.Split(body, "\n")
	h := m.bodyHeight()
	if m.overlay == overlayFilter {
		h++ // the filter's line
	}
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	screen := append(append(append([]string{m.titleLine()}, lines...), m.statusLines()...), m.footer())
	for i, line := range screen {
		// A table that cannot shrink further is cut at the window's edge
		// rather than wrapped by the terminal onto the next line.
		screen[i] = ansi.Truncate(line, m.width, "")
	}
	if dialog != "" {
		return m.overDimmed(screen, dialog, cursor)
	}
	if cursor != nil {
		cursor.Y++ // under the title
		if cursor.Y > h || cursor.X >= m.width {
			cursor = nil // the input is cut off with the body
		}
	}
	return strings.Join(screen, "\n"), cursor
}

// overDimmed draws dialog centred over the screen's lines, dimmed (with no
// colour, they stay as text); cursor is the dialog's input's, moved with it.
func (m *Model) overDimmed(screen []string, dialog string, cursor *tea.Cursor) (string, *tea.Cursor) {
	for i, l := range screen {
		screen[i] = m.st.dim.Render(ansi.Strip(l))
	}
	dw, dh := lipgloss.Width(dialog), lipgloss.Height(dialog)
	x, y := max(0, (m.width-dw)/2), max(0, (len(screen)-dh)/2)
	canvas := lipgloss.NewCanvas(m.width, len(screen))
	canvas.Compose(lipgloss.NewCompositor(lipgloss.NewLayer(strings.Join(screen, "\n")), lipgloss.NewLayer(dialog).X(x).Y(y).Z(1)))
	if cursor != nil {
		cursor.X += x
		cursor.Y += y
		if cursor.Y >= len(screen) || cursor.X >= m.width {
			cursor = nil // the input is cut off with the dialog
		}
	}
	return canvas.Render(), cursor
}

// maxStatusLines bounds the status message's lines: a refusal's whole
// reason is shown (a role's denial names what it may not do at its end), and
// the body keeps the rest.
const maxStatusLines = 3

// statusText is the status message wrapped to the window's width, unstyled
// (the body's height counts its lines).
func (m *Model) statusText() []string {
	text := esc(m.status)
	if m.statusErr {
		text = "error: " + text
	}
	if m.width <= 0 {
		return []string{""}
	}
	lines := strings.Split(ansi.Wrap(text, m.width, ""), "\n")
	if len(lines) > maxStatusLines {
		lines = lines[:maxStatusLines]
		last := &lines[maxStatusLines-1]
		*last = ansi.Truncate(*last, m.width-1, "") + "…"
	}
	return lines
}

// statusLines is the status message as the screen shows it.
func (m *Model) statusLines() []string {
	style := m.st.status
	if m.statusErr {
		style = m.st.errText
	}
	lines := m.statusText()
	for i, l := range lines {
		lines[i] = style.Render(fit(l, m.width))
	}
	return lines
}

// footer is the screen's keys on one line: `? help` and `q quit` always, the
// others as many as fit, most useful first. (Given the width, bubbles' help
// would drop help and quit first, and overflow when not even its ellipsis
// fits.)
func (m *Model) footer() string {
	keys := m.keys.shortHelp(m.screen, m.offers())
	for n := len(keys); ; n-- {
		line := m.help.ShortHelpView(append(keys[:n:n], m.keys.Help, m.keys.Quit))
		if n == 0 || lipgloss.Width(line) <= m.width {
			return line
		}
	}
}

// legend explains the view's columns, under `?`.
var legend = []string{
	"BY STATE counts a session's effects by state, and how many were undone.",
	"WAIT ●N: N calls await approval.  RPL: times the call was replayed.",
	"UNDO: what undo did to the effect: not undone, undoing, undone,",
	"  undo failed, nothing to undo, resolved by hand (-: nothing yet).",
	cursorMark + "marks the selected row: what a, r, R, t and u act on.",
}

func (m *Model) helpView() string {
	keys := m.help
	keys.SetWidth(m.width - m.st.box.GetHorizontalFrameSize())
	lines := []string{m.st.title.Render("Keys"), "", keys.FullHelpView(m.keys.fullHelp(m.screen)), "", m.st.title.Render("Columns")}
	lines = append(lines, legend...)
	return m.fitBox(lines)
}

// filterHint follows the filter's line.
const filterHint = "  enter: keep  esc: clear"

// filterLine is the filter being edited, over the screen it filters, and
// where the cursor stands in it.
func (m *Model) filterLine() (string, *tea.Cursor) {
	field, cursor := m.filter.view()
	line := fit(field, m.filterWidth()) + m.st.dim.Render(filterHint)
	return line, cursor
}

// inputCursor places the cursor of an input drawn as the last of lines in
// box: on the line above the box's bottom border, after its left border and
// padding.
func inputCursor(box lipgloss.Style, lines []string, cursor *tea.Cursor) *tea.Cursor {
	if cursor == nil {
		return nil
	}
	cursor.Y += lipgloss.Height(box.Render(strings.Join(lines, "\n"))) - 2
	cursor.X += box.GetBorderLeftSize() + box.GetPaddingLeft()
	return cursor
}

// promptView is the decision dialog: the question, the effect's arguments
// (what is being decided on, wrapped, scrolled with ↑/↓) and the reason.
func (m *Model) promptView() (string, *tea.Cursor) {
	p := &m.prompt
	w := m.promptWidth()
	box := m.st.boxWidth(w)
	inner := max(10, w-4) // border and padding
	lines := wrapLines([]string{esc(p.title)}, inner)
	var args []string
	if len(p.args) > 0 {
		args = wrapLines(p.args, inner)
	}
	// What the box may give the arguments: the body less the border, the
	// question, the labels, the input and the hint.
	room := max(1, m.bodyHeight()-2-len(lines)-6)
	if len(args) > 0 {
		p.top = max(0, min(p.top, len(args)-room))
		end := min(len(args), p.top+room)
		label := "args:"
		if len(args) > room {
			label = fmt.Sprintf("args (lines %d-%d of %d, ↑/↓ scroll):", p.top+1, end, len(args))
		}
		lines = append(lines, m.st.label.Render(label))
		lines = append(lines, args[p.top:end]...)
	}
	field, cursor := p.input.view()
	lines = append(lines, "", m.st.label.Render(p.question), field)
	cursor = inputCursor(box, lines, cursor)
	lines = append(lines, m.st.dim.Render("enter: confirm  esc: cancel"))
	return box.Render(strings.Join(lines, "\n")), cursor
}

// wrapLines wraps each line to w cells; a continued line keeps its indent
// and two more cells, so that wrapped JSON still reads as nested.
func wrapLines(lines []string, w int) []string {
	var out []string
	for _, l := range lines {
		out = append(out, wrap(l, w)...)
	}
	return out
}

func wrap(line string, w int) []string {
	if w <= 0 || ansi.StringWidth(line) <= w {
		return []string{line}
	}
	n := len(line) - len(strings.TrimLeft(line, " "))
	if n+2 > w/2 {
		n = 0
	}
	// At spaces where there are some, else anywhere (a long token).
	parts := strings.Split(ansi.Wrap(line[n:], w-n-2, ""), "\n")
	first, cont := strings.Repeat(" ", n), strings.Repeat(" ", n+2)
	out := make([]string, len(parts))
	for i, p := range parts {
		if i == 0 {
			out[i] = first + p
		} else {
			out[i] = cont + p
		}
	}
	return out
}

func (m *Model) titleLine() string {
	crumb := "sessions"
	if m.screen == screenSessions && m.sessions.filter != "" {
		crumb += " (filter: " + esc(m.sessions.filter) + ")"
	}
	if m.screen == screenSession {
		crumb = "sessions › " + esc(m.session.id)
	}
	follow := "follow off"
	if m.follow {
		follow = "follow on"
	}
	// With colour the view's name is a bar on the accent colour; without,
	// the word.
	name := "undolog"
	if m.st.color {
		name = m.st.header.Render(" undolog ")
	}
	left := name + "  " + crumb
	right := follow
	// The log the view is on, cut from the left (its end names it best)
	// to what the crumb leaves.
	if a := esc(m.opts.Address); a != "" {
		room := m.width - ansi.StringWidth(left) - ansi.StringWidth(" · "+follow) - 2
		if room >= 12 {
			if ansi.StringWidth(a) > room {
				a = "…" + ansi.TruncateLeft(a, ansi.StringWidth(a)-room+1, "")
			}
			right = a + " · " + follow
		}
	}
	pad := m.width - ansi.StringWidth(left) - ansi.StringWidth(right)
	if pad < 1 {
		return ansi.Truncate(left, m.width, "…")
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
	cols := m.sessionColumns()
	body, inner := m.bodyHeight(), m.width-2 // in a pane's borders
	// A tall screen shows the selected session's detail in a pane under the
	// list's: the list keeps what it needs, the detail at least 3 lines.
	detail := wrapLines(m.sessionDetail(), inner)
	rows := body - 3 // the list pane's borders and header
	switch {
	case rows-len(v.list) >= 5:
		rows = len(v.list)
	case rows-5 >= 3:
		rows -= 5
	default:
		detail = nil
	}
	v.offset = scrolled(v.offset, v.cursor, rows)
	list := []string{m.renderHeader(cols)}
	now := m.opts.Now()
	for i := v.offset; i < len(v.list) && i < v.offset+rows; i++ {
		s := v.list[i]
		wait := ""
		if s.PendingApprovals > 0 {
			wait = "●" + strconv.Itoa(s.PendingApprovals)
		}
		values := map[string]string{"SESSION": s.ID, "STATE": string(s.State), "AGE": textfmt.Ago(now, s.CreatedAt), "EFFECTS": strconv.Itoa(s.Effects),
			"BY STATE": saga.CountsWords(s.Counts, m.sessions.undone[s.ID]), "WAIT": wait}
		rowCols := cols
		if n := len(cols); wait == "" && n > 1 && cols[n-1].title == "WAIT" && cols[n-2].title == "BY STATE" {
			// No badge: the counts may run on under WAIT.
			rowCols = slices.Clone(cols[:n-1])
			rowCols[n-2].width += 1 + cols[n-1].width
		}
		cells := make([]string, len(rowCols))
		for i, c := range rowCols {
			cells[i] = values[c.title]
		}
		line := m.renderRow(rowCols, cells, nil, i == v.cursor)
		if wait != "" && i != v.cursor {
			line = strings.Replace(line, wait, m.st.badge.Render(wait), 1)
		}
		list = append(list, line)
	}
	for len(list) < rows+1 {
		list = append(list, "")
	}
	out := []string{m.pane("sessions", list, m.width, true)}
	if len(detail) > 0 {
		room := body - len(list) - 2 - 2
		for len(detail) < room {
			detail = append(detail, "")
		}
		out = append(out, m.pane("session "+esc(v.selected().ID), detail[:room], m.width, false))
	}
	return strings.Join(out, "\n")
}

// sessionDetail is the selected session's: its state and why, when it was
// made and changed, its effects by state (spelled out), what awaits
// approval, and what it was labelled with.
func (m *Model) sessionDetail() []string {
	s := m.sessions.selected()
	if s == nil {
		return nil
	}
	now, loc := m.opts.Now(), m.opts.Location
	label := func(name string) string { return m.st.label.Render(name) }
	state := m.st.state(string(s.State))
	if s.Reason != "" {
		state += ": " + esc(textfmt.OneLine(s.Reason))
	}
	var out []string
	if ansi.StringWidth(" session "+s.ID+" ") > m.width-3 { // the pane's title cuts it
		out = append(out, label("session:")+" "+esc(s.ID))
	}
	out = append(out,
		label("state:")+" "+state,
		label("created:")+" "+s.CreatedAt.In(loc).Format(historyTime)+" ("+textfmt.Ago(now, s.CreatedAt)+" ago)",
	)
	if !s.UpdatedAt.IsZero() && !s.UpdatedAt.Equal(s.CreatedAt) {
		out = append(out, label("changed:")+" "+s.UpdatedAt.In(loc).Format(historyTime)+" ("+textfmt.Ago(now, s.UpdatedAt)+" ago)")
	}
	line := label("effects:") + " " + strconv.Itoa(s.Effects)
	if counts := saga.CountsWords(s.Counts, m.sessions.undone[s.ID]); counts != "" {
		line += ": " + counts
	}
	out = append(out, line)
	if s.PendingApprovals > 0 {
		out = append(out, m.st.badge.Render(fmt.Sprintf("● %d awaiting approval", s.PendingApprovals))+": enter, ↓ to it, then a or r")
	}
	if len(s.Meta) > 0 {
		keys := make([]string, 0, len(s.Meta))
		for k := range s.Meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			keys[i] = esc(k) + "=" + esc(s.Meta[k])
		}
		out = append(out, label("meta:")+" "+strings.Join(keys, "  "))
	}
	if len(s.Upstream) > 0 {
		out = append(out, label("server:")+" "+esc(strings.Join(s.Upstream, " ")))
	}
	return out
}

// sessionColumns sizes the sessions table to what it shows. The names and
// the counts in words are what a person needs whole: when the width is
// short, EFFECTS goes first (BY STATE sums to it), then AGE (the detail
// pane says when the session was made); then a long name is cut, down to
// minNameWidth, then BY STATE (the detail pane shows the selected
// session's name and counts whole), or it goes, at less than 10 cells, and
// the names get its room.
func (m *Model) sessionColumns() []column {
	var ids, states, counts []string
	for _, s := range m.sessions.list {
		ids, states = append(ids, s.ID), append(states, string(s.State))
		counts = append(counts, saga.CountsWords(s.Counts, m.sessions.undone[s.ID]))
	}
	name := column{"SESSION", widest("SESSION", ids...), false}
	state := column{"STATE", widest("STATE", states...), true}
	age, effects := column{"AGE", 4, false}, column{"EFFECTS", 7, false}
	by := column{"BY STATE", widest("BY STATE", counts...), false}
	wait := column{"WAIT", 4, false}
	room := m.width - 2 - ansi.StringWidth(noMark) // in a pane
	for _, cols := range [][]column{
		{name, state, age, effects, by, wait},
		{name, state, age, by, wait},
		{name, state, by, wait},
	} {
		if tableWidth(cols) <= room {
			return cols
		}
	}
	// A long name gives way to the counts, down to minNameWidth cells (the
	// detail pane shows the selected session's whole).
	if over := tableWidth([]column{name, state, by, wait}) - room; name.width > minNameWidth {
		name.width = max(minNameWidth, name.width-over)
	}
	if left := room - tableWidth([]column{name, state, wait}) - 1; left >= 10 {
		by.width = min(by.width, left)
		return []column{name, state, by, wait}
	}
	cols := []column{name, state, age, effects, wait}
	if over := tableWidth(cols) - room; over > 0 {
		cols[0].width = max(6, name.width-over)
	}
	return cols
}

// minNameWidth is as far as a long session name gives way to the counts
// beside it.
const minNameWidth = 20

// tableWidth is the cells cols take, with the spaces between them.
func tableWidth(cols []column) int {
	w := len(cols) - 1
	for _, c := range cols {
		w += c.width
	}
	return w
}

func (m *Model) sessionView() string {
	v := &m.session
	if !v.loaded {
		return "loading…"
	}
	s := v.sess
	// The session's state and counts stay whole; a long name gives way.
	rest := fmt.Sprintf("  %s  %s", m.st.state(string(s.State)), textfmt.Count(s.Effects, "effect"))
	if s.PendingApprovals > 0 {
		rest += "  " + m.st.badge.Render(fmt.Sprintf("● %d awaiting approval", s.PendingApprovals))
	}
	if v.filter != "" {
		rest += "  filter: " + esc(v.filter)
	}
	if v.page > 0 || v.next != 0 {
		rest += fmt.Sprintf("  page %d", v.page+1)
	}
	id := esc(s.ID)
	if room := m.width - ansi.StringWidth(rest); ansi.StringWidth(id) > room {
		id = ansi.Truncate(id, max(8, room), "…")
	}
	head := ansi.Truncate(m.st.title.Render(id)+rest, m.width, "…")
	var ids, tools, tiers, states, undos []string
	for _, e := range v.effects {
		entry := ""
		if u, ok := v.entries[e.ID]; ok {
			entry = string(u.State)
		}
		ids, tools, tiers = append(ids, itoa(e.ID)), append(tools, e.Tool), append(tiers, string(e.Tier))
		states, undos = append(states, textfmt.EffectStatus(string(e.State), entry, e.Error != "")), append(undos, textfmt.UndoStatus(string(e.State), entry))
	}
	inner := m.width - 2 // in a pane's borders
	cols := flexColumns([]column{{"ID", widest("ID", ids...), false}, {"TOOL", 0, false}, {"TIER", widest("TIER", tiers...), false},
		{"STATE", widest("STATE", states...), true}, {"AGE", 4, false}, {"RPL", 3, false}, {"UNDO", widest("UNDO", undos...), true}}, inner, widest("TOOL", tools...))
	table := []string{m.renderHeader(cols)}
	rows := m.tableRows()
	v.offset = scrolled(v.offset, v.cursor, rows)
	now := m.opts.Now()
	for i := v.offset; i < v.offset+rows; i++ {
		if i >= len(v.effects) {
			if i == 0 {
				table = append(table, m.st.dim.Render("no effects"))
			} else {
				table = append(table, "")
			}
			continue
		}
		e := v.effects[i]
		state, entry := string(e.State), ""
		if u, ok := v.entries[e.ID]; ok {
			entry = string(u.State)
		}
		table = append(table, m.renderRow(cols, []string{itoa(e.ID), e.Tool, string(e.Tier), textfmt.EffectStatus(state, entry, e.Error != ""),
			textfmt.Ago(now, e.CreatedAt), strconv.Itoa(e.ReplayCount), textfmt.UndoStatus(state, entry)},
			map[int]string{3: textfmt.StatusColor(state, entry), 6: entry}, i == v.cursor && !v.focusDetail))
	}
	out := []string{head, m.pane("effects", table, m.width, !v.focusDetail)}
	// The detail pane has what is left, if that holds a line: a viewport
	// over the selected effect's detail, which tab focuses to scroll.
	room := m.bodyHeight() - 1 - len(table) - 2 - 2
	if room < 1 {
		return strings.Join(out, "\n")
	}
	vp := &v.detailView
	vp.SetWidth(inner)
	vp.SetHeight(room)
	vp.SetContentLines(m.detailLines(inner))
	title := "detail"
	if d := v.detail; d != nil {
		title = "effect " + itoa(d.Effect.ID)
	}
	if n := vp.TotalLineCount(); n > room {
		title += fmt.Sprintf(" · lines %d-%d of %d", vp.YOffset()+1, min(n, vp.YOffset()+room), n)
		if v.focusDetail {
			title += " · ↑/↓ scroll, tab: the table"
		} else {
			title += " · tab, then ↑/↓ to scroll"
		}
	}
	out = append(out, m.pane(title, strings.Split(vp.View(), "\n"), m.width, v.focusDetail))
	return strings.Join(out, "\n")
}

// pane frames lines in a box w cells wide, its title in the top border. The
// focused pane's border is thick (so it shows without colour) and in the
// accent colour.
func (m *Model) pane(title string, lines []string, w int, focused bool) string {
	style := m.st.pane
	if focused {
		style = m.st.paneFocused
	}
	inner := max(1, w-2)
	for i, l := range lines {
		lines[i] = fit(l, inner)
	}
	b := style.GetBorderStyle()
	edge := lipgloss.NewStyle().Foreground(style.GetBorderTopForeground())
	if !m.st.color {
		edge = lipgloss.NewStyle()
	}
	label := " " + title + " "
	if focused {
		label = m.st.title.Render(label)
	}
	label = ansi.Truncate(label, max(0, inner-1), "…")
	top := edge.Render(b.TopLeft+b.Top) + label + edge.Render(strings.Repeat(b.Top, max(0, inner-1-ansi.StringWidth(label)))+b.TopRight)
	return top + "\n" + style.BorderTop(false).Width(w).Render(strings.Join(lines, "\n"))
}

// detailLines renders the selected effect: fields, args and result as pretty
// JSON, the approval, the undo entry and the history timeline.
func (m *Model) detailLines(width int) []string {
	d := m.session.detail
	if d == nil {
		return nil
	}
	e := d.Effect
	now := m.opts.Now()
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	entry := ""
	if d.Undo != nil {
		entry = string(d.Undo.State)
	}
	status := textfmt.EffectStatus(string(e.State), entry, e.Error != "")
	// A long tool name is cut, not the tier and state after it.
	rest := fmt.Sprintf("effect %d    %s  %s", e.ID, e.Tier, status)
	tool := esc(e.Tool)
	if tw := width - ansi.StringWidth(rest); ansi.StringWidth(tool) > tw {
		tool = ansi.Truncate(tool, max(1, tw), "…")
	}
	add("%s %d  %s  %s  %s", m.st.label.Render("effect"), e.ID, tool, e.Tier, m.st.paint(status, textfmt.StatusColor(string(e.State), entry)))
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
		line := textfmt.ApprovalWord(a.Outcome)
		switch {
		case a.DecidedAt != nil:
			line += fmt.Sprintf(" by %s %s ago", a.DecidedBy, textfmt.Ago(now, *a.DecidedAt))
			if a.Decision != "" {
				line += ": " + a.Decision
			}
		case a.ExpiresAt != nil:
			line += ", expires in " + textfmt.Remaining(a.ExpiresAt.Sub(now))
		}
		add("%s %s", m.st.label.Render("approval:"), esc(line))
	}
	if u := d.Undo; u != nil {
		// Labelled: a bare "true" reads as a flag, not the command it is.
		line := textfmt.UndoStatus(string(e.State), string(u.State)) + " · runs: " + saga.Shorten(saga.DescribeCall(u.Compensation)) // "mcp TOOL ARGS" names its kind
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
	// What happened in plain words, the undo entry's rows told apart from
	// the effect's (the spec's triggers stay in JSON, the commands').
	for _, r := range d.History {
		of := "effect"
		if r.Kind == model.KindUndo {
			of = "undo entry"
		}
		what := textfmt.HistoryWords(textfmt.Record{Kind: r.Kind, From: r.From, To: r.To, Trigger: r.Trigger, Actor: r.Who()})
		line := fmt.Sprintf("  %2d %s %-10s %s", r.Seq, r.At.In(m.opts.Location).Format(historyTime), of, what)
		if r.Reason != "" {
			line += " (" + r.Reason + ")"
		}
		if r.Error != "" {
			line += " error: " + r.Error
		}
		out = append(out, esc(line))
	}
	// Wrapped, never cut: an approver reads all of what they approve.
	return wrapLines(out, width)
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
	return m.fitBox(lines)
}

// fitBox is lines in a dialog box as wide as they need, or as the screen
// when they need more (they wrap then, at spaces where they have some).
func (m *Model) fitBox(lines []string) string {
	box := m.st.box.Render(strings.Join(lines, "\n"))
	if lipgloss.Width(box) <= m.width {
		return box
	}
	return m.st.boxWidth(max(1, m.width-2)).Render(strings.Join(lines, "\n"))
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
			lines = append(lines, escf("   -  effect %d %s: %s", e.ID, e.Tool, s.DoneWords()))
		case saga.ActionSkip:
			n++
			lines = append(lines, escf("  %2d. effect %d %s: %s", n, e.ID, e.Tool, s.NothingToUndo()))
		case saga.ActionBlocked:
			n++
			lines = append(lines, escf("  %2d. effect %d %s: BLOCKED, resolve it first", n, e.ID, e.Tool))
		default:
			n++
			lines = append(lines, escf("  %2d. effect %d %s (%s): %s%s", n, e.ID, e.Tool, e.State, saga.Shorten(s.Call), p.Where(s)))
		}
		if s.Note != "" {
			lines = append(lines, escf("      NOTE: %s", s.Note))
		}
		if s.Problem != "" && s.Action != saga.ActionDone {
			lines = append(lines, m.st.errText.Render(escf("      WILL FAIL: %s", s.Problem)))
		}
	}
	if len(p.Steps) == 0 {
		lines = append(lines, "  (nothing to undo)")
	}
	for _, e := range p.NotUndoable {
		lines = append(lines, escf("  not undoable: effect %d %s (irreversible, %s)", e.ID, e.Tool, e.State))
	}
	if err := p.Waits(); err != nil {
		lines = append(lines, m.st.errText.Render(escf("  IN PROGRESS: %v", err)))
	}
	question := escf("Undo %s of session %s? (y/n)", textfmt.Count(p.Work(), "step"), p.Session)
	if p.Work() == 0 {
		question = escf("Nothing to undo: mark session %s undone? (y/n)", p.Session)
	}
	lines = append(lines, "", m.st.title.Render(question))
	return m.st.boxWidth(min(m.width-2, 100)).Render(strings.Join(lines, "\n"))
}

// historyTime is how history dates its rows: a log outlives a day, and its
// writers may sit in other zones.
const historyTime = "2006-01-02 15:04:05 MST"

func (m *Model) undoView() string {
	title := fmt.Sprintf("Undoing session %s…", esc(m.undo.session))
	switch {
	case m.undo.done && m.undo.failed:
		title = fmt.Sprintf("Undo of session %s stopped", esc(m.undo.session))
	case m.undo.done:
		title = fmt.Sprintf("Undo of session %s finished", esc(m.undo.session))
	}
	lines := []string{m.st.title.Render(title), ""}
	for _, l := range m.undo.lines {
		lines = append(lines, esc(l))
	}
	if m.undo.done {
		lines = append(lines, "", m.st.dim.Render("press any key"))
	}
	return m.st.boxWidth(min(m.width-2, 100)).Render(strings.Join(lines, "\n"))
}
