package cmd

import (
	"strings"

	"github.com/spf13/cobra"

	sm "github.com/undolog/undolog/statemachine"
)

func newCmdTransition(f *Factory) *cobra.Command {
	opts := &stepOptions{}
	names := make([]string, len(sm.States))
	for i, s := range sm.States {
		names[i] = string(s)
	}
	c := &cobra.Command{
		Use:   "transition ID STATE",
		Short: "Move an effect to any state of the spec, if the spec allows it",
		Long: "Move an effect to a state named by the spec (" + strings.Join(names, ", ") + ").\n" +
			"An invalid transition fails with exit code 4 and the spec's reason; nothing changes.",
		Args:      exactArgs(2, "an effect id and a state"),
		ValidArgs: names,
		RunE: func(c *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			to, err := sm.ParseState(args[1])
			if err != nil {
				return err
			}
			return runSteps(c.Context(), f, opts, []uint64{id}, to)
		},
	}
	addStepFlags(c, opts)
	c.Flags().StringVar(&opts.result, "result", "", "with committed: the result `JSON`, @FILE or -")
	c.Flags().StringVar(&opts.errMsg, "error", "", "with pending (a failure): what went wrong")
	return c
}
