package boltfile

import (
	"bytes"
	"encoding/binary"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// walkedAttr names the mark a writer leaves on the journal: the state of
// the log file whose pages it walked, or wrote after a walk. A process that
// finds the file in the state marked walks it no more: without the mark,
// each writer process walked the whole file, which cost a multiple of its
// write on a log of many pages. The mark says what the walk's memory in a
// process says (walkedFile), on a file of the log's owner (the writer has
// checked whose it is) that only a writer, under the log's lock, marks. A
// file system that keeps no such attribute keeps no mark: every process
// walks.
const walkedAttr = "user.undolog.walked"

// walkedMark is the mark of the log file's state info, at transaction txid:
// the file (device and inode), its size, its modification and change times
// and the transaction.
func walkedMark(info os.FileInfo, txid uint64) []byte {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	mark := make([]byte, 0, 6*8)
	for _, v := range []uint64{st.Dev, st.Ino, uint64(st.Size), uint64(st.Mtim.Nano()), uint64(st.Ctim.Nano()), txid} {
		mark = binary.LittleEndian.AppendUint64(mark, v)
	}
	return mark
}

// hasWalkedMark reports whether the journal carries the mark of this state
// of the log file.
func hasWalkedMark(journal string, info os.FileInfo, txid uint64) bool {
	want := walkedMark(info, txid)
	if want == nil {
		return false
	}
	f, err := openToLock(journal)
	if err != nil {
		return false
	}
	defer f.Close()
	got := make([]byte, len(want)+1)
	n, err := unix.Fgetxattr(int(f.Fd()), walkedAttr, got)
	return err == nil && bytes.Equal(got[:n], want)
}

// setWalkedMark marks the journal with this state of the log file, if it can.
func setWalkedMark(journal string, info os.FileInfo, txid uint64) {
	mark := walkedMark(info, txid)
	if mark == nil {
		return
	}
	f, err := openToLock(journal)
	if err != nil {
		return
	}
	defer f.Close()
	unix.Fsetxattr(int(f.Fd()), walkedAttr, mark, 0)
}
