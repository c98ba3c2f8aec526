package tui

import (
	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// styles holds every style of the view, declared here once. Without colour
// (NO_COLOR, or no colour terminal) every style is plain: attributes go too,
// as colours do, so the screen is text alone (a box keeps its border, which
// is text). The program's renderer brings the colours down to what the
// terminal shows (Run detects that, when the view starts).
type styles struct {
	color    bool
	title    lipgloss.Style
	selected lipgloss.Style
	dim      lipgloss.Style
	status   lipgloss.Style
	errText  lipgloss.Style
	badge    lipgloss.Style
	label    lipgloss.Style
	// box is a dialog's: a thin border, one cell of padding either side.
	box    lipgloss.Style
	input  textinput.Styles
	states map[string]lipgloss.Style
}

func newStyles(color bool) styles {
	plain := lipgloss.NewStyle()
	s := func(st lipgloss.Style) lipgloss.Style {
		if !color {
			return plain
		}
		return st
	}
	c := func(ansi string) lipgloss.Style { return s(plain.Foreground(lipgloss.Color(ansi))) }
	dim := s(plain.Faint(true))
	return styles{
		color:    color,
		title:    s(plain.Bold(true)),
		selected: s(plain.Reverse(true)),
		dim:      dim,
		status:   plain,
		errText:  s(plain.Bold(true).Foreground(lipgloss.Color("9"))),
		badge:    s(plain.Bold(true).Foreground(lipgloss.Color("11"))),
		label:    s(plain.Bold(true)),
		box:      plain.Border(lipgloss.NormalBorder()).Padding(0, 1),
		// The terminal's own cursor marks the input's place (see
		// input.view), in the terminal's colour: nothing to style but the
		// placeholder.
		input: textinput.Styles{
			Focused: textinput.StyleState{Placeholder: dim},
			Cursor:  textinput.CursorStyle{Shape: tea.CursorBlock},
		},
		states: map[string]lipgloss.Style{
			"pending": c("11"), "executing": c("14"), "committed": c("10"), "compensating": c("13"),
			"compensated": c("12"), "compensation_failed": c("9"), "approved": c("10"), "rejected": c("9"),
			"replayed": dim, "skipped": dim, "resolved": c("12"),
			"active": c("14"), "awaiting_approval": c("11"), "completed": c("10"), "failed": c("9"), "halted": c("9"),
		},
	}
}

// state renders a state name in its colour.
func (s styles) state(name string) string {
	if st, ok := s.states[name]; ok {
		return st.Render(name)
	}
	return name
}

// boxWidth is the dialog box w cells wide inside its border: longer lines
// wrap, at spaces where they have some.
func (s styles) boxWidth(w int) lipgloss.Style { return s.box.Width(w + 2) }

// helpStyles are the footer's and the help screen's: bubbles' own for a dark
// or a light background; none without colour.
func helpStyles(color, dark bool) help.Styles {
	if !color {
		return help.Styles{}
	}
	return help.DefaultStyles(dark)
}
