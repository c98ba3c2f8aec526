package cmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/engines"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
)

// Factory carries what every command needs: the I/O streams, the environment
// and the log. Tests build one over buffers.
type Factory struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	Getenv func(string) string
	Now    func() time.Time

	// Set by the root command's persistent flags.
	LogFlag     string
	LockTimeout time.Duration
	// Fallback is $UNDOLOG_NOTIFY_FALLBACK, read by the root command.
	Fallback time.Duration

	lines        *bufio.Reader
	warned       bool
	notedMissing bool
	openedMu     sync.Mutex      // opened is read by the SIGTSTP handler too
	opened       []effectlog.Log // closed when the command ends

	// Set by Main (signals.go): the command's context and what ends it.
	ctx           context.Context
	interrupt     context.CancelCauseFunc
	catchOnce     sync.Once
	ownInterrupts bool // handleInterrupts
}

// stdinLines is one buffered reader over stdin for every question asked, so
// that an answer typed ahead is not lost between two questions.
func (f *Factory) stdinLines() *bufio.Reader {
	if f.lines == nil {
		f.lines = bufio.NewReader(f.In)
	}
	return f.lines
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

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
	if f.LogFlag != "" {
		return f.LogFlag
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
	if !f.warned {
		f.warned = true
		if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o077 != 0 && engines.LooksLikeLogFile(path) {
			fmt.Fprintf(f.ErrOut, "undolog: warning: %s can be read by others (mode %04o) and holds call arguments and results: chmod 600 %s\n",
				textfmt.Escape(path), info.Mode().Perm(), textfmt.Escape(path))
		}
	}
	log := engines.Open(path, engines.Options{LockTimeout: f.LockTimeout, Now: f.Now, Fallback: f.Fallback, Interrupt: f.lockWaitsEnd()})
	f.openedMu.Lock()
	f.opened = append(f.opened, log)
	f.openedMu.Unlock()
	return log
}

// CLI is how a hint printed for a person starts a command on this log:
// "undolog", and --log ADDR when the log is not the default one, so that
// `undolog approve 3` from another shell approves this log's effect 3 and
// not another log's (ids are per log). A database URL is shown without its
// user and password: whoever runs the command has their own.
func (f *Factory) CLI() string {
	prog := program()
	addr := f.LogPath()
	if addr == DefaultLogPath(f.Getenv) {
		return prog
	}
	if abs, err := filepath.Abs(addr); err == nil && !strings.Contains(addr, "://") {
		addr = abs // pasted in another directory, a relative path is another log
	}
	return prog + " --log " + textfmt.ShellQuote(engines.SharedAddress(addr))
}

// program is how a person runs this undolog again: "go run ." when it was
// started so (`go run . demo` in a clone, where no undolog is installed),
// else "undolog".
func program() string {
	// go run links into a work dir (go-build*/b001/exe/undolog) or, since
	// Go 1.24, into the build cache (go-build/xx/HASH-d/undolog).
	exe, err := os.Executable()
	dir := filepath.Base(filepath.Dir(exe))
	if err != nil || !strings.Contains(exe, "go-build") || dir != "exe" && !strings.HasSuffix(dir, "-d") {
		return "undolog"
	}
	mod, err := os.ReadFile("go.mod")
	if err != nil || !strings.HasPrefix(string(mod), "module github.com/undolog/undolog\n") {
		return "undolog"
	}
	return "go run ."
}

// ReadLog is Log for a command that only reads: a log file that does not
// exist reads as empty, and it says so on stderr (once), so that a
// mistyped --log or UNDOLOG_LOG is not an empty listing in silence.
func (f *Factory) ReadLog() effectlog.Log {
	log := f.Log()
	if fl, ok := log.(effectlog.FileLog); ok && !f.notedMissing {
		if _, err := os.Lstat(fl.Path()); errors.Is(err, fs.ErrNotExist) {
			f.notedMissing = true
			fmt.Fprintf(f.ErrOut, "undolog: no log at %s yet: nothing is recorded there\n", textfmt.Escape(fl.Path()))
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
			return nil, fmt.Errorf("%w: no log at %s: nothing is recorded there", model.ErrNotFound, fl.Path())
		}
	}
	return log, nil
}

// closeLogs lets go of the logs the command used.
func (f *Factory) closeLogs() error {
	var first error
	for _, log := range f.openLogs() {
		if err := log.Close(); err != nil && first == nil {
			first = err
		}
	}
	f.openedMu.Lock()
	f.opened = nil
	f.openedMu.Unlock()
	return first
}

// openLogs are the logs the command opened so far.
func (f *Factory) openLogs() []effectlog.Log {
	f.openedMu.Lock()
	defer f.openedMu.Unlock()
	return append([]effectlog.Log(nil), f.opened...)
}

// Lease is how long the lease of this process's running calls and
// compensations lasts unless renewed: $UNDOLOG_LEASE, else model.DefaultLease.
func (f *Factory) Lease() (time.Duration, error) {
	d, err := model.LeaseFromEnv(f.Getenv)
	if err != nil {
		return 0, usagef("%v", err)
	}
	return d, nil
}

// Actor is --as, else UNDOLOG_ACTOR, else user@host.
func (f *Factory) Actor(as string) string {
	if as != "" {
		return as
	}
	if a := f.Getenv("UNDOLOG_ACTOR"); a != "" {
		return a
	}
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	} else if n := f.Getenv("USER"); n != "" {
		name = n
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return name + "@" + host
}

func isTerminal(v any) bool {
	file, ok := v.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// StdoutIsTerminal reports whether output goes to a person rather than a pipe.
func (f *Factory) StdoutIsTerminal() bool { return isTerminal(f.Out) }

// StdinIsTerminal reports whether a person can answer questions.
func (f *Factory) StdinIsTerminal() bool { return isTerminal(f.In) }

// Color reports whether to colour output: a terminal, NO_COLOR unset, TERM not dumb.
func (f *Factory) Color() bool {
	if _, set := lookupEnv(f.Getenv, "NO_COLOR"); set {
		return false
	}
	return f.StdoutIsTerminal() && f.Getenv("TERM") != "dumb"
}

// lookupEnv treats an empty NO_COLOR as unset, as no-color.org asks.
func lookupEnv(getenv func(string) string, key string) (string, bool) {
	v := getenv(key)
	return v, v != ""
}

// readFallback sets Fallback from $UNDOLOG_NOTIFY_FALLBACK: how long a wait
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
	f.Fallback = d
	if d == 0 {
		f.Fallback = -1
	}
	return nil
}
