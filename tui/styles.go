package tui

import (
	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"
)

// styles holds every style of the view. Without colour (NO_COLOR, or no
// colour terminal) every style is plain: attributes go too, as colours do,
// so the screen is text alone. With colour, the styles write what they ask
// for and the program's renderer brings it down to what the terminal shows.
type styles struct {
	color    bool
	title    lipgloss.Style
	header   lipgloss.Style
	selected lipgloss.Style
	dim      lipgloss.Style
	status   lipgloss.Style
	errText  lipgloss.Style
	badge    lipgloss.Style
	box      lipgloss.Style
	label    lipgloss.Style
	cursor   lipgloss.Style // the text input's cursor
	states   map[string]lipgloss.Style
}

func newStyles(color bool) styles {
	plain := lipgloss.NewStyle()
	s := func(st lipgloss.Style) lipgloss.Style {
		if !color {
			return plain
		}
		return st
	}
	c := func(name string) lipgloss.Style { return s(plain.Foreground(lipgloss.Color(name))) }
	st := styles{
		color:    color,
		title:    s(plain.Bold(true)),
		header:   s(plain.Bold(true).Underline(true)),
		selected: s(plain.Reverse(true)),
		dim:      s(plain.Faint(true)),
		status:   plain,
		errText:  s(plain.Foreground(lipgloss.Color("9")).Bold(true)),
		badge:    s(plain.Foreground(lipgloss.Color("11")).Bold(true)),
		// A border is text, not a style: it stays without colour.
		box:    plain.Border(lipgloss.NormalBorder()).Padding(0, 1),
		label:  s(plain.Bold(true)),
		cursor: s(plain.Reverse(true)),
		states: map[string]lipgloss.Style{
			"pending": c("11"), "executing": c("14"), "committed": c("10"), "compensating": c("13"),
			"compensated": c("12"), "compensation_failed": c("9"), "approved": c("10"), "rejected": c("9"),
			"replayed": s(plain.Faint(true)), "skipped": s(plain.Faint(true)), "resolved": c("12"),
			"active": c("14"), "awaiting_approval": c("11"), "completed": c("10"), "failed": c("9"), "halted": c("9"),
		},
	}
	return st
}

// helpStyles are the footer's and help screen's: bubbles' own for a dark or
// a light background, or none without colour.
func helpStyles(color, dark bool) help.Styles {
	if !color {
		return help.Styles{}
	}
	return help.DefaultStyles(dark)
}

// state renders a state name in its colour.
func (s styles) state(name string) string {
	if st, ok := s.states[name]; ok {
		return st.Render(name)
	}
	return name
}

// boxWidth is the box w cells wide inside its border (lipgloss v2 counts
// the border in a width; v1 did not).
func (s styles) boxWidth(w int) lipgloss.Style {
	return s.box.Width(w + s.box.GetHorizontalBorderSize())
}
