package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/logaddr"
)

type compactOptions struct {
	output            string
	acceptJournalLoss bool
}

func newCmdCompact(f *Factory) *cobra.Command {
	opts := &compactOptions{}
	c := &cobra.Command{
		Use:   "compact",
		Short: "Rewrite the log without its free space, atomically",
		Long: `Rewrite the log into a new file without the pages it no longer uses, with the
writes still in its journal folded in, and rename it into place atomically. Refused
(exit ` + fmt.Sprint(ExitBusy) + `) while another process holds the log. Right after a compaction the file
alone is the whole log: the one time it may be copied without its journal.

A log whose journal is missing, emptied or not its own (an older copy, another log's,
a file copied without it) is refused (exit ` + fmt.Sprint(ExitError) + `): the journal may hold the last writes
(up to 64). Put the journal back, or with --accept-journal-loss set it aside
(renamed to <journal>.rejected-<time>) and compact the file as it stands, without them.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			fl, ok := f.Log().(effectlog.FileLog)
			if !ok {
				return usagef("compact rewrites a log file; %s is not one", logaddr.Shown(f.LogPath()))
			}
			aside := ""
			if opts.acceptJournalLoss {
				var err error
				if aside, err = fl.AcceptJournalLoss(); err != nil {
					return err
				}
			}
			before, after, err := fl.Compact()
			if err != nil {
				return err
			}
			if opts.output != formatText {
				out := map[string]any{"bytes_before": before, "bytes_after": after}
				if opts.acceptJournalLoss {
					out["journal_set_aside"] = aside
				}
				return writeObject(f.Out, opts.output, out)
			}
			if opts.acceptJournalLoss && aside == "" {
				fmt.Fprintf(f.Out, "accepted the loss of the missing journal of %s\n", textfmt.Escape(f.LogPath()))
			} else if opts.acceptJournalLoss {
				fmt.Fprintf(f.Out, "accepted the loss of the journal of %s: set aside as %s\n", textfmt.Escape(f.LogPath()), textfmt.Escape(aside))
			}
			_, err = fmt.Fprintf(f.Out, "compacted %s: %s -> %s\n", textfmt.Escape(f.LogPath()), byteSize(before), byteSize(after))
			return err
		},
	}
	addFormatFlag(c, &opts.output, false)
	c.Flags().BoolVar(&opts.acceptJournalLoss, "accept-journal-loss", false, "set aside a journal that is missing or not the log's, losing the writes only it held, and compact the file as it stands")
	return c
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
