package cmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/demo"
	"github.com/undolog/undolog/internal/textfmt"
)

func newCmdDemo(f *Factory) *cobra.Command {
	var keep bool
	c := &cobra.Command{
		Use:   "demo",
		Short: "Write a demo log and open the terminal view on it",
		Long: `Write a realistic demo log (agent and CI sessions with committed, replayed,
failed-and-retried, compensated and compensation-failed effects, a call awaiting
approval and a rejected one) to a new file, and open 'undolog tui' on it when
run at a terminal. It never touches your own log: without --log it writes to a
new temporary directory, which it removes when the view closes unless --keep
is given; either way it says where the log was. With --log, or when not run at
a terminal (to be opened later), the log is kept.`,
		Example: `  undolog demo
  undolog demo --keep
  undolog demo --log /tmp/demo.db && undolog --log /tmp/demo.db approvals`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			f.handleInterrupts() // it waits, or runs other commands
			path, dir := f.logs.address, ""
			if path == "" {
				var err error
				if dir, err = os.MkdirTemp("", "undolog-demo-"); err != nil {
					return err
				}
				path = filepath.Join(dir, "undolog.db")
			} else if _, err := os.Stat(path); err == nil {
				return usagef("%s already exists: the demo writes a new log; choose another --log", path)
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
			interactive := f.StdoutIsTerminal() && f.StdinIsTerminal()
			// A temporary log viewed here goes with the view, also when
			// writing it failed: runs of the demo leave no folders behind.
			remove := dir != "" && interactive && !keep
			if err := demo.Write(c.Context(), path, f.Now()); err != nil {
				if remove {
					os.RemoveAll(dir)
				}
				return err
			}
			f.logs.address = path
			shown := textfmt.Escape(path)
			if !interactive {
				cli := textfmt.Escape(f.CLI())
				if _, err := fmt.Fprintf(f.Out, "demo log written to %s\nopen it:    %s tui\nor script:  %s session list\n", shown, cli, cli); err != nil {
					return err
				}
				if dir != "" { // kept, to be opened later: say how it goes
					_, err := fmt.Fprintf(f.Out, "remove it:  rm -r %s\n", textfmt.Escape(dir))
					return err
				}
				return nil
			}
			err := runTUI(c, f, "", "")
			if cerr := f.closeLogs(); err == nil {
				err = cerr
			}
			if remove {
				if rerr := os.RemoveAll(dir); rerr != nil {
					fmt.Fprintf(f.ErrOut, "undolog: demo log %s not removed: %v\n", shown, rerr)
				} else {
					fmt.Fprintf(f.Out, "the demo log was %s, now removed (undolog demo --keep keeps it)\n", shown)
				}
			} else {
				fmt.Fprintf(f.Out, "the demo log is kept at %s: %s tui\n", shown, textfmt.Escape(f.CLI()))
			}
			return err
		},
	}
	c.Flags().BoolVar(&keep, "keep", false, "keep the temporary demo log after the view closes (and print where)")
	return c
}
