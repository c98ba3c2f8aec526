package tui

import (
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// styles holds every style of the view, made from one renderer so that
// NO_COLOR (and the tests' ASCII profile) apply everywhere.
type styles struct {
	title    lipgloss.Style
	header   lipgloss.Style
	selected lipgloss.Style
	dim      lipgloss.Style
	status   lipgloss.Style
	errText  lipgloss.Style
	badge    lipgloss.Style
	box      lipgloss.Style
	label    lipgloss.Style
	states   map[string]lipgloss.Style
}

func newStyles(r *lipgloss.Renderer, color bool) styles {
	if !color {
		r.SetColorProfile(termenv.Ascii)
	}
	c := func(s string) lipgloss.Style { return r.NewStyle().Foreground(lipgloss.Color(s)) }
	st := styles{
		title:    r.NewStyle().Bold(true),
		header:   r.NewStyle().Bold(true).Underline(true),
		selected: r.NewStyle().Reverse(true),
		dim:      r.NewStyle().Faint(true),
		status:   r.NewStyle(),
		errText:  c("9").Bold(true),
		badge:    c("11").Bold(true),
		box:      r.NewStyle().Border(lipgloss.NormalBorder()).Padding(0, 1),
		label:    r.NewStyle().Bold(true),
		states: map[string]lipgloss.Style{
			"pending": c("11"), "executing": c("14"), "committed": c("10"), "compensating": c("13"),
			"compensated": c("12"), "compensation_failed": c("9"), "approved": c("10"), "rejected": c("9"),
			"replayed": r.NewStyle().Faint(true), "skipped": r.NewStyle().Faint(true), "resolved": c("12"),
			"active": c("14"), "awaiting_approval": c("11"), "completed": c("10"), "failed": c("9"), "halted": c("9"),
		},
	}
	return st
}

// state renders a state name in its colour.
func (s styles) state(name string) string {
	if st, ok := s.states[name]; ok {
		return st.Render(name)
	}
	return name
}
