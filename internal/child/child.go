// Package child sets up the commands undolog runs for a person or an agent
// (exec's command, undo's compensation commands, MCP servers) before they
// start: they do not outlive undolog (a command left running after its
// undolog was killed would run again, concurrently, under the next
// --retry-in-doubt), and they start with undolog's signal handlers in place.
package child

import (
	"os/exec"
	"sync/atomic"
)

var beforeStart atomic.Pointer[func()]

// BeforeStart sets what Prepare runs first. The command line puts its
// signal handlers in place there: it ignores Ctrl-Z until it has them, and
// a command started meanwhile would inherit the ignoring and could not be
// stopped.
func BeforeStart(fn func()) { beforeStart.Store(&fn) }

// Prepare sets cmd up to be started: what BeforeStart set runs, and cmd
// dies with undolog where the system allows (dieWithParent).
func Prepare(cmd *exec.Cmd) {
	if fn := beforeStart.Load(); fn != nil {
		(*fn)()
	}
	dieWithParent(cmd)
}
