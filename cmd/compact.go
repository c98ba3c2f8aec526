package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/logaddr"
)

type compactOptions struct {
	output string
}

func newCmdCompact(f *Factory) *cobra.Command {
	opts := &compactOptions{}
	c := &cobra.Command{
		Use:   "compact",
		Short: "Rewrite the log without its free space, atomically",
		Long: `Rewrite the log into a new file without the pages it no longer uses, with the
writes still in its journal folded in, and rename it into place atomically. Refused
(exit ` + fmt.Sprint(ExitBusy) + `) while another process holds the log.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			fl, ok := f.Log().(effectlog.FileLog)
			if !ok {
				return usagef("compact rewrites a log file; %s is not one", logaddr.Shown(f.LogPath()))
			}
			before, after, err := fl.Compact()
			if err != nil {
				return err
			}
			if opts.output != formatText {
				return writeObject(f.Out, opts.output, map[string]int64{"bytes_before": before, "bytes_after": after})
			}
			_, err = fmt.Fprintf(f.Out, "compacted %s: %s -> %s\n", textfmt.Escape(f.LogPath()), byteSize(before), byteSize(after))
			return err
		},
	}
	addFormatFlag(c, &opts.output, false)
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
