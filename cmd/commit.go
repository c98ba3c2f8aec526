package cmd

import (
	"github.com/spf13/cobra"

	sm "github.com/undolog/undolog/statemachine"
)

func newCmdCommit(f *Factory) *cobra.Command {
	c, opts := newStepCmd(f, "commit ID", "Record an effect's result (executing -> committed)", sm.Committed, false)
	c.Flags().StringVar(&opts.result, "result", "", "the result: `JSON`, @FILE, or - for stdin (cached for replays)")
	return c
}
