// Package child sets up the commands undolog runs for a person or an agent
// (exec's command, undo's compensation commands, MCP servers) before they
// start: they do not outlive undolog (a command left running after its
// undolog was killed would run again, concurrently, under the next
// --retry-in-doubt).
package child

import "os/exec"

// Prepare sets cmd up to be started: it dies with undolog where the system
// allows (dieWithParent).
func Prepare(cmd *exec.Cmd) { dieWithParent(cmd) }
