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
// become spaces and its other controls go, as do bidirectional marks and
// invisible characters: the field shows what it holds.
func TestInputTypesPastesAndDeletes(t *testing.T) {
	in := newInput("optional", newStyles(false, true), 40)
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
	in.update(tea.PasteMsg{Content: "line\tone\nline two\x1b[2J\x07\u202e\u200b"})
	if got := in.Value(); got != "ok by line one line two[2J" {
		t.Fatalf("pasted: %q", got)
	}
	// A ctrl or alt key types nothing.
	in.update(tea.KeyPressMsg{Code: 'a', Text: "a", Mod: tea.ModAlt})
	// ctrl+v reads no clipboard: a paste comes from the terminal.
	if cmd := in.update(tea.KeyPressMsg{Code: 'v', Mod: tea.ModCtrl}); cmd != nil {
		t.Fatal("ctrl+v returned a command")
	}
	in.update(tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl})
	if got := in.Value(); got != "" {
		t.Fatalf("ctrl+u: %q", got)
	}
	in.update(tea.PasteMsg{Content: strings.Repeat("x", 600)})
	if got := in.Value(); len(got) != 500 {
		t.Fatalf("the limit: %d runes", len(got))
	}
}

// Without colour the input is text alone: the prompt, then the placeholder
// or the value, as wide as the dialog gives it; the terminal's cursor stands
// after the text.
func TestInputViewWithoutColour(t *testing.T) {
	in := newInput("optional", newStyles(false, true), 20)
	if got, cursor := in.view(); got != "> optional          " || cursor == nil || cursor.X != 2 {
		t.Fatalf("empty: %q, cursor %+v", got, cursor)
	}
	in.update(tea.PasteMsg{Content: "a\u202eb"})
	if got, cursor := in.view(); got != "> ab                " || cursor.X != len("> ab") {
		t.Fatalf("with a bidi mark pasted: %q, cursor at %d", got, cursor.X)
	}
}

// The cursor moves in the text: a character typed goes where it stands,
// and the terminal's cursor is shown there. Text longer than the field
// scrolls in it, on one line.
func TestInputEditsMidText(t *testing.T) {
	in := newInput("optional", newStyles(false, true), 40)
	for _, r := range "ok by me" {
		in.update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	in.update(tea.KeyPressMsg{Code: tea.KeyLeft})
	in.update(tea.KeyPressMsg{Code: tea.KeyLeft})
	in.update(tea.KeyPressMsg{Code: 'X', Text: "X", Mod: tea.ModShift})
	if got := in.Value(); got != "ok by Xme" {
		t.Fatalf("typed mid-text: %q", got)
	}
	if _, cursor := in.view(); cursor == nil || cursor.X != len("> ok by X") {
		t.Fatalf("cursor %+v, want it after the X", cursor)
	}
	in.update(tea.KeyPressMsg{Code: 'a', Mod: tea.ModCtrl}) // to the start
	in.update(tea.PasteMsg{Content: "yes, "})
	if got := in.Value(); got != "yes, ok by Xme" {
		t.Fatalf("pasted at the start: %q", got)
	}
	in.update(tea.PasteMsg{Content: strings.Repeat("y", 100)})
	in.setWidth(30)
	if view, cursor := in.view(); ansi.StringWidth(view) != 30 || cursor.X >= 30 {
		t.Fatalf("%q is %d cells wide, want 30 (cursor at %d)", view, ansi.StringWidth(view), cursor.X)
	}
}

// The footer's colours follow the background the terminal reports (the
// view asks in Init, with colour only); without colour it has none.
func TestFooterFollowsTheBackground(t *testing.T) {
	m := New(t.Context(), Options{Color: true})
	dark, darkPane := m.footer(), m.pane("effects", []string{"x"}, 20, true)+m.titleLine()
	m.Update(tea.BackgroundColorMsg{Color: color.White})
	light, lightPane := m.footer(), m.pane("effects", []string{"x"}, 20, true)+m.titleLine()
	if dark == light || ansi.Strip(dark) != ansi.Strip(light) {
		t.Fatalf("dark %q, light %q", dark, light)
	}
	// The accent (the focused pane's border, the title bar) too.
	if darkPane == lightPane || ansi.Strip(darkPane) != ansi.Strip(lightPane) {
		t.Fatalf("dark %q, light %q", darkPane, lightPane)
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
	st := newStyles(true, true)
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

// In a dialog the terminal's cursor stands on the screen where the input's
// cursor is: on the character it was moved back to.
func TestDialogCursorStandsInTheInput(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 45}, {40, 16}} {
		m := New(t.Context(), Options{Width: size[0], Height: size[1]})
		m.openPrompt("Approve effect 4 (send_email)?", false, []byte(`{"to":"cfo@example.com","subject":"Q3"}`), nil)
		typeThenBack(m, "not to the cfo", 3)
		requireCursorOn(t, m, "> not to the ", "c")
		m.overlay = overlayNone
		m.openFilter()
		typeThenBack(m, "deploy", 2)
		requireCursorOn(t, m, "/ depl", "o")
	}
}

func typeThenBack(m *Model, text string, back int) {
	for _, r := range text {
		m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	for range back {
		m.Update(tea.KeyPressMsg{Code: tea.KeyLeft})
	}
}

// requireCursorOn fails unless the view's cursor stands on cell, after
// before on its line.
func requireCursorOn(t *testing.T, m *Model, before, cell string) {
	t.Helper()
	v := m.View()
	lines := strings.Split(ansi.Strip(v.Content), "\n")
	if v.Cursor == nil || v.Cursor.Y >= len(lines) {
		t.Fatalf("%dx%d: cursor %+v on a screen of %d lines", m.width, m.height, v.Cursor, len(lines))
	}
	x, line := v.Cursor.X, lines[v.Cursor.Y]
	if got := ansi.Cut(line, x-len(before), x+1); got != before+cell {
		t.Fatalf("%dx%d: the cursor (%d,%d) is at %q of %q, want %q", m.width, m.height, x, v.Cursor.Y, got, line, before+cell)
	}
}
