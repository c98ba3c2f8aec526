package cmd

import "github.com/spf13/cobra"

func newCmdSession(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "session <command>",
		Short: "Start, list, inspect and end sessions",
		Long:  "A session groups the effects of one agent run or one CI pipeline. It is named by its id.",
	}
	c.AddCommand(
		newCmdSessionStart(f),
		newCmdSessionList(f),
		newCmdSessionShow(f),
		newCmdSessionComplete(f),
		newCmdSessionFail(f),
		newCmdSessionResume(f),
	)
	return c
}
