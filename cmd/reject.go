package cmd

import (
	"github.com/spf13/cobra"

	sm "github.com/undolog/undolog/statemachine"
)

func newCmdReject(f *Factory) *cobra.Command {
	c, _ := newStepCmd(f, "reject ID... | -", "Reject irreversible effects (pending -> rejected); halts their sessions", sm.Rejected, true)
	c.Example = `  undolog reject 42 --reason "wrong account"`
	return c
}
