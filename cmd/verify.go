package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
)

type verifyOptions struct {
	output string
}

func newCmdVerify(f *Factory) *cobra.Command {
	opts := &verifyOptions{}
	c := &cobra.Command{
		Use:   "verify",
		Short: "Check the whole log: hash chains, indexes, signatures, states",
		Long: `Walk the whole log and check every history hash chain, every index entry
against its record, signature uniqueness, per-session counts, and that each
effect's state equals its last history record. Exit code 1 when anything is wrong,
3 when there is no log at the address.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			// A log that is not there is no log that checks: a mistyped
			// --log would be "ok" (exit 3, as tui).
			log, err := f.ExistingLog()
			if err != nil {
				return err
			}
			rep, err := log.Verify(c.Context())
			if err != nil {
				return err
			} else if rep.Empty {
				// A database without the log's tables, as a file not there.
				return fmt.Errorf("%w: %s", model.ErrNotFound, noLogText(logaddr.Shown(f.LogPath())))
			}
			if opts.output != formatText {
				if err := writeObject(f.Out, opts.output, rep); err != nil {
					return err
				}
			} else {
				for _, p := range rep.Problems {
					fmt.Fprintln(f.Out, textfmt.Escape(p.String()))
				}
				if len(rep.Problems) == 0 {
					fmt.Fprintf(f.Out, "ok: %s, %s, %s\n", textfmt.Count(rep.Sessions, "session"), textfmt.Count(rep.Effects, "effect"), textfmt.Count(rep.Records, "history record"))
				}
			}
			if n := len(rep.Problems); n > 0 {
				return &exitError{code: ExitError, msg: fmt.Sprintf("verify: %s in %s", textfmt.Count(n, "problem"), logaddr.Shown(f.LogPath()))}
			}
			return nil
		},
	}
	addFormatFlag(c, &opts.output, false)
	return c
}
