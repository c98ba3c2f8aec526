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
	"unicode/utf8"

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

// ANSI colours for states.
const (
	colRed     = "31"
	colGreen   = "32"
	colYellow  = "33"
	colBlue    = "34"
	colMagenta = "35"
	colCyan    = "36"
	colDim     = "2"
	colBold    = "1"
)

var stateColors = map[string]string{
	"pending": colYellow, "executing": colCyan, "committed": colGreen, "compensating": colMagenta,
	"compensated": colBlue, "compensation_failed": colRed, "approved": colGreen, "rejected": colRed,
	"replayed": colDim, "skipped": colDim, "resolved": colBlue,
	"active": colCyan, "awaiting_approval": colYellow, "completed": colGreen, "failed": colRed,
	"halted": colRed,
}

type cell struct {
	text  string
	color string
}

func plain(s string) cell     { return cell{text: s} }
func stateCell(s string) cell { return cell{text: s, color: stateColors[s]} }
func idCell(id uint64) cell   { return cell{text: strconv.FormatUint(id, 10)} }
func paint(f *Factory, c cell) string {
	if c.color == "" || !f.Color() {
		return c.text
	}
	return "\x1b[" + c.color + "m" + c.text + "\x1b[0m"
}

// renderTable prints aligned columns with a header on a terminal, and
// tab-separated rows without a header when piped (as gh does). Cells are
// escaped (textfmt.Escape): a tab or newline in a stored value shows as \t
// or \n and breaks no column or row.
func renderTable(f *Factory, header []string, rows [][]cell) error {
	w := f.Out
	for _, r := range rows {
		for i := range r {
			r[i].text = textfmt.Escape(r[i].text)
		}
	}
	if !f.StdoutIsTerminal() {
		for _, r := range rows {
			parts := make([]string, len(r))
			for i, c := range r {
				parts[i] = c.text
			}
			if _, err := fmt.Fprintln(w, strings.Join(parts, "\t")); err != nil {
				return err
			}
		}
		return nil
	}
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range rows {
		for i, c := range r {
			if n := utf8.RuneCountInString(c.text); i < len(widths) && n > widths[i] {
				widths[i] = n
			}
		}
	}
	line := func(cells []cell) string {
		var b strings.Builder
		for i, c := range cells {
			b.WriteString(paint(f, c))
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c.text)+2))
			}
		}
		return b.String()
	}
	hc := make([]cell, len(header))
	for i, h := range header {
		hc[i] = cell{text: h, color: colBold}
	}
	fmt.Fprintln(w, line(hc))
	for _, r := range rows {
		if _, err := fmt.Fprintln(w, line(r)); err != nil {
			return err
		}
	}
	return nil
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
