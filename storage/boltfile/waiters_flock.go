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
		f, err = openToLock(journal)
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

// openToLock opens the journal only to lock it: not through a link, and
// without waiting, which opening a named pipe (put there since the open
// checked the path) would do for ever.
func openToLock(journal string) (*os.File, error) {
	return os.OpenFile(journal, os.O_RDONLY|openNoFollow|syscall.O_NONBLOCK, 0)
}

// announceWaiting marks this process as waiting for the log until the
// returned function is called.
func announceWaiting(journal string) (done func()) {
	f, err := openToLock(journal)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() } // closing the file drops the lock
}

// waitLock takes the log file's lock (exclusive or shared) on f, waiting
// for up to timeout; bbolt's ErrTimeout when it did not get it,
// context.Canceled once interrupt is closed. bbolt then locks the same open
// file, which succeeds at once.
//
// The wait is a blocking flock on a goroutine of its own, so the lock is
// taken the moment its holder lets it go (a holder lets a log go for a
// process that waits, and a poll would add up to its period to every such
// hand-off). A wait that ends first leaves that goroutine blocked: once the
// caller closes f, the lock it may still take is on a file only it has open,
// and goes when it closes it.
func waitLock(f *os.File, exclusive bool, timeout time.Duration, interrupt <-chan struct{}) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	fd := int(f.Fd())
	err := syscall.Flock(fd, how|syscall.LOCK_NB)
	if err != syscall.EWOULDBLOCK {
		return nil // taken, or bbolt's flock reports what is wrong
	}
	// The goroutine locks a duplicate of fd, which it closes itself: the
	// same open file, so the same lock, and a number that stays its own
	// after the caller closes f. Close-on-exec, or a command exec starts
	// meanwhile would keep the log locked.
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		return nil // bbolt's flock waits instead
	}
	dup := int(r)
	got := make(chan struct{})
	go func() {
		for syscall.Flock(dup, how) == syscall.EINTR {
		}
		syscall.Close(dup)
		close(got)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-got:
		return nil
	case <-timer.C:
		return berrors.ErrTimeout
	case <-interrupt:
		return context.Canceled
	}
}
