package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
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
r reject, R resolve a failed compensation, t transition, u undo the session,
/ filter (live; esc clears it), f follow, ? help, q quit. The footer offers only
what the selected row allows. The title names the log. What other processes do shows within a second; the
log is never held open. A log file that does not exist is refused (exit 3):
nothing is recorded there to review, and a mistyped --log would be an empty
view in silence.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			f.handleInterrupts() // it waits, or runs other commands
			return runTUI(c, f, opts.session, opts.as)
		},
	}
	c.Flags().StringVar(&opts.session, "session", "", "open this session")
	c.Flags().StringVar(&opts.as, "as", "", "actor recorded in history (default $UNDOLOG_ACTOR, else user@host)")
	return c
}

func runTUI(c *cobra.Command, f *Factory, session, as string) error {
	store := f.Log()
	// Checked before the terminal, so that scripts can see it too.
	if fl, ok := store.(effectlog.FileLog); ok {
		if _, err := os.Lstat(fl.Path()); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s", model.ErrNotFound, noLogText(fl.Path()))
		}
	}
	if !f.StdoutIsTerminal() || !f.StdinIsTerminal() {
		return usagef("tui needs a terminal; for scripts use list, show and approvals with -o json")
	}
	if session != "" {
		if _, err := store.GetSession(c.Context(), session); err != nil {
			return err
		}
	}
	opts := tui.Options{Log: store, Address: logAddress(store, f.LogPath()), CLI: f.CLI(), Session: session, Actor: f.Actor(as), Now: f.Now, Color: f.Color()}
	if out, ok := f.Out.(interface{ Fd() uintptr }); ok {
		opts.Width, opts.Height, _ = term.GetSize(int(out.Fd())) // the first frame's size
	}
	return tui.Run(c.Context(), opts, f.In, f.Out)
}

// logAddress is how the view names its log: a file by its absolute path, a
// PostgreSQL URL without its password.
func logAddress(store effectlog.Log, addr string) string {
	if fl, ok := store.(effectlog.FileLog); ok {
		if abs, err := filepath.Abs(fl.Path()); err == nil {
			return abs
		}
		return fl.Path()
	}
	return logaddr.Shown(addr)
}
