//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package boltfile

import (
	"os"
	"time"
)

const canSeeWaiters = false

// Without flock, a committer cannot see who waits: it lets the log go after
// linger or maxHold only.
type waitSignal struct{}

func watchWaiters(string, os.FileMode) waitSignal { return waitSignal{} }
func (waitSignal) others() bool                   { return false }
func (waitSignal) yield()                         {}
func (waitSignal) close()                         {}
func announceWaiting(string) (done func())        { return func() {} }

// waitLock leaves the wait for the lock to bbolt.
func waitLock(*os.File, bool, time.Duration, <-chan struct{}) error { return nil }
