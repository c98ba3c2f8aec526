package textfmt

import (
	"image/color"

	"github.com/charmbracelet/x/ansi"
)

// stateColors is the one palette of states, the commands' and the view's:
// the terminal's own eight colours (lipgloss v2's 4-bit colours are these),
// which every colour terminal shows and its theme keeps readable. A state
// that is over and needs nothing (replayed, skipped) is grey.
var stateColors = map[string]ansi.BasicColor{
	"pending": ansi.Yellow, "executing": ansi.Cyan, "committed": ansi.Green, "compensating": ansi.Magenta,
	"compensated": ansi.Blue, "compensation_failed": ansi.Red, "approved": ansi.Green, "rejected": ansi.Red,
	"replayed": ansi.BrightBlack, "skipped": ansi.BrightBlack, "resolved": ansi.Blue,
	"active": ansi.Cyan, "awaiting_approval": ansi.Yellow, "completed": ansi.Green, "failed": ansi.Red,
	"halted": ansi.Red,
}

// StateColor is the colour state (an effect's, an undo entry's, an
// approval's or a session's) is shown in; nil for one shown plain.
func StateColor(state string) color.Color {
	if c, ok := stateColors[state]; ok {
		return c
	}
	return nil
}

// Paint is text in the foreground colour c, reset after it; text as it is
// for no colour (nil). It adds escape sequences: text is what Escape made
// safe, or a fixed word.
func Paint(text string, c color.Color) string {
	if c == nil || text == "" {
		return text
	}
	return ansi.NewStyle().ForegroundColor(c).Styled(text)
}

// PaintState is state in its colour.
func PaintState(state string) string { return Paint(state, StateColor(state)) }
