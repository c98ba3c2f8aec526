package tui

import (
	"strings"
	"unicode"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"
)

// input is the one-line text field of the reason and filter dialogs: typing
// and pasting add at the end, backspace takes the last character back,
// ctrl+w the last word, ctrl+u all. (bubbles' textinput would link a
// clipboard package whose init reads every directory of PATH, into every
// command.)
type input struct {
	prompt      string
	placeholder string
	limit       int // in runes
	value       []rune
}

func newInput(placeholder string) input {
	return input{prompt: "> ", placeholder: placeholder, limit: 500}
}

func (in *input) Value() string { return string(in.value) }

// insert adds s at the end: tabs and line breaks become spaces and other
// controls go, as far as the limit allows.
func (in *input) insert(s string) {
	for _, r := range s {
		if len(in.value) >= in.limit {
			return
		}
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			r = ' '
		case unicode.IsControl(r) || r == utf8.RuneError:
			continue
		}
		in.value = append(in.value, r)
	}
}

// update takes a key or a paste; it reports whether it used it.
func (in *input) update(msg tea.Msg) bool {
	switch msg := msg.(type) {
	case tea.PasteMsg:
		in.insert(msg.Content)
		return true
	case tea.KeyPressMsg:
		switch msg.String() {
		case "backspace", "ctrl+h":
			if n := len(in.value); n > 0 {
				in.value = in.value[:n-1]
			}
			return true
		case "ctrl+w", "alt+backspace":
			v := strings.TrimRightFunc(string(in.value), unicode.IsSpace)
			i := strings.LastIndexFunc(v, unicode.IsSpace)
			in.value = []rune(v[:i+1])
			return true
		case "ctrl+u":
			in.value = nil
			return true
		}
		// Text typed with shift or a lock key goes in; with ctrl, alt and
		// the like it is a command, not text.
		if msg.Text != "" && msg.Mod&(tea.ModCtrl|tea.ModAlt|tea.ModMeta|tea.ModSuper|tea.ModHyper) == 0 {
			in.insert(msg.Text)
			return true
		}
	}
	return false
}

// view is the prompt, the text and the cursor after it; empty, the
// placeholder with the cursor on its first character.
func (in *input) view(st styles) string {
	if len(in.value) == 0 && in.placeholder != "" {
		first, size := utf8.DecodeRuneInString(in.placeholder)
		return in.prompt + st.cursor.Render(string(first)) + st.dim.Render(in.placeholder[size:])
	}
	return in.prompt + esc(string(in.value)) + st.cursor.Render(" ")
}
