//go:build windows

package model

import "os"

// processAlive reports whether a process with this pid exists on this host.
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
