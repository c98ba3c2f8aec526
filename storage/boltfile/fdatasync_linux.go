package boltfile

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data and the metadata needed to read it back, but
// not its times: a journal append over blocks the file already has needs no
// metadata journal commit.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
