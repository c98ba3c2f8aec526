//go:build !linux

package boltfile

import "os"

// fdatasync is a full sync where Linux's fdatasync is not at hand.
func fdatasync(f *os.File) error { return f.Sync() }
