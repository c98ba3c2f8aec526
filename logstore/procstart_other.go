//go:build !linux

package logstore

// processStart is unknown here: owners are judged by their pid alone.
func processStart(pid int) (uint64, bool) { return 0, false }
