package tui

import (
	"strings"
	"testing"
)

// The sessions list at 80x24, with and without colour, shows on each
// session's row its name, its state, its counts in words whole and its
// waiting badge (issue 33: BY STATE was cut at 80 columns); EFFECTS and AGE
// give way first.
func TestSessionsRowsShowWhatAPersonNeedsAt80x24(t *testing.T) {
	rows := map[string][]string{
		"ci-nightly-88":     {"completed", "3 committed, 3 replayed"},
		"agent-ops-3":       {"halted", "1 committed, 1 rejected"},
		"agent-cleanup-7":   {"halted", "1 undo failed"},
		"ci-deploy-117":     {"halted", "3 committed, 1 undone"},
		"agent-research-42": {"awaiting_approval", "1 pending, 2 committed, 1 replayed", "●1"},
	}
	eachLayout(t, func(t *testing.T, l layout) {
		tm := startAt(t, demoStore(t), "", l)
		waitFor(t, tm, "agent-research-42")
		lines := frame(t, tm, l)
		for name, cells := range rows {
			var row string
			for _, line := range lines {
				if strings.Contains(line, " "+name+" ") && !strings.Contains(line, "session "+name) {
					row = line
					break
				}
			}
			at := 0
			for _, cell := range append([]string{name}, cells...) {
				i := strings.Index(row[at:], " "+cell)
				if i < 0 {
					t.Fatalf("%s's row lacks %q (in its order):\n%s", name, cell, strings.Join(lines, "\n"))
				}
				at += i + len(cell) + 1
			}
		}
	})
}
