package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// The effect detail labels the undo's command: a bare "true" beside "not
// undone" reads as a flag, not as what undo runs.
func TestTheDetailLabelsTheUndoCommand(t *testing.T) {
	m := opened(t, demoStore(t), "ci-deploy-117")
	selectEffect(t, m, 5)
	screen := ansi.Strip(m.render())
	if !strings.Contains(screen, "undo: not undone · runs: true") {
		t.Errorf("effect 5's undo line is not labelled:\n%s", screen)
	}
}
