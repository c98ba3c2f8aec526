package main

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// What freeze cannot draw arrives as colours: reverse video swaps the
// theme's foreground and background, faint text is mixed halfway to the
// background, a basic colour is the theme's, a colour goes on from one line
// to the next as on the terminal, and the text stays as it was.
func TestCaptureSaysItsColoursOutright(t *testing.T) {
	capture := "a\x1b[7mREV\x1b[0m \x1b[2mfaint\x1b[0m \x1b[31mred\x1b[49m 世界x\n\n\x1b[1;7mbold\x1b[m \x1b[32mgreen\nstill"
	for _, c := range []struct {
		theme           string
		plain, rev, dim string
		red, still      string
	}{
		{"light", "\x1b[0;38;2;31;31;31ma", "\x1b[0;38;2;255;255;255;48;2;31;31;31mREV", "\x1b[0;38;2;143;143;143mfaint", "\x1b[0;38;2;201;27;0mred", "\x1b[0;38;2;0;166;0mstill"},
		{"dark", "\x1b[0;38;2;208;208;208ma", "\x1b[0;38;2;28;28;28;48;2;208;208;208mREV", "\x1b[0;38;2;118;118;118mfaint", "\x1b[0;38;2;204;0;0mred", "\x1b[0;38;2;78;154;6mstill"},
	} {
		out := themes[c.theme].flatten(capture)
		for _, want := range []string{c.plain, c.rev, c.dim, c.red, c.still} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: %q lacks %q", c.theme, out, want)
			}
		}
		if got := ansi.Strip(out); got != ansi.Strip(capture)+"\n" {
			t.Errorf("%s: text %q, want %q", c.theme, got, ansi.Strip(capture))
		}
		for _, attr := range []string{"[7m", "[2m", "[1;", ";7m", "[31m"} {
			if strings.Contains(out, attr) {
				t.Errorf("%s: %q keeps an attribute freeze ignores (%q)", c.theme, out, attr)
			}
		}
	}
}
