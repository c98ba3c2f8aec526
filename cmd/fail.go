package cmd

import (
	"github.com/spf13/cobra"

	sm "github.com/undolog/undolog/statemachine"
)

func newCmdFail(f *Factory) *cobra.Command {
	c, opts := newStepCmd(f, "fail ID", "Record a failed execution (executing -> pending, to be retried)", sm.Pending, false)
	c.Flags().StringVar(&opts.errMsg, "error", "", "what went wrong")
	return c
}
