package cmd

import (
	"github.com/spf13/cobra"

	sm "github.com/undolog/undolog/statemachine"
)

func newCmdApprove(f *Factory) *cobra.Command {
	c, _ := newStepCmd(f, "approve ID... | -", "Approve irreversible effects awaiting a decision (pending -> approved)", sm.Approved, true)
	c.Example = `  undolog approve 42 --reason "checked the amount"
  undolog approvals -o ids | undolog approve -`
	return c
}
