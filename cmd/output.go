package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/undolog/undolog/internal/textfmt"
)

// Output formats.
const (
	formatText  = "text"
	formatJSON  = "json"
	formatJSONL = "jsonl"
	formatIDs   = "ids"
	// formatFollowedJSONL is `list --follow -o jsonl`'s listing: each effect
	// as the changes that follow it are, {"effect": ...}.
	formatFollowedJSONL = "followed-jsonl"
)

// addFormatFlag adds -o; listing commands also offer ids (one id a line).
func addFormatFlag(c *cobra.Command, p *string, ids bool) {
	allowed := "text, json or jsonl"
	if ids {
		allowed = "text, json, jsonl or ids"
	}
	c.Flags().StringVarP(p, "output", "o", formatText, "output format: "+allowed)
}

func checkFormat(v string, ids bool) error {
	switch v {
	case formatText, formatJSON, formatJSONL:
		return nil
	case formatIDs:
		if ids {
			return nil
		}
	}
	if ids {
		return usagef("unknown output format %q: use text, json, jsonl or ids", v)
	}
	return usagef("unknown output format %q: use text, json or jsonl", v)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeObject writes one object as indented JSON (json) or on one line
// (jsonl: one object a line, whatever the command).
func writeObject(w io.Writer, format string, v any) error {
	if format == formatJSONL {
		return writeJSONLine(w, v)
	}
	return writeJSON(w, v)
}

func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeList writes items as one JSON array (json) or one object a line (jsonl).
func writeList[T any](w io.Writer, format string, items []T) error {
	if format == formatJSON {
		if items == nil {
			items = []T{}
		}
		return writeJSON(w, items)
	}
	for _, it := range items {
		if err := writeJSONLine(w, it); err != nil {
			return err
		}
	}
	return nil
}

// printListing writes a listing in the chosen format: a JSON array, JSON
// Lines, one id a line, or the text table that text() renders.
func printListing[T any](f *Factory, format string, items []T, id func(T) any, text func() error) error {
	switch format {
	case formatJSON, formatJSONL:
		return writeList(f.Out, format, items)
	case formatIDs:
		for _, it := range items {
			if _, err := fmt.Fprintln(f.Out, id(it)); err != nil {
				return err
			}
		}
		return nil
	}
	return text()
}

// cell is one cell of a table the commands print.
type cell = textfmt.Cell

func plain(s string) cell     { return cell{Text: s} }
func stateCell(s string) cell { return cell{Text: s, Color: textfmt.StateColor(s)} }
func idCell(id uint64) cell   { return cell{Text: strconv.FormatUint(id, 10)} }

// paintState is a state in its colour when the output is coloured.
func paintState(f *Factory, state string) string {
	if !f.Color() {
		return state
	}
	return textfmt.PaintState(state)
}

// renderTable prints a listing's rows: aligned under header on a terminal,
// tab-separated when piped (see textfmt.Table).
func renderTable(f *Factory, header []string, rows [][]cell) error {
	return newTable(f, f.Out, header, f.StdoutIsTerminal()).Write(rows)
}

// newTable is a table of the command's text output to w, aligned on a
// terminal; piped, with its header too if --headers or $UNDOLOG_HEADERS asks.
func newTable(f *Factory, w io.Writer, header []string, terminal bool) *textfmt.Table {
	t := textfmt.NewTable(w, header, terminal, f.Color())
	if terminal {
		t.Fit(f.terminalWidth())
	}
	if f.headers || headersFromEnv(f.Getenv) {
		t.PipedHeader()
	}
	return t
}

// headersEnv asks for a header row in piped text output, as --headers does.
const headersEnv = "UNDOLOG_HEADERS"

// headersFromEnv reads $UNDOLOG_HEADERS, checked (checkHeadersEnv) before a
// command runs.
func headersFromEnv(getenv func(string) string) bool {
	on, err := strconv.ParseBool(getenv(headersEnv))
	return err == nil && on
}

// checkHeadersEnv refuses an $UNDOLOG_HEADERS that is not a boolean, so that
// a misspelt value does not go unnoticed.
func checkHeadersEnv(getenv func(string) string) error {
	if v := getenv(headersEnv); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			return usagef("%s=%q: want 1 or 0 (true or false)", headersEnv, v)
		}
	}
	return nil
}

// addHeadersFlag adds --headers to a command whose text output is a table.
func addHeadersFlag(f *Factory, c *cobra.Command) {
	c.Flags().BoolVar(&f.headers, "headers", false, "-o text, piped: print the header row too, above the tab-separated rows (default $"+headersEnv+")")
}

// ago and compactDuration render times compactly (45s, 12m, 3h, 2d).
var (
	ago             = textfmt.Ago
	compactDuration = textfmt.Duration
)

// parseSince accepts RFC 3339 or a duration back from now (90s, 1h, 7d), the
// value of flag (named in its errors).
func parseSince(now time.Time, flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	// A longer duration would wrap around to a time in the future or to
	// seconds ago, and gc would drop what was just finished.
	d, err := parseDuration(s)
	switch {
	case errors.Is(err, errDurationTooLong):
		return time.Time{}, usagef("%s %q: %v", flag, s, err)
	case err != nil || d < 0:
		return time.Time{}, usagef("%s %q: use RFC 3339 (2026-11-30T09:00:00Z) or a duration (90s, 1h, 7d)", flag, s)
	}
	return now.Add(-d), nil
}

var errDurationTooLong = fmt.Errorf("out of range: a duration is at most %dd (about 292 years)", maxDays)

// parseDuration reads what time.ParseDuration does, or whole days (7d);
// errDurationTooLong for a well-formed duration too long to hold.
func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" && strings.Trim(days, "0123456789") == "" {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n > maxDays {
			return 0, errDurationTooLong
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil && durationSyntax().MatchString(s) {
		return 0, errDurationTooLong // well formed: ParseDuration refused it for its size
	}
	if err != nil {
		return 0, fmt.Errorf("not a duration (90s, 30m, 2h, 7d)")
	}
	return d, nil
}

// durationFlag is a flag's time.Duration read by parseDuration, so that
// every duration flag takes days as --since and --older-than do.
type durationFlag struct{ p *time.Duration }

func (d durationFlag) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d.p = v
	return nil
}

func (d durationFlag) String() string {
	if d.p == nil {
		return "0s"
	}
	return d.p.String()
}

func (durationFlag) Type() string { return "duration" }

// durationVar defines a duration flag that also takes days (7d).
func durationVar(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationFlag{p}, name, usage)
}

// maxDays is the most whole days a time.Duration holds.
const maxDays = int64(math.MaxInt64 / int64(24*time.Hour))

// durationSyntax is what time.ParseDuration reads, unsigned.
var durationSyntax = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\+?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)
})

// parseID reads an effect id.
func parseID(s string) (uint64, error) {
	id, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || id == 0 {
		return 0, usagef("%q is not an effect id (a positive integer)", s)
	}
	return id, nil
}

// collectIDs reads ids from the arguments, or from stdin when the only
// argument is "-" (so `undolog approvals -o ids | undolog approve -` works,
// also when nothing waits).
func collectIDs(f *Factory, args []string) ([]uint64, error) {
	if len(args) == 1 && args[0] == "-" {
		data, err := io.ReadAll(f.In)
		if err != nil {
			return nil, err
		}
		// None is a batch of nothing (nothing waits for approval): done, not
		// a usage error that would stop a `set -e` script.
		args = strings.Fields(string(data))
	}
	ids := make([]uint64, 0, len(args))
	for _, a := range args {
		id, err := parseID(a)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
