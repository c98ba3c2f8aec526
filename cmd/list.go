package cmd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

type listOptions struct {
	session string
	state   string
	tier    string
	tool    string
	undo    string
	since   string
	limit   int
	follow  bool
	output  string
}

// followInterval is how often --follow polls the log's change feed on an
// engine that cannot tell of changes (a file); one that can (PostgreSQL)
// wakes it at once, with the log's slow poll as the safety net.
const followInterval = 200 * time.Millisecond

func newCmdList(f *Factory) *cobra.Command {
	opts := &listOptions{}
	c := &cobra.Command{
		Use:   "list",
		Short: "List effects, newest first",
		Example: `  undolog list --session deploy-117
  undolog list --state pending --tier irreversible -o json | jq '.[].id'
  undolog list --follow`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, true); err != nil {
				return err
			}
			format := opts.output
			if opts.follow {
				switch opts.output {
				case formatJSON:
					// One array cannot end while changes keep coming.
					return usagef("--follow prints a change at a time: use -o jsonl, ids or text")
				case formatJSONL:
					format = formatFollowedJSONL
				}
			}
			filter, err := opts.filter(f)
			if err != nil {
				return err
			}
			store := f.ReadLog()
			var position uint64
			if opts.follow {
				// Take the position first: nothing recorded after the listing is missed.
				if position, err = store.LastChange(c.Context()); err != nil {
					return err
				}
			}
			// A follower prints no change the listing already shows: one
			// committed between the position's read and the listing's, or
			// on PostgreSQL before it had its position (given after the
			// commit).
			var listed map[uint64]uint32
			if opts.follow {
				listed = map[uint64]uint32{}
			}
			shown, more, err := streamEffects(c.Context(), f, store, format, filter, listed)
			if err != nil {
				return err
			}
			if more && opts.output == formatText {
				fmt.Fprintf(f.ErrOut, "the newest %s; --limit 0 lists all\n", textfmt.Count(shown, "matching effect"))
			}
			if !opts.follow {
				return nil
			}
			return follow(c.Context(), f, store, opts, position, listed)
		},
	}
	c.Flags().StringVar(&opts.session, "session", "", "only effects of this session")
	c.Flags().StringVar(&opts.state, "state", "", "only effects in this state, as the STATE column says it (failed, undone, undo failed, 'committed, undone') or by the spec's name (pending, committed...)")
	c.Flags().StringVar(&opts.tier, "tier", "", "only effects of this tier")
	c.Flags().StringVar(&opts.tool, "tool", "", "only effects of this tool")
	c.Flags().StringVar(&opts.undo, "undo", "", "only effects whose undo is: "+strings.Join(textfmt.UndoWordList()[:6], ", ")+" (the UNDO column's words; or the spec's names)")
	c.Flags().StringVar(&opts.since, "since", "", "only effects created since a time (RFC 3339) or duration (1h, 7d)")
	c.Flags().IntVar(&opts.limit, "limit", 50, "at most this many effects (0: all)")
	c.Flags().BoolVarP(&opts.follow, "follow", "f", false, "then print transitions as they happen, until interrupted")
	addFormatFlag(c, &opts.output, true)
	addHeadersFlag(f, c)
	return c
}

func (o *listOptions) filter(f *Factory) (effectlog.EffectFilter, error) {
	filter := effectlog.EffectFilter{Session: o.session, Tool: o.tool, Limit: o.limit}
	if o.limit < 0 {
		return filter, usagef("--limit must not be negative")
	}
	if o.state != "" {
		if err := filterByStatus(&filter, o.state); err != nil {
			return filter, err
		}
	}
	if o.undo != "" {
		u, ok := textfmt.UndoNamed(o.undo)
		if !ok {
			return filter, usagef("unknown undo state %q (valid: %s)", o.undo, strings.Join(textfmt.UndoWordList(), ", "))
		}
		if filter.Undo != "" && filter.Undo != sm.EntryState(u) {
			return filter, usagef("--state %q and --undo %q select no effect together", o.state, o.undo)
		}
		filter.Undo = sm.EntryState(u)
	}
	if o.tier != "" {
		t, err := sm.ParseTier(o.tier)
		if err != nil {
			return filter, err
		}
		filter.Tier = t
	}
	since, err := parseSince(f.Now(), "--since", o.since)
	filter.Since = since
	return filter, err
}

// filterByStatus sets the filter's state, undo state or failed runs to what
// word selects: a state's spec name, or a word of the STATE column
// ("failed", "undone", "committed, undone").
func filterByStatus(filter *effectlog.EffectFilter, word string) error {
	if st, err := sm.ParseState(strings.ToLower(strings.TrimSpace(word))); err == nil {
		filter.State = st
		return nil
	}
	sel, ok := textfmt.StatusNamed(word)
	if ok && sel.State != "" {
		_, err := sm.ParseState(sel.State)
		ok = err == nil
	}
	if !ok {
		names := make([]string, len(sm.States))
		for i, s := range sm.States {
			names[i] = string(s)
		}
		return usagef("unknown state %q (valid: %s; or as the STATE column says it: %s)", word,
			strings.Join(names, ", "), strings.Join(textfmt.StatusWordList(), ", "))
	}
	filter.State, filter.Undo, filter.Failed = sm.State(sel.State), sm.EntryState(sel.Entry), sel.Failed
	return nil
}

// undoEntriesOf reads the undo entries of the compensable effects of list,
// for the table's UNDO column: an effect the undo compensated stays
// committed (the spec's terminal state), and its entry says it was undone.
func undoEntriesOf(ctx context.Context, store effectlog.Log, list []model.Effect) (map[uint64]model.UndoEntry, error) {
	bySession := map[string][]uint64{}
	for _, e := range list {
		if e.Tier == sm.Compensable {
			bySession[e.Session] = append(bySession[e.Session], e.ID)
		}
	}
	entries := map[uint64]model.UndoEntry{}
	for session, ids := range bySession {
		got, err := store.UndoEntries(ctx, session, ids)
		if err != nil {
			return nil, err
		}
		maps.Copy(entries, got)
	}
	return entries, nil
}

// renderEffects prints the effects table; entries, when given, adds each
// effect's undo-entry state.
func renderEffects(f *Factory, list []model.Effect, entries map[uint64]model.UndoEntry) error {
	rows := effectRows(f, list, entries)
	header := effectHeader
	if entries == nil {
		header, rows = header[:7], trimColumns(rows, 7)
	}
	return renderTable(f, header, rows)
}

// effectRows are the effects table's rows, with the undo-entry column.
func effectRows(f *Factory, list []model.Effect, entries map[uint64]model.UndoEntry) [][]cell {
	now := f.Now()
	rows := make([][]cell, 0, len(list))
	for _, e := range list {
		entry := ""
		if u, ok := entries[e.ID]; ok {
			entry = string(u.State)
		}
		state := string(e.State)
		rows = append(rows, []cell{idCell(e.ID), plain(e.Session), plain(e.Tool), plain(string(e.Tier)),
			{Text: textfmt.EffectStatus(state, entry, e.Error != ""), Color: textfmt.StateColor(textfmt.StatusColor(state, entry))},
			plain(ago(now, e.CreatedAt)), plain(strconv.Itoa(e.ReplayCount)),
			{Text: textfmt.UndoStatus(state, entry), Color: textfmt.StateColor(entry)}})
	}
	return rows
}

func trimColumns(rows [][]cell, n int) [][]cell {
	for i := range rows {
		rows[i] = rows[i][:n]
	}
	return rows
}

// follow prints each effect transition recorded after position that matches
// the filter, until the context ends (Ctrl-C), but those of the records the
// listing showed (listed: an effect's history length as listed).
func follow(ctx context.Context, f *Factory, store effectlog.Log, opts *listOptions, position uint64, listed map[uint64]uint32) error {
	filter, _ := opts.filter(f)
	lost := outage{f: f}
	for ctx.Err() == nil {
		changes, last, err := store.Changes(ctx, position, 1000)
		if err == nil {
			position, err = printChanges(ctx, f, store, opts.output, filter, position, changes, last, listed)
		}
		if ctx.Err() != nil {
			break // an engine that cancels may have cut the read short
		} else if lost.retry(ctx, err) {
			continue // from the first change not yet printed
		} else if err != nil {
			return err
		}
		lost.ok()
		if len(changes) == 1000 {
			continue
		}
		store.WaitChange(ctx, position, followInterval) // an interrupt ends the loop
	}
	return nil // Ctrl-C ends a follow
}

// printChanges prints the changes read after position from that match
// filter, and returns the feed's position to follow from: last, or, when the
// log's server went meanwhile, the one before the first change it could not
// look at.
func printChanges(ctx context.Context, f *Factory, store effectlog.Log, format string, filter effectlog.EffectFilter,
	from uint64, changes []effectlog.ChangeRecord, last uint64, listed map[uint64]uint32) (uint64, error) {
	for i, ch := range changes {
		r := ch.Record
		if r.Kind == model.KindSession {
			continue
		}
		if n, ok := listed[r.EffectID]; ok {
			if r.Seq <= n {
				continue // the listing showed the effect with this record
			}
			delete(listed, r.EffectID) // the rest are newer
		}
		d, err := store.GetEffect(ctx, r.EffectID)
		if errors.Is(err, model.ErrUnavailable) || ctx.Err() != nil {
			if i == 0 {
				return from, err
			}
			return changes[i-1].Position, err
		} else if err != nil {
			continue // dropped since
		}
		e := d.Effect
		if (filter.Session != "" && e.Session != filter.Session) || (filter.Tool != "" && e.Tool != filter.Tool) ||
			(filter.Tier != "" && e.Tier != filter.Tier) || (filter.Failed && r.Error == "") ||
			(filter.State != "" && filter.Undo == "" && sm.State(r.To) != filter.State) || (filter.Undo != "" && filter.State != "" && e.State != filter.State) ||
			(!filter.Since.IsZero() && e.CreatedAt.Before(filter.Since)) ||
			(filter.Undo != "" && (r.Kind != model.KindUndo || sm.EntryState(r.To) != filter.Undo)) {
			continue
		}
		if err := printChange(f, format, e, r); err != nil {
			return last, err
		}
	}
	return last, nil
}

// followedChange is one line of --follow's JSON output: an effect as it
// was listed (no transition), then each change as it happens.
type followedChange struct {
	Effect model.Effect         `json:"effect"`
	Record *model.HistoryRecord `json:"transition,omitempty"`
}

func printChange(f *Factory, format string, e model.Effect, r model.HistoryRecord) error {
	switch format {
	case formatJSON, formatJSONL:
		return writeJSONLine(f.Out, followedChange{Effect: e, Record: &r})
	case formatIDs:
		_, err := fmt.Fprintln(f.Out, e.ID)
		return err
	}
	what, from, to := "effect", r.From, r.To
	if r.Kind == model.KindUndo {
		// The entry's states in its own words: its "pending" is no effect's.
		what, from, to = "undo entry", textfmt.UndoWord(r.From), textfmt.UndoWord(r.To)
	}
	if r.From == "" {
		from = "(new)"
	}
	if f.Color() {
		to = textfmt.Paint(to, textfmt.StateColor(r.To))
	}
	_, err := fmt.Fprintf(f.Out, "%s  %s %d %s %s: %s -> %s  by %s\n", r.At.Local().Format("15:04:05"), what, e.ID,
		textfmt.Escape(e.Session), textfmt.Escape(e.Tool), from, to, textfmt.Escape(r.Who()+reasonSuffix(r.Reason)))
	return err
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}
