package cmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// listPage is how many effects list reads in one transaction and prints
// before it reads on: a long listing (--limit 0) goes out as it is read,
// in the memory of one page, and no transaction waits on a slow reader.
var listPage = 4000

// streamEffects prints the effects matching filter (at most filter.Limit;
// 0: all) a page at a time, and says how many it printed and whether more
// match beyond the limit.
func streamEffects(ctx context.Context, f *Factory, store effectlog.Log, format string, filter effectlog.EffectFilter, listed map[uint64]uint32) (int, bool, error) {
	s := newEffectStream(f, format)
	limit, shown := filter.Limit, 0
	for {
		filter.Limit = listPage
		if limit > 0 {
			filter.Limit = min(listPage, limit-shown)
		}
		list, next, err := store.ListEffects(ctx, filter)
		if err != nil {
			return shown, false, err
		}
		if err := s.page(ctx, store, list); err != nil {
			return shown, false, err
		}
		if listed != nil {
			for _, e := range list {
				listed[e.ID] = e.HistoryLen
			}
		}
		shown += len(list)
		if next == 0 || (limit > 0 && shown >= limit) {
			return shown, next != 0, s.end()
		}
		filter.Cursor = next
	}
}

// effectStream writes pages of effects in one format: a JSON array written
// element by element, JSON Lines, ids, or a table (textfmt.Table: on a
// terminal its columns are as wide as its first page needs, a later page's
// longer cell widens its column from there on).
type effectStream struct {
	f        *Factory
	w        *bufio.Writer
	format   string
	terminal bool
	n        int
	table    *textfmt.Table
	buf      bytes.Buffer
}

func newEffectStream(f *Factory, format string) *effectStream {
	return &effectStream{f: f, w: bufio.NewWriter(f.Out), format: format, terminal: f.StdoutIsTerminal()}
}

var effectHeader = []string{"ID", "SESSION", "TOOL", "TIER", "STATE", "AGE", "REPLAYS", "UNDO"}

// listedEffect is an effect as list's JSON gives it: with its undo entry's
// state (null when it has none: a safe or irreversible call), as its table's
// UNDO column shows. The state alone: `show` gives the entry, and encoding
// it whole made `list --limit 0 -o json` on 1M effects 1.5x as long.
type listedEffect struct {
	model.Effect
	UndoState *sm.EntryState `json:"undo_state"`
	// Status is the state and the undo in words, as the table's STATE
	// column shows them: "committed, undone".
	Status string `json:"status"`
}

// listed is e as list's JSON gives it, with its entry from entries.
func listed(e model.Effect, entries map[uint64]model.UndoEntry) listedEffect {
	l := listedEffect{Effect: e}
	entry := ""
	if u, ok := entries[e.ID]; ok {
		l.UndoState, entry = &u.State, string(u.State)
	}
	l.Status = textfmt.EffectStatus(string(e.State), entry, e.Error != "")
	return l
}

func (s *effectStream) page(ctx context.Context, store effectlog.Log, list []model.Effect) error {
	for _, e := range list {
		if e.Damage != "" {
			fmt.Fprintf(s.f.ErrOut, "undolog: warning: effect %d is damaged: %s; run undolog verify\n", e.ID, textfmt.Escape(e.Damage))
		}
	}
	var entries map[uint64]model.UndoEntry
	if s.format != formatIDs && s.format != formatFollowedJSONL {
		var err error
		if entries, err = undoEntriesOf(ctx, store, list); err != nil {
			return err
		}
	}
	switch s.format {
	case formatJSON:
		for _, e := range list {
			sep := ",\n  "
			if s.n == 0 {
				sep = "[\n  "
			}
			s.buf.Reset()
			enc := json.NewEncoder(&s.buf)
			enc.SetIndent("  ", "  ")
			enc.SetEscapeHTML(false)
			if err := enc.Encode(listed(e, entries)); err != nil {
				return err
			}
			s.w.WriteString(sep)
			s.w.Write(bytes.TrimSuffix(s.buf.Bytes(), []byte("\n")))
			s.n++
		}
	case formatJSONL:
		for _, e := range list {
			if err := writeJSONLine(s.w, listed(e, entries)); err != nil {
				return err
			}
		}
	case formatFollowedJSONL:
		for _, e := range list {
			if err := writeJSONLine(s.w, followedChange{Effect: e}); err != nil {
				return err
			}
		}
	case formatIDs:
		for _, e := range list {
			fmt.Fprintln(s.w, e.ID)
		}
	default:
		if s.table == nil {
			s.table = newTable(s.f, s.w, effectHeader, s.terminal)
		}
		if err := s.table.Write(effectRows(s.f, list, entries)); err != nil {
			return err
		}
	}
	return s.w.Flush()
}

// end finishes what the pages began (the JSON array) and flushes.
func (s *effectStream) end() error {
	if s.format == formatJSON {
		if s.n == 0 {
			s.w.WriteString("[]\n")
		} else {
			s.w.WriteString("\n]\n")
		}
	}
	return s.w.Flush()
}
