package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/shellstep"
	sm "github.com/undolog/undolog/statemachine"
)

type execOptions struct {
	session         string
	tier            string
	tool            string
	key             string
	undo            string
	approvalTimeout time.Duration
	quiet           bool
	retryInDoubt    bool
	redact          []string
	as              string
}

func newCmdExec(f *Factory) *cobra.Command {
	opts := &execOptions{}
	c := &cobra.Command{
		Use:   "exec --session S [flags] -- CMD [ARGS...]",
		Short: "Run a command exactly once, behind approval, with its undo recorded",
		Long: `Run a command as one effect of the session. The call is the argv and the working
directory (not its standard input, which passes through: --key tells calls of
other input apart). It is registered (with its --undo command) before it runs; its
exit code, stdout and stderr (up to 1 MiB each) are recorded.

  - A repeat of a call that succeeded does not run again: its output is replayed
    byte for byte and its exit code returned.
  - A call that failed (non-zero exit) is retried by the next identical exec.
  - An irreversible call (the default without --undo: fail closed) waits for
    'undolog approve ID' from any shell, and does not run if rejected or expired.
  - While the command runs, its owner (host, pid, start) holds a lease of
    $UNDOLOG_LEASE (default 30s) that exec renews every third of it. The same call
    from another machine is in progress (` + fmt.Sprint(ExitExecInProgress) + `) while the lease holds, and in doubt
    (` + fmt.Sprint(ExitExecInDoubt) + `) once it ran out unrenewed; on this machine the owner's pid decides.

` + exitCodesHelp(execExitIntro, execExitCodes),
		Example: `  undolog exec --session $RUN --undo 'kubectl rollout undo deploy/api' -- kubectl apply -f api.yaml
  undolog exec --session $RUN --tier irreversible -- ./release.sh v1.2.3
  undolog exec --session $RUN --tier safe -- kubectl get pods`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &exitError{code: ExitExecError, msg: "exec needs a command to run: undolog exec --session S -- CMD [ARGS...]"}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			f.handleInterrupts() // it waits, or runs other commands
			var err error
			if c.Flags().Changed("undo") && strings.TrimSpace(opts.undo) == "" {
				// An unset variable in a script (--undo "$UNDO") would make the
				// step irreversible and wait an hour for an approval.
				err = usagef("--undo is empty: give the command that undoes this one, or leave the flag out (the call is then irreversible)")
			} else {
				err = runExec(c.Context(), f, opts, args)
			}
			var ee *exitError
			if err != nil && !errors.As(err, &ee) {
				return &exitError{code: ExitExecError, msg: err.Error()}
			}
			return err
		},
	}
	c.Flags().SetInterspersed(false) // everything after CMD belongs to CMD
	c.Flags().StringVar(&opts.session, "session", "", "session id (default $UNDOLOG_SESSION; created if new)")
	c.Flags().StringVar(&opts.tier, "tier", "", "compensable, irreversible or safe (default: compensable with --undo, else irreversible)")
	c.Flags().StringVar(&opts.tool, "tool", "", "tool name (default: the command's base name)")
	c.Flags().StringVar(&opts.key, "key", "", "idempotency key: the same command with another key is a new call")
	c.Flags().StringVar(&opts.undo, "undo", "", "command that undoes this one, run without a shell by 'undolog undo' ('ARGV...' or a JSON array)")
	durationVar(c.Flags(), &opts.approvalTimeout, "approval-timeout", time.Hour, "irreversible: give up waiting for approval after this long")
	c.Flags().BoolVarP(&opts.quiet, "quiet", "q", false, "no notes on stderr about replays and waiting")
	c.Flags().BoolVar(&opts.retryInDoubt, "retry-in-doubt", false, "reclaim a call whose owner process died mid-run, or whose lease on another machine ran out (fail it, then run it)")
	c.Flags().StringArrayVar(&opts.redact, "redact", nil, "keep matching fields out of the log: a glob over dotted paths of the call (argv.3) and result (stdout); repeatable")
	c.Flags().StringVar(&opts.as, "as", "", "actor recorded in history (default $UNDOLOG_ACTOR, else user@host)")
	// exec's own errors, usage included, are 125: the command's codes are the rest.
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: ExitExecError, msg: fmt.Sprintf("%v (see '%s --help')", err, c.CommandPath())}
	})
	return c
}

func (o *execOptions) note(f *Factory, format string, args ...any) {
	if !o.quiet {
		fmt.Fprintln(f.ErrOut, "undolog: "+textfmt.Escape(fmt.Sprintf(format, args...)))
	}
}

func runExec(ctx context.Context, f *Factory, opts *execOptions, argv []string) error {
	if opts.session == "" {
		opts.session = f.Getenv("UNDOLOG_SESSION")
	}
	tier := sm.Irreversible
	if opts.undo != "" {
		tier = sm.Compensable
	}
	if opts.tier != "" {
		t, err := sm.ParseTier(opts.tier)
		if err != nil {
			return err
		}
		tier = t
	}
	if tier != sm.Safe && opts.session == "" {
		return usagef("exec needs --session (or $UNDOLOG_SESSION)")
	}
	step := &shellstep.Step{Argv: argv, In: f.In, Out: f.Out, ErrOut: f.ErrOut}
	if tier == sm.Safe {
		// Not logged: it needs no session.
		if opts.undo != "" {
			return usagef("--undo is for compensable calls; a safe call is not logged")
		}
		return stepExit(step.RunUnlogged(ctx), 0)
	}
	if opts.tool == "" {
		opts.tool = filepath.Base(argv[0])
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	args, err := step.Call(cwd)
	if err != nil {
		return usagef("%v", err)
	}
	req := effectlog.InterceptRequest{Session: opts.session, Tool: opts.tool, Tier: tier, Args: args, Key: opts.key,
		ApprovalTimeout: opts.approvalTimeout, CreateSession: true, Actor: f.Actor(opts.as), Redact: opts.redact}
	if opts.undo != "" {
		if tier != sm.Compensable {
			return usagef("--undo is for compensable calls; this one is %s", tier)
		}
		undo, err := splitArgv(opts.undo)
		if err != nil {
			return err
		}
		req.Compensation = &model.Compensation{Kind: model.CompensationCommand, Argv: undo, Dir: cwd}
	}
	lease, err := f.Lease()
	if err != nil {
		return err
	}
	lc := &lifecycle.Lifecycle{Log: f.Log(), Now: f.Now, Lease: lease, Unavailable: func(err error) {
		opts.note(f, "%s", lifecycle.UnavailableNote(err))
	}}
	door := lifecycle.Door{CLI: f.CLI(), Bound: "--approval-timeout " + opts.approvalTimeout.String(), Reclaims: "rerun with --retry-in-doubt",
		Again: func(model.Effect) string { return "the same exec runs it" }}
	ask := lifecycle.Ask{Door: door, Wait: opts.approvalTimeout, Note: func(text string) { opts.note(f, "%s", text) }}
	if opts.retryInDoubt {
		ask.Reclaim = "reclaimed with --retry-in-doubt"
	}
	call, err := lc.Intercept(ctx, req)
	if err != nil {
		return err
	}
	end, err := lc.Drive(ctx, call, ask, step.Run)
	if err != nil {
		return err
	}
	if end.Ending == lifecycle.Replay {
		opts.note(f, "%s", end.Text(door))
	}
	return execExit(end, door, step)
}
