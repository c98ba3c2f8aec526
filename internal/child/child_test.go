package child

import (
	"os/exec"
	"testing"
)

// Prepare runs what BeforeStart set, for every command.
func TestPrepareRunsBeforeStart(t *testing.T) {
	defer beforeStart.Store(nil)
	calls := 0
	BeforeStart(func() { calls++ })
	Prepare(exec.Command("true"))
	Prepare(exec.Command("true"))
	if calls != 2 {
		t.Fatalf("BeforeStart's function ran %d times for 2 commands", calls)
	}
}
