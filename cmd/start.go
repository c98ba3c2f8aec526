package cmd

import (
	"github.com/spf13/cobra"

	sm "github.com/undolog/undolog/statemachine"
)

func newCmdStart(f *Factory) *cobra.Command {
	c, _ := newStepCmd(f, "start ID", "Mark an effect executing (pending or approved -> executing)", sm.Executing, false)
	return c
}
