package boltfile

import "syscall"

// dropPages gives back the pages of the file a read has touched through
// bbolt's read-only shared map: a walk of the whole log (verify) would
// otherwise hold the whole file resident as its own memory. The pages stay
// in the page cache; a later access maps them again. Nothing is written
// through the map (bbolt writes with pwrite), so nothing is lost.
func (t *readTx) dropPages() {
	info := t.tx.DB().Info()
	if info == nil || info.Data == 0 {
		return
	}
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, info.Data, uintptr(t.tx.Size()), syscall.MADV_DONTNEED)
}
