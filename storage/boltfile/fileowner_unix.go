//go:build unix

package boltfile

import (
	"os"
	"syscall"
)

// fileOwner is the user id that owns the file info describes, and whether
// the system says.
func fileOwner(info os.FileInfo) (uid int, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// openNoFollow makes an open fail on a symbolic link rather than follow it.
const openNoFollow = syscall.O_NOFOLLOW
