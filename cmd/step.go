package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// stepOptions are the flags shared by the commands that move an effect.
type stepOptions struct {
	as       string
	reason   string
	decision bool // approve, reject: a person's decision
	output   string
	result   string // commit
	errMsg   string // fail
}

func addStepFlags(c *cobra.Command, opts *stepOptions) {
	c.Flags().StringVar(&opts.as, "as", "", "actor recorded in history (default $UNDOLOG_ACTOR, else user@host)")
	c.Flags().StringVar(&opts.reason, "reason", "", "why, recorded in history")
	addFormatFlag(c, &opts.output, false)
}

// newStepCmd builds a command that moves effects to one state. With multi,
// it takes several ids, or - to read them from stdin.
func newStepCmd(f *Factory, use, short string, to sm.State, multi bool) (*cobra.Command, *stepOptions) {
	opts := &stepOptions{decision: to == sm.Approved || to == sm.Rejected}
	args := exactArgs(1, "one effect id")
	if multi {
		args = func(c *cobra.Command, a []string) error {
			if len(a) == 0 {
				return usagef("%s takes effect ids, or - to read them from stdin", c.CommandPath())
			}
			return nil
		}
	}
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(c *cobra.Command, args []string) error {
			ids, err := collectIDs(f, args)
			if err != nil {
				return err
			}
			return runSteps(c.Context(), f, opts, ids, to)
		},
	}
	addStepFlags(c, opts)
	return c, opts
}

// runSteps applies the transition to each id. With several ids it goes on
// past a failure, reports each, and exits with the first failure's code.
func runSteps(ctx context.Context, f *Factory, opts *stepOptions, ids []uint64, to sm.State) error {
	if err := checkFormat(opts.output, false); err != nil {
		return err
	}
	change := model.Change{Actor: f.Actor(opts.as), Reason: opts.reason, Error: opts.errMsg}
	if opts.result != "" {
		data, err := readInput(f, opts.result)
		if err != nil {
			return err
		}
		change.Result = json.RawMessage(data)
	}
	store, err := f.ExistingLog()
	if err != nil {
		return err
	}
	firstCode := ExitOK
	var done []model.Effect
	for _, id := range ids {
		var e model.Effect
		err := error(nil)
		switch to {
		case sm.Approved:
			err = f.refuseAgentEffectDecision(ctx, id, "approve")
		case sm.Rejected:
			err = f.refuseAgentEffectDecision(ctx, id, "reject")
		}
		if err == nil {
			e, err = store.Transition(ctx, id, to, change)
		}
		if errors.Is(err, model.ErrAwaitsApproval) {
			err = fmt.Errorf("%w: %s approve %d", err, f.CLI(), id)
		}
		var decided *effectlog.AlreadyDecided
		if opts.decision && errors.As(err, &decided) {
			// Whose decision stands is all a person deciding needs.
			err = &exitError{code: ExitCode(err), msg: decided.Msg}
		}
		if err != nil {
			if len(ids) == 1 {
				return err
			}
			msg := textfmt.OneLine(err.Error())
			if own := fmt.Sprintf("effect %d", id); !strings.HasPrefix(msg, own+" ") && !strings.HasPrefix(msg, own+"'s ") {
				msg = own + ": " + msg // which id of the batch it is
			}
			fmt.Fprintf(f.ErrOut, "undolog: %s\n", textfmt.Escape(msg))
			if firstCode == ExitOK {
				firstCode = ExitCode(err)
			}
			continue
		}
		done = append(done, e)
		if opts.output == formatText {
			fmt.Fprintf(f.Out, "effect %d %s\n", e.ID, paintState(f, string(e.State)))
		}
	}
	switch {
	case opts.output == formatJSON && len(ids) == 1 && len(done) == 1:
		if err := writeJSON(f.Out, done[0]); err != nil {
			return err
		}
	case opts.output != formatText:
		if err := writeList(f.Out, opts.output, done); err != nil {
			return err
		}
	}
	if firstCode != ExitOK {
		return &exitError{code: firstCode}
	}
	return nil
}
