package cmd

import (
	"bufio"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
)

// Factory carries what every command needs: the process's streams and
// environment, the log it opens (logs.go) and what signals do to it
// (signals.go). Tests build one over buffers.
type Factory struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	Getenv func(string) string
	Now    func() time.Time

	headers bool          // --headers
	lines   *bufio.Reader // stdinLines
	logs    logOpener
	signals interrupts // set by Main
}

// stdinLines is one buffered reader over stdin for every question asked, so
// that an answer typed ahead is not lost between two questions.
func (f *Factory) stdinLines() *bufio.Reader {
	if f.lines == nil {
		f.lines = bufio.NewReader(f.In)
	}
	return f.lines
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
	return prog + " --log " + textfmt.ShellQuote(logaddr.SharedAddress(addr))
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

// terminalWidth is the width of the terminal output goes to, or 0 when it
// goes elsewhere.
func (f *Factory) terminalWidth() int {
	file, ok := f.Out.(*os.File)
	if !ok {
		return 0
	}
	w, _, err := term.GetSize(int(file.Fd()))
	if err != nil {
		return 0
	}
	return w
}

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
