//go:build !linux

package main

import "time"

// serverCPU is known on Linux only (/proc).
func serverCPU(int) (time.Duration, bool) { return 0, false }
