// Package logaddr opens an effect log by its address: it knows which
// storage engine keeps a log at which address, and puts the log's rules
// (package effectlog) over it. Commands and tests open logs here, so that a
// new engine is added in one place.
package logaddr

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage"
	"github.com/undolog/undolog/storage/boltfile"
	"github.com/undolog/undolog/storage/pgstore"
)

// DefaultLockTimeout is how long an operation waits for another process to
// release a log file before giving up with model.ErrBusy.
const DefaultLockTimeout = boltfile.DefaultLockTimeout

// Options tune an opened log.
type Options struct {
	// LockTimeout bounds the wait for a log file's lock, or on PostgreSQL
	// for the rows another transaction holds; zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// Now returns the current time; nil means time.Now. Tests set it.
	Now func() time.Time
	// Fallback is the slow poll under waits on a log that pushes changes
	// (effectlog.Options.Fallback): zero means effectlog.DefaultFallback,
	// negative turns the push off.
	Fallback time.Duration
	// Interrupt, once closed, ends a wait for a log file's lock at once
	// (boltfile.Options.Interrupt); on PostgreSQL the operation's context
	// does that.
	Interrupt <-chan struct{}
}

// Open returns the log at addr: a postgres:// (or postgresql://) URL is a
// PostgreSQL database, a path a log file (bbolt). It does no I/O: a log
// file is created by the first write, a database's tables by the first
// write (migrated up to this build's schema). A URL no engine serves gives
// a log whose every operation fails with model.ErrInvalidInput.
func Open(addr string, opts Options) effectlog.Log {
	if why := notPostgresURL(addr); why != nil {
		return effectlog.New(unreachable{why}, effectlog.Options{Now: opts.Now})
	}
	if scheme, ok := urlScheme(addr); ok {
		if isPostgres(addr) {
			// A scheme is any case (RFC 3986); the driver reads only lower case.
			engine := pgstore.New(strings.ToLower(scheme) + addr[len(scheme):])
			engine.LockTimeout = opts.LockTimeout
			if engine.LockTimeout == 0 {
				engine.LockTimeout = DefaultLockTimeout
			}
			return effectlog.New(engine, effectlog.Options{Now: opts.Now, Fallback: opts.Fallback})
		}
		why := fmt.Errorf("%w: log address %q: no engine keeps logs at %s:// addresses (give a file path or a postgres:// URL)", model.ErrInvalidInput, addr, scheme)
		return effectlog.New(unreachable{why}, effectlog.Options{Now: opts.Now})
	}
	return File(addr, opts)
}

// notPostgresURL refuses an address that names PostgreSQL but is no
// postgres:// URL (postgres:/db, postgresql:db, a URL with a space around
// it): taken as a file path, it would keep the log in a file nobody sharing
// the database sees. A file of such a name is still ./postgres:db.
func notPostgresURL(addr string) error {
	trimmed := strings.TrimSpace(addr)
	scheme, _, ok := strings.Cut(trimmed, ":")
	switch {
	case !ok || !strings.EqualFold(scheme, "postgres") && !strings.EqualFold(scheme, "postgresql") || isPostgres(addr) && trimmed == addr:
		return nil
	case isPostgres(trimmed):
		shown := strings.Replace(addr, trimmed, pgstore.Redacted(trimmed), 1)
		return fmt.Errorf("%w: log address %q has a space around it: take it out", model.ErrInvalidInput, shown)
	}
	return fmt.Errorf("%w: log address %q is not a postgres:// URL: a database is postgres://HOST/DB (postgres:/// for the one the PG* variables name); a file of that name is ./%s",
		model.ErrInvalidInput, addr, addr)
}

// urlScheme is the scheme of addr if addr is a URL: a scheme (a letter,
// then letters, digits, +, - or ., as RFC 3986 has it) and "://". On
// Windows one letter is a drive (C://x), not a scheme.
func urlScheme(addr string) (string, bool) {
	scheme, _, ok := strings.Cut(addr, "://")
	if !ok || scheme == "" || len(scheme) == 1 && runtime.GOOS == "windows" {
		return "", false
	}
	for i, r := range scheme {
		letter := 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		if !letter && (i == 0 || !('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return "", false
		}
	}
	return scheme, true
}

// unreachable is the engine of an address no engine serves: every
// transaction fails with why.
type unreachable struct{ why error }

func (u unreachable) View(context.Context, func(storage.ReadTx) error) error    { return u.why }
func (u unreachable) Update(context.Context, func(storage.WriteTx) error) error { return u.why }
func (u unreachable) UpdateUnflushed(context.Context, func(storage.WriteTx) error) error {
	return u.why
}
func (u unreachable) Close() error { return nil }

// PostgresRoles is the SQL that creates a shared log's group roles
// (undolog_reader, undolog_agent, undolog_approver) with their grants.
const PostgresRoles = pgstore.RolesSQL

// File returns the log kept in the bbolt file at path.
func File(path string, opts Options) effectlog.FileLog {
	engine := boltfile.New(path, boltfile.Options{LockTimeout: opts.LockTimeout, Interrupt: opts.Interrupt})
	return effectlog.New(engine, effectlog.Options{Now: opts.Now}).(effectlog.FileLog)
}

// LooksLikeLogFile reports whether the file at path begins as a log file
// does (boltfile.LooksLikeLog).
func LooksLikeLogFile(path string) bool { return boltfile.LooksLikeLog(path) }

// SharedAddress is addr as another person names the same log in a command
// they copy: a PostgreSQL URL without user or password (theirs are their
// own), the server a PG* environment names written out; a path as it is.
func SharedAddress(addr string) string {
	if isPostgres(addr) {
		return pgstore.SharedAddress(addr)
	}
	return addr
}

// IsFile tells whether addr names a log file, not a PostgreSQL server.
func IsFile(addr string) bool { return !isPostgres(addr) }

func isPostgres(addr string) bool {
	scheme, ok := urlScheme(addr)
	s := strings.ToLower(scheme)
	return ok && (s == "postgres" || s == "postgresql")
}

// Shown is addr as errors and the view print it: a PostgreSQL URL with its
// password masked (and what a PG* environment names, spelled out), as the
// engine's own errors show it; a path as it is.
func Shown(addr string) string {
	if isPostgres(addr) {
		return pgstore.Redacted(addr)
	}
	return addr
}
