package cmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/demo"
)

func newCmdDemo(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Write a demo log and open the terminal view on it",
		Long: `Write a realistic demo log (agent and CI sessions with committed, replayed,
failed-and-retried, compensated and compensation-failed effects, a call awaiting
approval and a rejected one) to a new file, and open 'undolog tui' on it when
run at a terminal. It never touches your own log: without --log it writes to a
new temporary directory.`,
		Example: `  undolog demo
  undolog demo --log /tmp/demo.db && undolog --log /tmp/demo.db approvals`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			path := f.LogFlag
			if path == "" {
				dir, err := os.MkdirTemp("", "undolog-demo-")
				if err != nil {
					return err
				}
				path = filepath.Join(dir, "undolog.db")
			} else if _, err := os.Stat(path); err == nil {
				return usagef("%s already exists: the demo writes a new log; choose another --log", path)
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if err := demo.Write(c.Context(), path, f.Now()); err != nil {
				return err
			}
			f.LogFlag = path
			if f.StdoutIsTerminal() && f.StdinIsTerminal() {
				return runTUI(c, f, "", "")
			}
			_, err := fmt.Fprintf(f.Out, "demo log written to %s\nopen it:    undolog tui --log %s\nor script:  undolog --log %s session list\n", path, path, path)
			return err
		},
	}
}
