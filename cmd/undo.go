package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/undolog/undolog/filesnap"
	"github.com/undolog/undolog/model"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/mcpclient"
	"github.com/undolog/undolog/saga"
	sm "github.com/undolog/undolog/statemachine"
)

type undoOptions struct {
	dryRun       bool
	yes          bool
	retryInDoubt bool
	anyway       bool
	as           string
	output       string
}

func newCmdUndo(f *Factory) *cobra.Command {
	opts := &undoOptions{}
	c := &cobra.Command{
		Use:   "undo SESSION",
		Short: "Undo a session: run its compensations last-in-first-out",
		Long: `Walk the session's undo stack last-in-first-out. Each compensable effect that ran
is compensated (a command descriptor runs its argv without a shell, with the
effect in UNDOLOG_EFFECT_ID, UNDOLOG_SESSION, UNDOLOG_TOOL, UNDOLOG_ARGS and
UNDOLOG_RESULT (under 64 KiB), and always in the file UNDOLOG_EFFECT_FILE; a
manual one asks the operator),
retried with exponential backoff; an effect that did not run (never, or
its run failed) has nothing to undo.

When a compensation fails for good the walk stops, the session is halted and
the exit code is ` + fmt.Sprint(ExitCompensation) + `: fix it by hand, 'undolog resolve ID --reason R', and run
undo again to resume. Irreversible effects cannot be undone and are listed.

A compensation has one runner: while another undo runs it, undo stops with
exit code ` + fmt.Sprint(ExitInProgress) + ` and runs nothing. If that undo died (or was interrupted) mid-run,
the compensation is in doubt, as it may or may not have taken effect: undo
stops with exit code ` + fmt.Sprint(ExitCompensation) + ` and runs nothing; check, then --retry-in-doubt runs it
again (compensations are not assumed idempotent).

A compensation runs on the machine that runs undo, in the directory
recorded with its call, with undo's environment: undo a CI job's steps from
a runner of that job (or give them commands that run anywhere). When the
plan says a step WILL FAIL here (its directory is not on this machine), undo
exits ` + fmt.Sprint(ExitUndoNotHere) + ` naming it, and runs and changes nothing; --anyway runs the
walk all the same, so that such a step fails, for 'undolog resolve' once
it is undone by hand. A proxy session's MCP server is started only where
the variables that located its state when the proxy ran (undolog proxy
--state-env, the policy's state_env, MEMORY_FILE_PATH for the memory
server) are as they were, or unset where they were unset: otherwise undo
exits ` + fmt.Sprint(ExitUsage) + ` naming the variable, and runs and changes nothing.`,
		Example: `  undolog undo deploy-117 --dry-run
  undolog undo deploy-117 --yes`,
		Args: exactArgs(1, "one session name"),
		RunE: func(c *cobra.Command, args []string) error {
			f.handleInterrupts() // it waits, or runs other commands
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			store, err := f.ExistingLog()
			if err != nil {
				return err
			}
			plan, err := saga.MakePlan(c.Context(), store, args[0])
			if errors.Is(err, model.ErrNotFound) {
				return fmt.Errorf("%w (undolog session list names the sessions)", err)
			}
			if err != nil {
				return err
			}
			if opts.dryRun {
				if opts.output != formatText {
					return writeObject(f.Out, opts.output, plan)
				}
				printPlan(f, plan)
				return nil
			}
			interactive := f.StdinIsTerminal()
			if !opts.yes {
				if !interactive {
					return usagef("undo acts on the world: pass --yes (standard input is not a terminal to ask)")
				}
				printPlan(f, plan)
				ok, err := ask(f, fmt.Sprintf("Undo session %s (%s)? [y/N] ", plan.Session, textfmt.Count(plan.Work(), "step")))
				if err != nil {
					return err
				}
				if !ok {
					return &exitError{code: ExitError, msg: "undo cancelled; nothing changed"}
				}
			}
			// An HTTP server's headers come from the environment: a variable
			// missing stops undo before it changes anything.
			if r, ok, err := mcpclient.ParseRemote(plan.Upstream); ok {
				if err == nil {
					_, err = r.Header(f.Getenv)
				}
				if err != nil {
					return usagef("undo %s: its MCP server %s: %v", plan.Session, textfmt.Escape(r.URL), err)
				}
			}
			lease, err := f.Lease()
			if err != nil {
				return err
			}
			runner := &saga.Runner{Log: store, Actor: f.Actor(opts.as), Output: f.ErrOut, RetryInDoubt: opts.retryInDoubt, Anyway: opts.anyway, Lease: lease, CLI: f.CLI(),
				StartServer: func(ctx context.Context, upstream []string, dir string) (saga.ToolCaller, error) {
					// A nil *mcpclient.Client must not reach the interface.
					client, err := mcpclient.DialIn(ctx, upstream, dir)
					if err != nil {
						return nil, err
					}
					return client, nil
				}}
			if opts.output == formatText {
				runner.Progress = f.Out
			}
			if !opts.yes {
				runner.Confirmed = &plan // what the person said yes to, and only that
			}
			if interactive {
				runner.ConfirmManual = func(s saga.Step) (bool, error) {
					return ask(f, fmt.Sprintf("Effect %d %s needs a manual compensation (%s). Done? [y/N] ", s.Effect.ID, s.Effect.Tool, s.Call))
				}
			}
			res, err := runner.Run(c.Context(), plan.Session)
			if opts.output != formatText {
				if werr := writeObject(f.Out, opts.output, res); werr != nil {
					return werr
				}
			} else if err == nil && res.Already {
				fmt.Fprintf(f.Out, "session %s is compensated already: nothing to undo\n", textfmt.Escape(res.Session))
			} else if err == nil {
				fmt.Fprintf(f.Out, "session %s %s: %s\n", res.Session, paintState(f, res.State), res.Counts())
				printNotUndoable(f, plan)
			}
			if errors.Is(err, saga.ErrCompensationFailed) || errors.Is(err, saga.ErrInDoubt) {
				return &exitError{code: ExitCompensation, msg: err.Error()}
			}
			return err
		},
	}
	c.Flags().BoolVar(&opts.dryRun, "dry-run", false, "print the exact compensation calls in order; change nothing")
	c.Flags().BoolVarP(&opts.yes, "yes", "y", false, "do not ask (required when standard input is not a terminal)")
	c.Flags().BoolVar(&opts.retryInDoubt, "retry-in-doubt", false, "run again a compensation whose undo died mid-run (it may have run already)")
	c.Flags().BoolVar(&opts.anyway, "anyway", false, "run the steps the plan says WILL FAIL here: each fails and halts the walk, for resolve")
	c.Flags().StringVar(&opts.as, "as", "", "actor recorded in history (default $UNDOLOG_ACTOR, else user@host)")
	addFormatFlag(c, &opts.output, false)
	return c
}

func printPlan(f *Factory, plan saga.Plan) {
	// Each line is escaped whole: it quotes tool names, errors and commands.
	println := func(format string, args ...any) { fmt.Fprintln(f.Out, textfmt.Escape(fmt.Sprintf(format, args...))) }
	println("undo plan for session %s, last in first out:", plan.Session)
	n := 0
	for _, s := range plan.Steps {
		e := s.Effect
		// The exact call: where it runs too.
		call := saga.Shorten(s.Call) + plan.Where(s)
		switch s.Action {
		case saga.ActionDone:
			println("   -  effect %d %s: %s", e.ID, e.Tool, s.DoneWords())
		case saga.ActionSkip:
			n++
			println("  %2d. effect %d %s (%s): %s", n, e.ID, e.Tool, e.State, s.NothingToUndo())
		case saga.ActionBlocked:
			n++
			println("  %2d. effect %d %s: BLOCKED, failed before (%s): %s resolve %d --reason ...", n, e.ID, e.Tool, s.Entry.LastError, f.CLI(), e.ID)
		case saga.ActionInProgress:
			n++
			if s.Entry.State != sm.EntryCompensating {
				println("  %2d. effect %d %s: IN PROGRESS, the call runs in %s: undo once it has ended", n, e.ID, e.Tool, e.Owner)
			} else {
				println("  %2d. effect %d %s: IN PROGRESS, being compensated by %s", n, e.ID, e.Tool, s.Entry.Owner)
			}
		case saga.ActionInDoubt:
			n++
			println("  %2d. effect %d %s (%s): IN DOUBT, %s (--retry-in-doubt runs it again): %s", n, e.ID, e.Tool, e.State, saga.DescribeDoubt(s.Entry.Owner), call)
		default:
			n++
			println("  %2d. effect %d %s (%s): %s", n, e.ID, e.Tool, e.State, call)
		}
		for _, c := range s.Files {
			if s.Action == saga.ActionDone {
				break // restored already: no work to list
			}
			println("      %s", filesnap.Describe(false, c))
		}
		if s.Note != "" {
			println("      NOTE: %s", s.Note)
		}
		if s.Problem != "" && s.Action != saga.ActionDone {
			println("      WILL FAIL: %s", s.Problem) // not the exact call: it cannot be made
		}
	}
	if len(plan.Steps) == 0 {
		println("  (nothing to undo)")
	}
	for _, a := range plan.Closes {
		println("closes the approval request of effect %d %s (waiting since %s): its call will not run", a.EffectID, a.Effect.Tool, a.RequestedAt.Format(time.RFC3339))
	}
	printNotUndoable(f, plan)
	if err := plan.Waits(); err != nil {
		println("IN PROGRESS: %v", err) // undo refuses to run until it ends
	}
}

// printNotUndoable lists the effects that ran and stay as they are: the
// plan says so before a walk, and the walk's end says it again (with --yes
// no plan is shown).
func printNotUndoable(f *Factory, plan saga.Plan) {
	for _, e := range plan.NotUndoable {
		fmt.Fprintln(f.Out, textfmt.Escape(fmt.Sprintf("not undoable: effect %d %s (irreversible, %s)", e.ID, e.Tool, e.State)))
	}
}

// ask reads a yes/no answer from stdin; anything but y or yes is no.
func ask(f *Factory, prompt string) (bool, error) {
	fmt.Fprint(f.ErrOut, textfmt.Escape(prompt))
	line, err := f.stdinLines().ReadString('\n')
	if err != nil && line == "" {
		return false, nil
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}
