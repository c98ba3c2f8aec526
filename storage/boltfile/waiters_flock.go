//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package boltfile

import (
	"context"
	"os"
	"syscall"
	"time"

	berrors "go.etcd.io/bbolt/errors"
)

// canSeeWaiters: a committer sees who waits for the log it holds.
const canSeeWaiters = true

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

// waitLock takes the log file's lock (exclusive or shared) on f, looking
// every expectPoll for up to timeout; bbolt's ErrTimeout when it did not
// get it, context.Canceled once interrupt is closed. bbolt then locks the
// same open file, which succeeds at once.
func waitLock(f *os.File, exclusive bool, timeout time.Duration, interrupt <-chan struct{}) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		} else if err != syscall.EWOULDBLOCK {
			return nil // bbolt's flock reports what is wrong
		}
		if time.Now().After(deadline) {
			return berrors.ErrTimeout
		}
		select {
		case <-interrupt:
			return context.Canceled
		default:
		}
		time.Sleep(expectPoll)
	}
}
