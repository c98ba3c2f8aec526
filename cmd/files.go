package cmd

import "github.com/spf13/cobra"

func newCmdFiles(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "files <command>",
		Short: "Restore the files a call changed: the compensation of a coding agent's Write, Edit and shell commands",
		Long: `Before a coding agent's Write, Edit or compensable shell command runs, undolog
records what the files it may change hold (the named file, or the whole project)
in a private store under $XDG_STATE_HOME/undolog/files ($UNDOLOG_FILES_DIR);
after it, what the call changed. The call's compensation is 'undolog files restore', which 'undolog undo'
runs last in first out with the session's other compensations.`,
	}
	c.AddCommand(newCmdFilesRestore(f))
	return c
}
