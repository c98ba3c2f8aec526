package tui

import (
	"image/color"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// The dialogs' input takes what a person types and pastes, and takes it
// back with backspace, ctrl+w and ctrl+u; a paste's tabs and line breaks
// become spaces and its other controls go.
func TestInputTypesPastesAndDeletes(t *testing.T) {
	in := newInput("optional")
	for _, r := range "ok by me" {
		in.update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	in.update(tea.KeyPressMsg{Code: 'x', Text: "X", Mod: tea.ModCapsLock})
	in.update(tea.KeyPressMsg{Code: tea.KeyBackspace})
	in.update(tea.KeyPressMsg{Code: tea.KeyBackspace})
	if got := in.Value(); got != "ok by m" {
		t.Fatalf("typed and backspaced: %q", got)
	}
	in.update(tea.KeyPressMsg{Code: 'w', Mod: tea.ModCtrl})
	if got := in.Value(); got != "ok by " {
		t.Fatalf("ctrl+w: %q", got)
	}
	in.update(tea.PasteMsg{Content: "line\tone\nline two\x1b[2J\x07"})
	if got := in.Value(); got != "ok by line one line two[2J" {
		t.Fatalf("pasted: %q", got)
	}
	// A ctrl or alt key types nothing.
	in.update(tea.KeyPressMsg{Code: 'a', Text: "a", Mod: tea.ModAlt})
	in.update(tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl})
	if got := in.Value(); got != "" {
		t.Fatalf("ctrl+u: %q", got)
	}
	in.update(tea.PasteMsg{Content: strings.Repeat("x", 600)})
	if got := in.Value(); len(got) != 500 {
		t.Fatalf("the limit: %d runes", len(got))
	}
}

// Without colour the input is text alone: the prompt, the placeholder, the
// value escaped.
func TestInputViewWithoutColour(t *testing.T) {
	st := newStyles(false)
	in := newInput("optional")
	if got := in.view(st); got != "> optional" {
		t.Fatalf("empty: %q", got)
	}
	in.update(tea.PasteMsg{Content: "a\u202eb"})
	if got := in.view(st); got != `> a\u202eb ` {
		t.Fatalf("with a bidi mark: %q", got)
	}
}

// The footer's colours follow the background the terminal reports (the
// view asks in Init, with colour only); without colour it has none.
func TestFooterFollowsTheBackground(t *testing.T) {
	m := New(t.Context(), Options{Color: true})
	dark := m.footer()
	m.Update(tea.BackgroundColorMsg{Color: color.White})
	light := m.footer()
	if dark == light || ansi.Strip(dark) != ansi.Strip(light) {
		t.Fatalf("dark %q, light %q", dark, light)
	}
	plain := New(t.Context(), Options{})
	plain.Update(tea.BackgroundColorMsg{Color: color.White})
	if f := plain.footer(); strings.ContainsRune(f, 0x1b) {
		t.Fatalf("no colour, yet %q", f)
	}
}

// A box wraps a long line inside its width; a style the wrap cuts is closed
// before the border and opened again on the next line, so the border is
// never coloured.
func TestBoxWrapsAndKeepsItsBorderPlain(t *testing.T) {
	st := newStyles(true)
	out := st.boxWidth(14).Render(st.errText.Render("WILL FAIL: no such tool") + "\nok")
	lines := strings.Split(out, "\n")
	want := []string{"┌──────────────┐", "│ WILL FAIL:   │", "│ no such tool │", "│ ok           │", "└──────────────┘"}
	for i, l := range lines {
		if i >= len(want) || ansi.Strip(l) != want[i] {
			t.Fatalf("box:\n%s", ansi.Strip(out))
		}
		if j := strings.LastIndex(l, "\x1b["); j >= 0 && !strings.HasPrefix(l[j:], "\x1b[m") {
			t.Fatalf("line %d leaves its style open into the border: %q", i, l)
		}
	}
	if len(lines) != len(want) || !strings.HasPrefix(lines[2], "│ \x1b[") {
		t.Fatalf("the style does not go on after the wrap: %q", lines)
	}
}
