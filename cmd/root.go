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
	var err error
	if group, name := strayName(root, args); group != nil {
		err = unknownCommand(group, name)
	} else {
		err = root.ExecuteContext(ctx)
	}
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
		err = &exitError{code: ExitInterrupted, msg: "interrupted by a signal: " + textfmt.OneLine(err.Error())}
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(f.ErrOut, "undolog: "+textfmt.Escape(textfmt.OneLine(msg)))
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
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			if f.LockTimeout < 0 {
				return usagef("--lock-timeout must not be negative")
			}
			if fl := c.Flags().Lookup("log"); fl != nil && fl.Changed && strings.TrimSpace(f.LogFlag) == "" {
				// Most often an unset variable: the default log would be
				// written to in its place (or, blank, a file named " ").
				return usagef("--log is empty: give a log file's path or a postgres:// URL, or leave the flag out for the default log")
			}
			if env := f.Getenv("UNDOLOG_LOG"); f.LogFlag == "" && env != "" && strings.TrimSpace(env) == "" {
				return usagef("UNDOLOG_LOG is blank: set it to a log file's path or a postgres:// URL, or unset it for the default log")
			}
			return f.readFallback()
		},
	}
	// --version prints what `undolog version` does. The build info is read
	// only then, by the template (any Version makes cobra add the flag).
	root.Version = "undolog"
	root.SetVersionTemplate("{{undologVersion}}")
	root.PersistentFlags().StringVar(&f.LogFlag, "log", "", "effect log `address`: a file or a postgres:// URL (default $UNDOLOG_LOG, else $XDG_STATE_HOME/undolog/undolog.db; a URL's missing parts come from $PGHOST, $PGDATABASE, ...)")
	durationVar(root.PersistentFlags(), &f.LockTimeout, "lock-timeout", engines.DefaultLockTimeout, "how long to wait for another process holding the log")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see '%s --help')", err, c.CommandPath())
	})
	if only != nil {
		root.AddCommand(only(f))
	} else {
		for _, c := range commands {
			root.AddCommand(c.build(f))
		}
		// Completion requests (`__complete`) and the completion command
		// run on the whole tree; a tree of one command is never asked.
		root.InitDefaultCompletionCmd()
		addCompletions(f, root)
	}
	refuseStrays(root)
	return root
}

// refuseStrays makes a help topic that does not exist a usage error, exit
// 2, as strayName does a misspelt subcommand: cobra prints the root's or the
// group's help and exits 0 for them, so that `undolog session fial "$RUN"`
// in a script would seem to have worked.
func refuseStrays(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() != "help" || c.Run == nil {
			continue
		}
		show := c.Run
		c.Run = nil
		c.RunE = func(c *cobra.Command, args []string) error {
			if found, rest, err := c.Root().Find(args); found == nil || err != nil || len(rest) > 0 {
				return usagef("unknown help topic %q (see '%s --help')", strings.Join(args, " "), c.Root().Name())
			}
			show(c, args)
			return nil
		}
	}
}

// strayName finds, in a command line that names a group (a command that
// only holds others: session, policy, completion), the word that names none
// of its commands, and returns the group; nil when there is none. "help"
// after a group is cobra's, which prints the group's help.
func strayName(root *cobra.Command, args []string) (*cobra.Command, string) {
	c, rest, err := root.Find(args)
	if err != nil || c == root || c.Runnable() || !c.HasSubCommands() {
		return nil, ""
	}
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--" || a == "help":
			return nil, ""
		case strings.HasPrefix(a, "--") && !strings.Contains(a, "="):
			if fl := c.Flag(a[2:]); fl != nil && fl.NoOptDefVal == "" {
				i++ // its value
			}
		case strings.HasPrefix(a, "-"):
		default:
			return c, a
		}
	}
	return nil, ""
}

// unknownCommand is the usage error for a name that is no subcommand of c,
// with cobra's suggestion if it has one, on one line.
func unknownCommand(c *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only for its own suggestions
	}
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usagef("%s (see '%s --help')", msg, c.CommandPath())
}

// classifyCobraError turns cobra's own argument errors into usage errors.
func classifyCobraError(err error) error {
	var ue *usageError
	var ee *exitError
	if errors.As(err, &ue) || errors.As(err, &ee) {
		return err
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command") && strings.Contains(msg, "Did you mean this?") {
		// cobra's suggestion, on lines of their own: one line, as every error.
		head, more, _ := strings.Cut(msg, "\n")
		var names []string
		for _, l := range strings.Split(more, "\n") {
			if strings.HasPrefix(l, "\t") {
				names = append(names, strings.TrimSpace(l))
			}
		}
		return usagef("%s; did you mean %s? (see 'undolog --help')", head, strings.Join(names, " or "))
	}
	if strings.HasPrefix(msg, "unknown command") {
		return usagef("%s (see 'undolog --help')", textfmt.OneLine(msg))
	}
	for _, prefix := range []string{"unknown command", "unknown flag", "unknown shorthand", "required flag", "accepts ", "requires at least", "invalid argument", "flag needs"} {
		if strings.HasPrefix(msg, prefix) {
			return usagef("%s", msg)
		}
	}
	return err
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
