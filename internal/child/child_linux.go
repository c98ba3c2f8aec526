package child

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel SIGKILL the command when undolog dies
// (Linux's parent-death signal). Only the command itself: what it started
// goes on, and its process group is left alone (exec's command keeps the
// terminal's job control).
//
// The signal fires when the thread that started the command exits, not only
// the process. Go ends a thread only when a goroutine locked to it
// (runtime.LockOSThread) returns without unlocking, and any goroutine may
// later run on the thread that called Start; neither undolog nor its
// dependencies lock a goroutine (keep it so), so every thread lives as long
// as undolog does.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
