package cmd

import (
	"github.com/spf13/cobra"

	"github.com/undolog/undolog/tui"
)

type tuiOptions struct {
	session string
	as      string
}

func newCmdTUI(f *Factory) *cobra.Command {
	opts := &tuiOptions{}
	c := &cobra.Command{
		Use:   "tui",
		Short: "Review, approve, step and undo in an interactive terminal view",
		Long: `Open the interactive view of the log: sessions, then a session's effects with
the detail of the selected one. Keys: arrows or j/k, enter, esc, tab; a approve,
r reject, t transition, u undo the session, / filter, f follow, ? help, q quit.
What other processes do shows within a second; the log is never held open.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			return runTUI(c, f, opts.session, opts.as)
		},
	}
	c.Flags().StringVar(&opts.session, "session", "", "open this session")
	c.Flags().StringVar(&opts.as, "as", "", "actor recorded in history (default $UNDOLOG_ACTOR, else user@host)")
	return c
}

func runTUI(c *cobra.Command, f *Factory, session, as string) error {
	if !f.StdoutIsTerminal() || !f.StdinIsTerminal() {
		return usagef("tui needs a terminal; for scripts use list, show and approvals with -o json")
	}
	store := f.Log()
	if session != "" {
		if _, err := store.GetSession(c.Context(), session); err != nil {
			return err
		}
	}
	return tui.Run(c.Context(), tui.Options{Log: store, Session: session, Actor: f.Actor(as), Now: f.Now, Color: f.Color()}, f.In, f.Out)
}
