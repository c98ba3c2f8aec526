package tui

import (
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/undolog/undolog/internal/textfmt"
)

// input is the one-line text field of the reason and filter dialogs:
// bubbles' textinput (its keys move the cursor and edit around it), shown
// with the terminal's own cursor, which NO_COLOR leaves visible.
type input struct{ field textinput.Model }

func newInput(placeholder string, st styles, width int) input {
	f := textinput.New()
	f.Placeholder = placeholder
	f.CharLimit = 500 // in runes
	f.SetVirtualCursor(false)
	f.SetStyles(st.input)
	// The terminal's paste arrives as a PasteMsg, filtered by update;
	// ctrl+v would read the system clipboard by running xclip or the like,
	// past that filter.
	f.KeyMap.Paste.SetEnabled(false)
	f.Focus()
	in := input{field: f}
	in.setWidth(width)
	return in
}

func (in *input) Value() string { return in.field.Value() }

// setWidth makes the field width cells wide, its prompt and the cursor's
// cell after the text included: longer text scrolls in it.
func (in *input) setWidth(width int) {
	in.field.SetWidth(max(1, width-len(in.field.Prompt)-1))
	in.field.SetCursor(in.field.Position()) // scrolled to the cursor in the new width
}

// update takes a key or a paste. Text typed with shift or a lock key goes
// in; with ctrl, alt and the like it is a command, not text: a key the field
// has no binding for then types nothing. Tabs and line breaks become spaces;
// other characters that stored text shows escaped (textfmt.Unsafe: controls,
// bidirectional marks, invisible ones) go, so that the field shows what it
// holds.
func (in *input) update(msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case tea.KeyPressMsg:
		if m.Mod&(tea.ModCtrl|tea.ModAlt|tea.ModMeta|tea.ModSuper|tea.ModHyper) != 0 {
			m.Text = ""
		}
		m.Text = typable(m.Text)
		msg = m
	case tea.PasteMsg:
		m.Content = typable(m.Content)
		msg = m
	}
	var cmd tea.Cmd
	in.field, cmd = in.field.Update(msg)
	return cmd
}

func typable(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\t' && r != '\n' && r != '\r' && textfmt.Unsafe(r) {
			return -1
		}
		return r
	}, s)
}

// view is the prompt and the text, or the placeholder, and the cursor's
// place in that line.
func (in *input) view() (string, *tea.Cursor) {
	return in.field.View(), in.field.Cursor()
}
