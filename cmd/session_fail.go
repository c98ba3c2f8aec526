package cmd

import (
	"github.com/spf13/cobra"

	sm "github.com/undolog/undolog/statemachine"
)

func newCmdSessionFail(f *Factory) *cobra.Command {
	return newSessionEndCmd(f, "fail", "Mark a session failed, ready to be undone", sm.SessionFailed)
}
