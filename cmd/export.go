package cmd

import (
	"bufio"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
)

type exportOptions struct {
	session string
}

func newCmdExport(f *Factory) *cobra.Command {
	opts := &exportOptions{}
	c := &cobra.Command{
		Use:   "export",
		Short: "Write every record of the log as JSON Lines, to audit or rebuild elsewhere",
		Long: `Write every record of the log (or of one session) as JSON Lines:
{"type": "meta|session|session_history|effect|history|undo|approval|end", "record": {...}}.
History records carry their hash chain, so an export can be checked elsewhere; the
last record counts what the export holds, so that one cut short is told from a
whole one (import refuses it).`,
		Example: `  undolog export > undolog-$(date +%F).jsonl
  undolog export --session deploy-117 | jq 'select(.type=="history")'`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			w := bufio.NewWriter(f.Out)
			err := f.ReadLog().Export(c.Context(), opts.session, func(r effectlog.ExportRecord) error {
				return writeJSONLine(w, r)
			})
			if ferr := w.Flush(); err == nil {
				err = ferr
			}
			return err
		},
	}
	c.Flags().StringVar(&opts.session, "session", "", "only this session's records")
	return c
}
