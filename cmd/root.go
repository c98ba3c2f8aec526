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

	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
)

// Main runs undolog with the process's arguments and streams and returns the
// exit code.
func Main() int {
	f := &Factory{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, Getenv: os.Getenv, Now: time.Now}
	ctx, stop := f.catchSignals()
	defer stop()
	return Execute(ctx, f, os.Args[1:])
}

// Execute runs the command line over f and returns the exit code. Errors are
// printed once, on one line, to f.ErrOut.
func Execute(ctx context.Context, f *Factory, args []string) int {
	root := NewRootCmd(f)
	root.SetArgs(args)
	root.SetIn(f.In)
	root.SetOut(f.Out)
	root.SetErr(f.ErrOut)
	// cobra shows a group's help, and exits 0, for a word that names none of
	// its commands: that word is a usage error instead (helpTarget).
	var stray error
	showHelp := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		target, name := helpTarget(c)
		if name != "" {
			stray = unknownCommand(target, name)
			return
		}
		wrapForHelp(target, f.helpWidth())
		showHelp(target, args)
	})
	// Defined before cobra looks for the command, -h is known to take no
	// value: `undolog -h session list` is session list's help.
	root.InitDefaultHelpFlag()
	err := root.ExecuteContext(ctx)
	if err == nil {
		err = stray
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
func NewRootCmd(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "undolog",
		Short: "Make tool calls transactional: log, replay, approve and undo them",
		Long: `undolog puts every tool call of an AI agent or CI script through a durable effect
log (a local file, or a PostgreSQL database that a team shares): classified by tier
(safe, compensable, irreversible), recorded before it runs, replayed from the log
when repeated, held for a person when it cannot be undone, and undone
last-in-first-out when the session fails.

` + exitCodesHelp("Exit codes (exec's and the proxy's own: see their help):", exitCodes),
		SilenceUsage:      true,
		SilenceErrors:     true,
		DisableAutoGenTag: true, // the generated pages are the same each time
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			if f.logs.lockTimeout < 0 {
				return usagef("--lock-timeout must not be negative")
			}
			if fl := c.Flags().Lookup("log"); fl != nil && fl.Changed && strings.TrimSpace(f.logs.address) == "" {
				// Most often an unset variable: the default log would be
				// written to in its place (or, blank, a file named " ").
				return usagef("--log is empty: give a log file's path or a postgres:// URL, or leave the flag out for the default log")
			}
			if env := f.Getenv("UNDOLOG_LOG"); f.logs.address == "" && env != "" && strings.TrimSpace(env) == "" {
				return usagef("UNDOLOG_LOG is blank: set it to a log file's path or a postgres:// URL, or unset it for the default log")
			}
			if err := checkHeadersEnv(f.Getenv); err != nil {
				return err
			}
			if err := reservedActor(c, f.Getenv("UNDOLOG_ACTOR")); err != nil {
				return err
			}
			return f.readFallback()
		},
	}
	// --version prints what `undolog version` does. The build info is read
	// only then, by the template (any Version makes cobra add the flag).
	root.Version = "undolog"
	root.SetVersionTemplate("{{undologVersion}}")
	root.PersistentFlags().StringVar(&f.logs.address, "log", "", "effect log `address`: a file or a postgres:// URL (default $UNDOLOG_LOG, else $XDG_STATE_HOME/undolog/undolog.db; a URL's missing parts come from $PGHOST, $PGDATABASE, ...)")
	durationVar(root.PersistentFlags(), &f.logs.lockTimeout, "lock-timeout", logaddr.DefaultLockTimeout, "how long to wait for another process holding the log")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(
		newCmdSession(f), newCmdIntercept(f), newCmdExec(f), newCmdProxy(f), newCmdHook(f), newCmdInit(f), newCmdPolicy(f),
		newCmdStart(f), newCmdCommit(f), newCmdFail(f), newCmdApprove(f), newCmdReject(f), newCmdTransition(f),
		newCmdList(f), newCmdShow(f), newCmdApprovals(f), newCmdVerify(f), newCmdExport(f), newCmdImport(f),
		newCmdUndo(f), newCmdFiles(f), newCmdResolve(f), newCmdCompact(f), newCmdGC(f), newCmdMigrate(f, nil),
		newCmdTUI(f), newCmdDemo(f), newCmdVersion(f), newCmdMan(f),
	)
	root.InitDefaultCompletionCmd()
	bashCompletion(root)
	addCompletions(f, root)
	refuseStrays(root)
	groupCommands(root)
	return root
}

// refuseStrays makes a help topic that does not exist a usage error, exit
// 2, as Execute does a misspelt subcommand (helpTarget): cobra prints the root's or the
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

// helpTarget is the command whose help a command line asks for: a group
// run with words after it (`undolog --help session list`, `undolog -h
// completion bash`) asks for the command they name below it, and a word
// that names none of a group's commands is returned as name, a usage error.
func helpTarget(c *cobra.Command) (target *cobra.Command, name string) {
	if c.Runnable() || !c.HasSubCommands() {
		return c, ""
	}
	for _, word := range c.Flags().Args() {
		if !c.HasSubCommands() {
			break
		}
		if word == "help" { // `undolog session help list`
			continue
		}
		sub := subcommand(c, word)
		if sub == nil {
			return c, word
		}
		c = sub
	}
	return c, ""
}

// subcommand is c's command called name (or by an alias of it), or nil.
func subcommand(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
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

// reservedActor refuses an actor (--as, else UNDOLOG_ACTOR) under the
// prefix of decisions made in an MCP client's window: a shell that wrote
// it would make its decision read as the agent's user's.
func reservedActor(c *cobra.Command, env string) error {
	if fl := c.Flags().Lookup("as"); fl != nil && fl.Changed {
		if strings.HasPrefix(fl.Value.String(), model.WindowActorPrefix) {
			return usagef("--as %s: the prefix %s is reserved for decisions made in an MCP client's window, which only the proxy records", textfmt.Escape(fl.Value.String()), model.WindowActorPrefix)
		}
		return nil
	}
	if strings.HasPrefix(env, model.WindowActorPrefix) {
		return usagef("UNDOLOG_ACTOR=%s: the prefix %s is reserved for decisions made in an MCP client's window, which only the proxy records", textfmt.Escape(env), model.WindowActorPrefix)
	}
	return nil
}
