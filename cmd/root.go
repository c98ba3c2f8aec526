// Package cmd owns undolog's command line: one file per command, output
// formats, and the mapping of errors to exit codes (exitcodes.go).
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/engines"
	"github.com/undolog/undolog/internal/child"
	"github.com/undolog/undolog/internal/textfmt"
)

// Main runs undolog with the process's arguments and streams and returns the
// exit code.
func Main() int {
	f := &Factory{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, Getenv: os.Getenv, Now: time.Now}
	ctx, stop := signalsFor(f)
	defer stop()
	child.BeforeStart(f.catchSignals)
	return Execute(ctx, f, os.Args[1:])
}

// Execute runs the command line over f and returns the exit code. Errors are
// printed once, on one line, to f.ErrOut.
func Execute(ctx context.Context, f *Factory, args []string) int {
	return execute(ctx, f, newRootCmd(f, commandFor(args)), args)
}

// execute runs args over the command tree root, built over f.
func execute(ctx context.Context, f *Factory, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	root.SetIn(f.In)
	root.SetOut(f.Out)
	root.SetErr(f.ErrOut)
	err := root.ExecuteContext(ctx)
	if cerr := f.closeLogs(); err == nil {
		err = cerr
	}
	if err == nil {
		return ExitOK
	}
	err = classifyCobraError(err)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		// A signal ended what the command waited for (an undo's
		// compensation, a read): say so, not "context canceled".
		err = &exitError{code: ExitInterrupted, msg: "interrupted by a signal: " + oneLine(err.Error())}
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(f.ErrOut, "undolog: "+textfmt.Escape(oneLine(msg)))
	}
	return ExitCode(err)
}

// NewRootCmd builds the command tree.
func NewRootCmd(f *Factory) *cobra.Command { return newRootCmd(f, nil) }

// commands are the top-level commands. wholeTree marks one that reads the
// tree of every command (man writes a page for each).
var commands = []struct {
	name      string
	build     func(*Factory) *cobra.Command
	wholeTree bool
}{
	{"session", newCmdSession, false},
	{"intercept", newCmdIntercept, false},
	{"exec", newCmdExec, false},
	{"proxy", newCmdProxy, false},
	{"policy", newCmdPolicy, false},
	{"start", newCmdStart, false},
	{"commit", newCmdCommit, false},
	{"fail", newCmdFail, false},
	{"approve", newCmdApprove, false},
	{"reject", newCmdReject, false},
	{"transition", newCmdTransition, false},
	{"list", newCmdList, false},
	{"show", newCmdShow, false},
	{"approvals", newCmdApprovals, false},
	{"verify", newCmdVerify, false},
	{"export", newCmdExport, false},
	{"import", newCmdImport, false},
	{"undo", newCmdUndo, false},
	{"resolve", newCmdResolve, false},
	{"compact", newCmdCompact, false},
	{"gc", newCmdGC, false},
	{"migrate", func(f *Factory) *cobra.Command { return newCmdMigrate(f, nil) }, false},
	{"tui", newCmdTUI, false},
	{"demo", newCmdDemo, false},
	{"version", newCmdVersion, false},
	{"man", newCmdMan, true},
}

// commandFor is the builder of the top-level command that args run, when
// they name one before anything but the root's own flags; nil when they do
// not (help, completion, a misspelt name: those read every command). A
// process then builds only the command it runs: the whole tree is up to
// a tenth of the start of a quick command.
func commandFor(args []string) func(*Factory) *cobra.Command {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--log" || a == "--lock-timeout":
			i++ // its value
		case strings.HasPrefix(a, "--log=") || strings.HasPrefix(a, "--lock-timeout="):
		case strings.HasPrefix(a, "-"):
			return nil // --help, --version, --, or a flag cobra refuses
		default:
			for _, c := range commands {
				if c.name == a && !c.wholeTree {
					return c.build
				}
			}
			return nil
		}
	}
	return nil
}

// newRootCmd builds the root command and under it the one command only
// builds, or every command when only is nil.
func newRootCmd(f *Factory, only func(*Factory) *cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:   "undolog",
		Short: "Make tool calls transactional: log, replay, approve and undo them",
		Long: `undolog puts every tool call of an AI agent or CI script through a durable effect
log (a local file, or a PostgreSQL database that a team shares): classified by tier
(safe, compensable, irreversible), recorded before it runs, replayed from the log
when repeated, held for a person when it cannot be undone, and undone
last-in-first-out when the session fails.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if f.LockTimeout < 0 {
				return usagef("--lock-timeout must not be negative")
			}
			return f.readFallback()
		},
	}
	// --version prints what `undolog version` does.
	v, cm, d := BuildInfo()
	root.Version = v
	root.SetVersionTemplate(fmt.Sprintf("undolog %s\ncommit: %s\nbuilt:  %s\n", v, cm, d))
	root.PersistentFlags().StringVar(&f.LogFlag, "log", "", "effect log `address`: a file or a postgres:// URL (default $UNDOLOG_LOG, else the database $PGHOST/$PGDATABASE/$PGSERVICE name, else $XDG_STATE_HOME/undolog/undolog.db)")
	root.PersistentFlags().DurationVar(&f.LockTimeout, "lock-timeout", engines.DefaultLockTimeout, "how long to wait for another process holding the log")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see '%s --help')", err, c.CommandPath())
	})
	if only != nil {
		root.AddCommand(only(f))
	} else {
		for _, c := range commands {
			root.AddCommand(c.build(f))
		}
	}
	addCompletions(f, root)
	return root
}

// classifyCobraError turns cobra's own argument errors into usage errors.
func classifyCobraError(err error) error {
	var ue *usageError
	var ee *exitError
	if errors.As(err, &ue) || errors.As(err, &ee) {
		return err
	}
	msg := err.Error()
	for _, prefix := range []string{"unknown command", "unknown flag", "unknown shorthand", "required flag", "accepts ", "requires at least", "invalid argument", "flag needs"} {
		if strings.HasPrefix(msg, prefix) {
			return usagef("%s", msg)
		}
	}
	return err
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// exactArgs is cobra.ExactArgs with a usage error naming the arguments.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %s (see '%s --help')", c.CommandPath(), names, c.CommandPath())
		}
		return nil
	}
}

func maxArgs(n int, names string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) > n {
			return usagef("%s takes at most %s (see '%s --help')", c.CommandPath(), names, c.CommandPath())
		}
		return nil
	}
}

// readInput returns s, or the contents of FILE for "@FILE", or stdin for "-".
func readInput(f *Factory, s string) ([]byte, error) {
	switch {
	case s == "-":
		return io.ReadAll(f.In)
	case strings.HasPrefix(s, "@"):
		data, err := os.ReadFile(s[1:])
		if err != nil {
			return nil, usagef("read %s: %v", s[1:], errors.Unwrap(err))
		}
		return data, nil
	}
	return []byte(s), nil
}
