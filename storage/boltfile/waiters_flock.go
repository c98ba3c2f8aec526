//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package boltfile

import (
	"os"
	"syscall"
	"time"
)

// waitSignal shows the committer that others wait for the log it holds: a
// process (or a reader of this one) waiting for the log's lock holds a
// shared flock on the journal file meanwhile, which the committer tries to
// take exclusively.
type waitSignal struct{ f *os.File }

// watchWaiters opens the journal file, creating it (empty, with perm, the
// log's mode) if need be so that waiters have a file to lock.
func watchWaiters(journal string, perm os.FileMode) waitSignal {
	f, err := os.OpenFile(journal, os.O_RDONLY|os.O_CREATE|os.O_EXCL, perm)
	if err == nil {
		syncDir(journal)
	} else {
		f, err = os.Open(journal)
	}
	if err != nil {
		return waitSignal{}
	}
	return waitSignal{f}
}

// others reports whether anyone waits for the log.
func (w waitSignal) others() bool {
	if w.f == nil {
		return false
	}
	fd := int(w.f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return err == syscall.EWOULDBLOCK
	}
	syscall.Flock(fd, syscall.LOCK_UN)
	return false
}

// yield waits, up to 100 ms, until those waiting got the log: they stop
// waiting once bbolt's next lock attempt (every 50 ms) succeeds.
func (w waitSignal) yield() {
	for i := 0; i < 100 && w.others(); i++ {
		time.Sleep(time.Millisecond)
	}
}

func (w waitSignal) close() {
	if w.f != nil {
		w.f.Close()
	}
}

// announceWaiting marks this process as waiting for the log until the
// returned function is called.
func announceWaiting(journal string) (done func()) {
	f, err := os.Open(journal)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() } // closing the file drops the lock
}
