package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

type resolveOptions struct {
	as     string
	reason string
	output string
}

func newCmdResolve(f *Factory) *cobra.Command {
	opts := &resolveOptions{}
	c := &cobra.Command{
		Use:   "resolve ID --reason R",
		Short: "Record a manual fix of a failed compensation, so the next undo walks on; or reclaim a call in doubt",
		Long: `Record a manual fix of a failed compensation, so the next undo walks on.

On a call in doubt (left executing by an owner that died, or whose lease ran
out: a proxy whose server died mid-call, say), resolve records what a person
checked and fails the call back to pending, so that the same call runs again
(an irreversible one once approved again). If it did take effect, record that
instead with 'undolog commit ID --result JSON'. A call whose owner still runs
is refused (exit ` + fmt.Sprint(ExitInProgress) + `).`,
		Example: `  undolog resolve 42 --reason "deleted the bucket by hand"
  undolog resolve 17 --reason "checked: the entity was not created"
  undolog undo deploy-117 --yes`,
		Args: exactArgs(1, "one effect id"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if opts.reason == "" {
				return usagef("resolve needs --reason: say what was done by hand")
			}
			if err := f.refuseAgentEffectDecision(c.Context(), id, "resolve"); err != nil {
				return err
			}
			if done, err := resolveInDoubt(c.Context(), f, id, opts); done || err != nil {
				return err
			}
			store, err := f.ExistingLog()
			if err != nil {
				return err
			}
			u, err := store.UndoStep(c.Context(), id, sm.EntryResolved, model.Change{Actor: f.Actor(opts.as), Reason: opts.reason})
			if err != nil {
				return err
			}
			if opts.output != formatText {
				return writeObject(f.Out, opts.output, u)
			}
			_, err = fmt.Fprintf(f.Out, "effect %d undo entry %s\n", id, paintState(f, string(u.State)))
			return err
		},
	}
	c.Flags().StringVar(&opts.as, "as", "", "actor recorded in history (default $UNDOLOG_ACTOR, else user@host)")
	c.Flags().StringVar(&opts.reason, "reason", "", "what was done by hand (required)")
	addFormatFlag(c, &opts.output, false)
	return c
}
