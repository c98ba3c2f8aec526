package tui

import (
	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/undolog/undolog/internal/textfmt"
)

// styles holds every style of the view, declared here once. Without colour
// (NO_COLOR, or no colour terminal) every style is plain: attributes go too,
// as colours do, so the screen is text alone (a box keeps its border, which
// is text). The program's renderer brings the colours down to what the
// terminal shows (Run detects that, when the view starts).
type styles struct {
	color    bool
	title    lipgloss.Style
	header   lipgloss.Style // the title bar: the view's name on the accent colour
	selected lipgloss.Style
	dim      lipgloss.Style
	status   lipgloss.Style
	errText  lipgloss.Style
	badge    lipgloss.Style
	label    lipgloss.Style
	// box is a dialog's: a thin border, one cell of padding either side.
	box lipgloss.Style
	// pane frames a part of a screen; paneFocused the one the keys move.
	pane, paneFocused lipgloss.Style
	input             textinput.Styles
}

// newStyles are the styles for a dark background, or a light one: the
// program learns which once it starts (Init asks the terminal; until it
// answers, dark).
func newStyles(color, dark bool) styles {
	plain := lipgloss.NewStyle()
	pick := lipgloss.LightDark(dark)
	accent := pick(lipgloss.Color("#5A4FCF"), lipgloss.Color("#8C85F5"))
	s := func(st lipgloss.Style) lipgloss.Style {
		if !color {
			return plain
		}
		return st
	}
	dim := s(plain.Faint(true))
	return styles{
		color:       color,
		title:       s(plain.Bold(true)),
		header:      s(plain.Bold(true).Foreground(lipgloss.Color("#FFFFFF")).Background(accent)),
		selected:    s(plain.Reverse(true)),
		dim:         dim,
		status:      plain,
		errText:     s(plain.Bold(true).Foreground(lipgloss.Color("9"))),
		badge:       s(plain.Bold(true).Foreground(pick(lipgloss.Color("#9A6700"), lipgloss.Color("11")))),
		label:       s(plain.Bold(true)),
		box:         plain.Border(lipgloss.NormalBorder()).Padding(0, 1),
		pane:        s(plain.BorderForeground(lipgloss.Color("8"))).Border(lipgloss.RoundedBorder()),
		paneFocused: s(plain.BorderForeground(accent)).Border(lipgloss.ThickBorder()),
		// The terminal's own cursor marks the input's place (see
		// input.view), in the terminal's colour: nothing to style but the
		// placeholder.
		input: textinput.Styles{
			Focused: textinput.StyleState{Placeholder: dim},
			Cursor:  textinput.CursorStyle{Shape: tea.CursorBlock},
		},
	}
}

// state renders a state name in its colour, from the palette the commands
// use too.
func (s styles) state(name string) string { return s.paint(name, name) }

// paint renders text in the colour of the state named tint.
func (s styles) paint(text, tint string) string {
	if c := textfmt.StateColor(tint); c != nil && s.color {
		return lipgloss.NewStyle().Foreground(c).Render(text)
	}
	return text
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
