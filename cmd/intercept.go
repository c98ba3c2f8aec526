package cmd

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

type interceptOptions struct {
	session         string
	tool            string
	tier            string
	args            string
	key             string
	compensateCmd   string
	approvalTimeout time.Duration
	redact          []string
	as              string
	reason          string
	output          string
	start           bool
}

func newCmdIntercept(f *Factory) *cobra.Command {
	opts := &interceptOptions{}
	c := &cobra.Command{
		Use:   "intercept [--session S] --tool NAME --tier TIER",
		Short: "Register a tool call before it runs, and learn what to do with it",
		Long: `Register a tool call in the effect log before it runs. The outcome says what to do:

  new          a new effect, pending: start it, run the call, then commit or fail it
  pending      the same call was registered before and never started: as for new
  retry        the same call failed before and is pending again: run it again
  replayed     the same call already committed: do not run it, use the cached result
  in_progress  the same call is executing or awaiting approval (exit code ` + fmt.Sprint(ExitInProgress) + `)
  rejected     the same call was rejected (exit code ` + fmt.Sprint(ExitRejected) + `)
  safe         a safe call: nothing is logged, run it directly

The session is created if it does not exist. With --start, a call that may run now
(new, pending or retry, and compensable) is also started, in the same write: the
effect is executing, and the step after the call is commit or fail. One process
and one sync where intercept then start take two; an irreversible call still
waits for approval and is started with 'undolog start ID' once approved.

An approved call is run by the program that intercepted it, and by no one
else: the log holds the call, not the program. It waits (undolog show ID, or
the same intercept, which answers in_progress while the call waits), then
starts, runs and commits the call. 'undolog session complete' refuses
(exit code ` + fmt.Sprint(ExitInProgress) + `) while an approved call of the session has not run.`,
		Example: `  undolog intercept --session deploy-117 --tool write_file --tier compensable \
    --args '{"path":"/tmp/x"}' --compensate-cmd 'rm -f /tmp/x'
  id=$(undolog intercept --session deploy-117 --tool write_file --tier compensable \
    --args '{"path":"/tmp/y"}' --start -o ids)`,
		Args: exactArgs(0, "no arguments (use flags)"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, true); err != nil {
				return err
			}
			if opts.session == "" {
				opts.session = f.Getenv("UNDOLOG_SESSION")
			}
			if opts.session == "" {
				return usagef("intercept needs --session (or $UNDOLOG_SESSION)")
			}
			if c.Flags().Changed("compensate-cmd") && strings.TrimSpace(opts.compensateCmd) == "" {
				return usagef("--compensate-cmd is empty: give the command that undoes the call, or leave the flag out")
			}
			tier, err := sm.ParseTier(opts.tier)
			if err != nil {
				return err
			}
			req := effectlog.InterceptRequest{Session: opts.session, Tool: opts.tool, Tier: tier, Key: opts.key,
				ApprovalTimeout: opts.approvalTimeout, CreateSession: true, Actor: f.Actor(opts.as), Reason: opts.reason, Redact: opts.redact,
				Start: opts.start}
			if opts.args != "" {
				data, err := readInput(f, opts.args)
				if err != nil {
					return err
				}
				req.Args = json.RawMessage(data)
			}
			if opts.compensateCmd != "" {
				if tier != sm.Compensable {
					return usagef("--compensate-cmd is for compensable calls; this one is %s", tier)
				}
				argv, err := splitArgv(opts.compensateCmd)
				if err != nil {
					return err
				}
				// Undo runs it where it was given, as exec's --undo: a
				// relative path means what it meant here.
				cwd, err := os.Getwd()
				if err != nil {
					return err
				}
				req.Compensation = &model.Compensation{Kind: model.CompensationCommand, Argv: argv, Dir: cwd}
			}
			res, err := f.Log().Intercept(c.Context(), req)
			if err != nil {
				return err
			}
			switch opts.output {
			case formatText:
				printIntercept(f, res)
			case formatIDs:
				// The effect's id, for the next step's command line; none
				// for a safe call, which has no effect.
				if res.Effect.ID != 0 {
					if _, err := fmt.Fprintln(f.Out, res.Effect.ID); err != nil {
						return err
					}
				}
			default:
				if err := writeObject(f.Out, opts.output, res); err != nil {
					return err
				}
			}
			switch res.Outcome {
			case model.OutcomeInProgress:
				return &exitError{code: ExitInProgress, msg: inProgressMessage(f, res.Effect)}
			case model.OutcomeRejected:
				return &exitError{code: ExitRejected, msg: fmt.Sprintf("effect %d for this call was rejected; it will not run", res.Effect.ID)}
			}
			return nil
		},
	}
	c.Flags().StringVar(&opts.session, "session", "", "session id (default $UNDOLOG_SESSION; created if new)")
	c.Flags().StringVar(&opts.tool, "tool", "", "tool name")
	c.Flags().StringVar(&opts.tier, "tier", "", "safe, compensable or irreversible")
	c.Flags().StringVar(&opts.args, "args", "", "call arguments: `JSON`, @FILE, or - for stdin (default {})")
	c.Flags().StringVar(&opts.key, "key", "", "idempotency key: the same call with another key is a new call")
	c.Flags().StringVar(&opts.compensateCmd, "compensate-cmd", "", "command that undoes the call, run without a shell in this directory ('ARGV...' or a JSON array)")
	durationVar(c.Flags(), &opts.approvalTimeout, "approval-timeout", 0, "irreversible: close the request as timed out after this long (0: never); the same call asks again")
	c.Flags().StringArrayVar(&opts.redact, "redact", nil, "keep matching fields of args and result out of the log: a glob over dotted paths (*.password, *token*); repeatable")
	c.Flags().StringVar(&opts.as, "as", "", "actor recorded in history (default $UNDOLOG_ACTOR, else user@host)")
	c.Flags().StringVar(&opts.reason, "reason", "", "why, recorded in history and the approval request")
	c.Flags().BoolVar(&opts.start, "start", false, "also start a call that may run now (compensable: new, pending or retry), in the same write")
	addFormatFlag(c, &opts.output, true)
	for _, name := range []string{"tool", "tier"} {
		c.MarkFlagRequired(name)
	}
	return c
}

func printIntercept(f *Factory, res effectlog.InterceptResult) {
	e := res.Effect
	switch res.Outcome {
	case model.OutcomeSafe:
		fmt.Fprintln(f.Out, "safe: not logged; run the call directly")
	case model.OutcomeReplayed:
		fmt.Fprintf(f.Out, "replayed effect %d (replay of %d): do not run the call\n", e.ID, *e.ReplayOf)
		fmt.Fprintf(f.Out, "result: %s\n", textfmt.Escape(string(e.Result)))
	default:
		fmt.Fprintf(f.Out, "%s effect %d: %s %s %s\n", res.Outcome, e.ID, textfmt.Escape(e.Tool), e.Tier, paintState(f, string(e.State)))
		if res.Outcome == model.OutcomeNew && e.Tier == sm.Irreversible {
			fmt.Fprintf(f.Out, "waiting for approval: %s approve %d\n", textfmt.Escape(f.CLI()), e.ID)
		}
	}
}

func inProgressMessage(f *Factory, e model.Effect) string {
	if e.State == sm.Pending && e.Tier == sm.Irreversible {
		return fmt.Sprintf("effect %d for this call is awaiting approval: %s approve %d", e.ID, f.CLI(), e.ID)
	}
	return fmt.Sprintf("effect %d for this call is %s", e.ID, e.State)
}
