//go:build !linux

package child

import "os/exec"

// DieWithParent does nothing here: there is no parent-death signal, and a
// command may outlive a killed undolog.
func DieWithParent(cmd *exec.Cmd) {}
