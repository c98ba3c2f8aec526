package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
)

type importOptions struct {
	output string
}

func newCmdImport(f *Factory) *cobra.Command {
	opts := &importOptions{}
	c := &cobra.Command{
		Use:   "import FILE|-",
		Short: "Write an export's records into an empty log, to move a log to another engine",
		Long: `Write the records of 'undolog export' (JSON Lines, from FILE or stdin) into the log,
which must be empty: the same sessions, effects, ids, times and history hashes, so that
'undolog verify' finds the log as clean as the one exported, on any engine. Each session
is one transaction.`,
		Example: `  undolog export --log ~/.local/state/undolog/undolog.db > local.jsonl
  undolog import --log postgres://owner@db.internal/undolog local.jsonl   # into an empty database, as its owner`,
		Args: exactArgs(1, "the export to read (a file, or - for stdin)"),
		RunE: func(c *cobra.Command, args []string) error {
			// An interrupt ends the import between two records, and what was
			// imported is taken out: that must not be cut short in its turn.
			f.handleInterrupts()
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			in := f.In
			if args[0] != "-" {
				file, err := os.Open(args[0])
				if err != nil {
					return usagef("import: %v", err)
				}
				defer file.Close()
				in = file
			}
			rep, err := f.Log().Import(c.Context(), exportReader(c.Context(), in))
			if err != nil {
				return err
			}
			if opts.output != formatText {
				return writeObject(f.Out, opts.output, rep)
			}
			_, err = fmt.Fprintf(f.Out, "imported %s, %s, %s\n", textfmt.Count(rep.Sessions, "session"), textfmt.Count(rep.Effects, "effect"), textfmt.Count(rep.Records, "history record"))
			return err
		},
	}
	addFormatFlag(c, &opts.output, false)
	return c
}

// exportReader reads an export's lines one at a time, each into the type
// its "type" names. The reading is a goroutine's, so that an interrupt ends
// a wait for the next line (a pipe from a producer that hangs) at once: the
// import then stops with ctx's error, and the goroutine is left to the
// process's end.
func exportReader(ctx context.Context, r io.Reader) func() (effectlog.ExportRecord, bool, error) {
	type read struct {
		rec  effectlog.ExportRecord
		more bool
		err  error
	}
	next := parseExport(r)
	reads := make(chan read, 16)
	go func() {
		defer close(reads)
		for {
			rec, more, err := next()
			select {
			case reads <- read{rec, more, err}:
			case <-ctx.Done():
				return
			}
			if !more || err != nil {
				return
			}
		}
	}()
	return func() (effectlog.ExportRecord, bool, error) {
		select {
		case r, ok := <-reads:
			if !ok {
				return effectlog.ExportRecord{}, false, ctx.Err()
			}
			return r.rec, r.more, r.err
		case <-ctx.Done():
			return effectlog.ExportRecord{}, false, ctx.Err()
		}
	}
}

// parseExport is exportReader's reading, on the caller's goroutine.
func parseExport(r io.Reader) func() (effectlog.ExportRecord, bool, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20) // an effect's args and result may be large
	return func() (effectlog.ExportRecord, bool, error) {
		for sc.Scan() {
			line := sc.Bytes()
			if len(line) == 0 {
				continue
			}
			var raw struct {
				Type   string          `json:"type"`
				Record json.RawMessage `json:"record"`
			}
			if err := json.Unmarshal(line, &raw); err != nil {
				return effectlog.ExportRecord{}, false, fmt.Errorf("%w: not a line of an export: %v", model.ErrInvalidInput, err)
			}
			var v any
			switch raw.Type {
			case "meta":
				v = new(effectlog.ExportMeta)
			case "session":
				v = new(model.Session)
			case "session_history", "history":
				v = new(model.HistoryRecord)
			case "effect":
				v = new(model.Effect)
			case "undo":
				v = new(model.UndoEntry)
			case "approval":
				v = new(model.Approval)
			case "end":
				v = new(effectlog.ExportEnd)
			default:
				return effectlog.ExportRecord{}, false, fmt.Errorf("%w: unknown record type %q", model.ErrInvalidInput, raw.Type)
			}
			if err := json.Unmarshal(raw.Record, v); err != nil {
				return effectlog.ExportRecord{}, false, fmt.Errorf("%w: a %s record: %v", model.ErrInvalidInput, raw.Type, err)
			}
			return effectlog.ExportRecord{Type: raw.Type, Record: v}, true, nil
		}
		if err := sc.Err(); err != nil {
			return effectlog.ExportRecord{}, false, fmt.Errorf("%w: %v", model.ErrInvalidInput, err)
		}
		return effectlog.ExportRecord{}, false, nil
	}
}
