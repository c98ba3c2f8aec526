//go:build !linux

package child

import "os/exec"

// dieWithParent does nothing here: there is no parent-death signal, and a
// command may outlive a killed undolog.
func dieWithParent(cmd *exec.Cmd) {}
