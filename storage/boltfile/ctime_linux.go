package boltfile

import (
	"os"
	"syscall"
)

// changeTime is the file's change time: a write, or a change of mode or
// owner, moves it.
func changeTime(info os.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Nano()
	}
	return 0
}
