package cmd

import (
	"os"
	"strings"
	"testing"

	"github.com/undolog/undolog/internal/testbin"
)

// On a terminal, help is wrapped at the terminal's width, whatever $COLUMNS
// says (a shell exports it at the size it last saw).
func TestHelpWrapsAtTheTerminalsWidth(t *testing.T) {
	bin := testbin.Undolog(t)
	const width = 52
	text := runOnTerminal(t, width, append(os.Environ(), "COLUMNS=200", "NO_COLOR=1"), bin, "undo", "--help")
	long, _, ok := strings.Cut(text, "\nUsage:")
	if !ok {
		t.Fatalf("no usage in the help:\n%s", text)
	}
	lines := strings.Split(long, "\n")
	full := 0
	for _, l := range lines {
		if len(l) > width {
			t.Errorf("a line of %d columns on a %d-column terminal: %q", len(l), width, l)
		}
		if len(l) > width-12 {
			full++
		}
	}
	// Filled, not just short: most prose lines come near the width.
	if full < len(lines)/2 {
		t.Errorf("only %d of %d lines fill the %d columns:\n%s", full, len(lines), width, long)
	}
}
