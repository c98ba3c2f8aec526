// Package engines opens an effect log by its address: it knows which
// storage engine keeps a log at which address, and puts the log's rules
// (package effectlog) over it. Commands and tests open logs here, so that a
// new engine is added in one place.
package engines

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage"
	"github.com/undolog/undolog/storage/boltfile"
)

// DefaultLockTimeout is how long an operation waits for another process to
// release a log file before giving up with model.ErrBusy.
const DefaultLockTimeout = boltfile.DefaultLockTimeout

// Options tune an opened log.
type Options struct {
	// LockTimeout bounds the wait for a log file's lock; zero means
	// DefaultLockTimeout.
	LockTimeout time.Duration
	// Now returns the current time; nil means time.Now. Tests set it.
	Now func() time.Time
}

// Open returns the log at addr: a path is a log file (bbolt). It does no
// I/O: a log file is created by the first write. A URL no engine serves
// gives a log whose every operation fails with model.ErrInvalidInput.
func Open(addr string, opts Options) effectlog.Log {
	if scheme, _, ok := strings.Cut(addr, "://"); ok && scheme != "" && !strings.ContainsAny(scheme, `/\.`) {
		why := fmt.Errorf("%w: log address %q: no engine keeps logs at %s:// addresses (give a file path)", model.ErrInvalidInput, addr, scheme)
		return effectlog.New(unreachable{why}, effectlog.Options{Now: opts.Now})
	}
	return File(addr, opts)
}

// unreachable is the engine of an address no engine serves: every
// transaction fails with why.
type unreachable struct{ why error }

func (u unreachable) View(context.Context, func(storage.ReadTx) error) error    { return u.why }
func (u unreachable) Update(context.Context, func(storage.WriteTx) error) error { return u.why }
func (u unreachable) Close() error                                              { return nil }

// File returns the log kept in the bbolt file at path.
func File(path string, opts Options) effectlog.FileLog {
	engine := boltfile.New(path, boltfile.Options{LockTimeout: opts.LockTimeout})
	return effectlog.New(engine, effectlog.Options{Now: opts.Now}).(effectlog.FileLog)
}
