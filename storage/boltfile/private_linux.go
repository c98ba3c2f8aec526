package boltfile

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// privateFile is a file in memory for a private copy of the log, with a
// path bbolt can open, and the function that lets it go.
func privateFile() (f *os.File, path string, done func(), err error) {
	fd, err := unix.MemfdCreate("undolog-copy", unix.MFD_CLOEXEC)
	if err != nil {
		return privateTempFile()
	}
	f = os.NewFile(uintptr(fd), "undolog-copy")
	return f, fmt.Sprintf("/proc/self/fd/%d", fd), func() { f.Close() }, nil
}
