package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

type sessionEndOptions struct {
	as     string
	reason string
	output string
}

func newCmdSessionComplete(f *Factory) *cobra.Command {
	return newSessionEndCmd(f, "complete", "Mark a session completed: it takes no new effects", sm.SessionCompleted)
}

// newSessionEndCmd builds `session complete` and `session fail`, which differ
// only in the state they move the session to.
func newSessionEndCmd(f *Factory, name, short string, to sm.SessionState) *cobra.Command {
	opts := &sessionEndOptions{}
	c := &cobra.Command{
		Use:   name + " NAME",
		Short: short,
		Args:  exactArgs(1, "one session name"),
		RunE: func(c *cobra.Command, args []string) error {
			return moveSession(c.Context(), f, opts, args[0], to)
		},
	}
	c.Flags().StringVar(&opts.as, "as", "", "actor recorded in history (default $UNDOLOG_ACTOR, else user@host)")
	c.Flags().StringVar(&opts.reason, "reason", "", "why, recorded in history")
	addFormatFlag(c, &opts.output, false)
	return c
}

// moveSession moves session id to state to, recording the options' actor
// and reason, and prints the session.
func moveSession(ctx context.Context, f *Factory, opts *sessionEndOptions, id string, to sm.SessionState) error {
	if err := checkFormat(opts.output, false); err != nil {
		return err
	}
	store, err := f.ExistingLog()
	if err != nil {
		return err
	}
	sess, err := store.SetSessionState(ctx, id, to, model.Change{Actor: f.Actor(opts.as), Reason: opts.reason})
	if errors.Is(err, sm.ErrInvalidStateTransition) {
		if now, gerr := store.GetSession(ctx, id); gerr == nil && now.State == sm.SessionHalted {
			// What a halted session can do next, after the spec's reason.
			return fmt.Errorf("%w It is halted (a person rejected a call, or a compensation failed): a person resumes it (%s session resume %s --as NAME --reason WHY) or undoes it (%s undo %s --yes)",
				err, f.CLI(), id, f.CLI(), id)
		}
	}
	if err != nil {
		return err
	}
	if opts.output != formatText {
		return writeObject(f.Out, opts.output, sess)
	}
	_, err = f.Out.Write([]byte(sess.ID + " " + string(sess.State) + "\n"))
	return err
}
