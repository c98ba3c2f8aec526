package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
)

// logOpener is which log a command opens, and how, and the logs it opened,
// which Execute closes when the command ends.
type logOpener struct {
	address     string        // --log
	lockTimeout time.Duration // --lock-timeout
	fallback    time.Duration // $UNDOLOG_NOTIFY_FALLBACK (readFallback)

	warnedMode   bool // said once that the log file can be read by others
	notedMissing bool // said once that there is no log file yet

	mu     sync.Mutex // opened is read by the SIGTSTP handler too
	opened []effectlog.Log
}

// open opens the log at addr and keeps it to close.
func (o *logOpener) open(addr string, opts logaddr.Options) effectlog.Log {
	log := logaddr.Open(addr, opts)
	o.mu.Lock()
	o.opened = append(o.opened, log)
	o.mu.Unlock()
	return log
}

// all are the logs opened so far.
func (o *logOpener) all() []effectlog.Log {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]effectlog.Log(nil), o.opened...)
}

// closeAll lets go of the logs opened so far.
func (o *logOpener) closeAll() error {
	logs := o.take()
	var first error
	for _, log := range logs {
		if err := log.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// take is the logs opened so far, which are no longer closeAll's to close.
func (o *logOpener) take() []effectlog.Log {
	o.mu.Lock()
	defer o.mu.Unlock()
	logs := o.opened
	o.opened = nil
	return logs
}

// closeWithin is closeAll within bound: a log whose close still waits
// then (for the lock, to end a write of a call that was given up) is left
// to the process's exit, which lets go of it; timedOut says so.
func (o *logOpener) closeWithin(bound time.Duration) (timedOut bool, err error) {
	logs := o.take()
	closed := make(chan error, 1)
	go func() {
		var first error
		for _, log := range logs {
			if err := log.Close(); err != nil && first == nil {
				first = err
			}
		}
		closed <- first
	}()
	select {
	case err := <-closed:
		return false, err
	case <-time.After(bound):
		return true, nil
	}
}

// DefaultLogPath is $XDG_STATE_HOME/undolog/undolog.db, or
// ~/.local/state/undolog/undolog.db when XDG_STATE_HOME is unset or, as the
// XDG spec says to treat it, relative (the log would move with the folder
// a command runs in).
func DefaultLogPath(getenv func(string) string) string {
	if dir := getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "undolog", "undolog.db")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".local", "state", "undolog", "undolog.db")
}

// LogPath is --log, else UNDOLOG_LOG, else the default path. Only an
// address asks for PostgreSQL: PG* variables alone are often kept for an
// application's own database, and undolog's tables do not belong there
// (a postgres:// URL that leaves parts out has them filled in from PG*).
func (f *Factory) LogPath() string {
	if f.logs.address != "" {
		return f.logs.address
	}
	if p := f.Getenv("UNDOLOG_LOG"); p != "" {
		return p
	}
	return DefaultLogPath(f.Getenv)
}

// Log opens nothing: it returns the effect log, which each operation opens
// and closes. A log file that others can read gets a warning, once (a file
// that is no log is refused by the open, alone).
func (f *Factory) Log() effectlog.Log {
	path := f.LogPath()
	if !f.logs.warnedMode {
		f.logs.warnedMode = true
		if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o077 != 0 && logaddr.LooksLikeLogFile(path) {
			fmt.Fprintf(f.ErrOut, "undolog: warning: %s can be read by others (mode %04o) and holds call arguments and results: chmod 600 %s\n",
				textfmt.Escape(path), info.Mode().Perm(), textfmt.Escape(path))
		}
	}
	return f.logs.open(path, logaddr.Options{LockTimeout: f.logs.lockTimeout, Now: f.Now, Fallback: f.logs.fallback, Interrupt: f.lockWaitsEnd()})
}

// ReadLog is Log for a command that only reads: a log file that does not
// exist reads as empty, and it says so on stderr (once), so that a
// mistyped --log or UNDOLOG_LOG is not an empty listing in silence.
func (f *Factory) ReadLog() effectlog.Log {
	log := f.Log()
	if fl, ok := log.(effectlog.FileLog); ok && !f.logs.notedMissing {
		if _, err := os.Lstat(fl.Path()); errors.Is(err, fs.ErrNotExist) {
			f.logs.notedMissing = true
			fmt.Fprintf(f.ErrOut, "undolog: %s\n", textfmt.Escape(noLogText(fl.Path())))
		}
	}
	return log
}

// ExistingLog is Log for a command that acts on what the log holds (a
// decision, a step, a resolve, an undo, a session's end): a log file that
// does not exist is not made, and the command fails as not found, naming
// the path (a mistyped --log, a log deleted since).
func (f *Factory) ExistingLog() (effectlog.Log, error) {
	log := f.Log()
	if fl, ok := log.(effectlog.FileLog); ok {
		if _, err := os.Lstat(fl.Path()); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", model.ErrNotFound, noLogText(fl.Path()))
		}
	}
	return log, nil
}

// noLogText says that no log is at an address, and what to do: every
// command that meets one says it so.
func noLogText(address string) string {
	return "no log at " + address + ": nothing is recorded there yet (exec or session start makes one); check --log or UNDOLOG_LOG"
}

// closeLogs lets go of the logs the command used.
func (f *Factory) closeLogs() error { return f.logs.closeAll() }

// readFallback sets the fallback from $UNDOLOG_NOTIFY_FALLBACK: how long a wait
// on a log that pushes changes (PostgreSQL) goes without a notification
// before it looks anyway; 0 turns the push off (waits poll, as on a file).
func (f *Factory) readFallback() error {
	v := f.Getenv("UNDOLOG_NOTIFY_FALLBACK")
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return usagef("UNDOLOG_NOTIFY_FALLBACK=%q: want a duration such as 3s, or 0 to poll", v)
	}
	f.logs.fallback = d
	if d == 0 {
		f.logs.fallback = -1
	}
	return nil
}
