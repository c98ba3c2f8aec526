package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// TestListStreamsInPages: a listing longer than a page is read and written
// a page at a time, and says the same as the whole list written at once: a
// JSON array byte for byte, JSON Lines, ids, the piped table; the limit and
// the note that more match hold across pages; on a terminal the table has
// one header.
func TestListStreamsInPages(t *testing.T) {
	defer func(n int) { listPage = n }(listPage)
	listPage = 4
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	store := logaddr.File(filepath.Join(t.TempDir(), "undolog.db"), logaddr.Options{Now: func() time.Time { return now }})
	defer store.Close()
	for i := 0; i < 11; i++ {
		tier := sm.Compensable
		if i%3 == 2 {
			tier = sm.Irreversible
		}
		_, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: fmt.Sprintf("s%d", i%2), Tool: "write", Tier: tier,
			Args: json.RawMessage(fmt.Sprintf(`{"i":%d,"html":"<b>"}`, i)), CreateSession: true})
		if err != nil {
			t.Fatal(err)
		}
	}
	newFactory := func(out *bytes.Buffer) *Factory {
		return &Factory{Out: out, ErrOut: out, Getenv: func(string) string { return "" }, Now: func() time.Time { return now }}
	}
	all, _, err := store.ListEffects(t.Context(), effectlog.EffectFilter{})
	if err != nil || len(all) != 11 {
		t.Fatalf("%d effects, %v", len(all), err)
	}
	for _, format := range []string{formatJSON, formatJSONL, formatIDs, formatText} {
		for _, limit := range []int{0, 3, 4, 9, 11, 12} {
			var want, got bytes.Buffer
			n := len(all)
			if limit > 0 {
				n = min(limit, n)
			}
			wf := newFactory(&want)
			entries, err := undoEntriesOf(t.Context(), store, all[:n])
			if err != nil {
				t.Fatal(err)
			}
			if format == formatText {
				err = renderEffects(wf, all[:n], entries)
			} else {
				err = printEffects(wf, format, all[:n], entries)
			}
			if err != nil {
				t.Fatal(err)
			}
			shown, more, err := streamEffects(t.Context(), newFactory(&got), store, format, effectlog.EffectFilter{Limit: limit}, nil)
			if err != nil || shown != n || more != (n < len(all)) {
				t.Fatalf("%s, --limit %d: %d shown, more %v, %v", format, limit, shown, more, err)
			}
			if got.String() != want.String() {
				t.Fatalf("%s, --limit %d: streamed\n%s\nwant\n%s", format, limit, got.String(), want.String())
			}
			if format == formatJSON && !json.Valid(got.Bytes()) {
				t.Fatalf("--limit %d: not one JSON value:\n%s", limit, got.String())
			}
		}
	}
	var none bytes.Buffer
	if _, _, err := streamEffects(t.Context(), newFactory(&none), store, formatJSON, effectlog.EffectFilter{Tool: "nothing"}, nil); err != nil || none.String() != "[]\n" {
		t.Fatalf("no match as JSON: %q, %v", none.String(), err)
	}

	var term bytes.Buffer
	s := newEffectStream(newFactory(&term), formatText)
	s.terminal = true
	for i := 0; i < len(all); i += 4 {
		if err := s.page(t.Context(), store, all[i:min(i+4, len(all))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.end(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(term.String(), "\n"), "\n")
	if len(lines) != 12 || !strings.HasPrefix(lines[0], "ID ") || strings.Count(term.String(), "SESSION") != 1 {
		t.Fatalf("terminal table:\n%s", term.String())
	}
}

// printEffects is the listing as it was printed whole, before streaming,
// each effect with its undo entry's state: the reference the streamed output must
// equal.
func printEffects(f *Factory, format string, list []model.Effect, entries map[uint64]model.UndoEntry) error {
	all := make([]listedEffect, len(list))
	for i, e := range list {
		all[i] = listed(e, entries)
	}
	return printListing(f, format, all, func(e listedEffect) any { return e.ID },
		func() error { return renderEffects(f, list, nil) })
}

// TestListTableAlignsWideNames: on a terminal, list's columns line up as
// the terminal shows them, whatever the tool names: 写入文件 and 🚀 take two
// columns a character, a combining acute none.
func TestListTableAlignsWideNames(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	store := logaddr.File(filepath.Join(t.TempDir(), "undolog.db"), logaddr.Options{Now: func() time.Time { return now }})
	defer store.Close()
	tools := []string{"写入文件", "deploy_🚀", "cafe\u0301", "write"}
	for _, tool := range tools {
		if _, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: tool, Tier: sm.Compensable,
			Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
			t.Fatal(err)
		}
	}
	var term bytes.Buffer
	s := newEffectStream(&Factory{Out: &term, ErrOut: &term, Getenv: func(string) string { return "" }, Now: func() time.Time { return now }}, formatText)
	s.terminal = true
	list, _, err := store.ListEffects(t.Context(), effectlog.EffectFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.page(t.Context(), store, list); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(term.String(), "\n"), "\n")
	if len(lines) != 1+len(tools) {
		t.Fatalf("terminal table:\n%s", term.String())
	}
	// TIER starts where the widest tool name (deploy_🚀, 9 columns) and
	// two spaces end.
	for _, l := range lines {
		at := strings.Index(l, "compensable")
		if at < 0 {
			at = strings.Index(l, "TIER")
		}
		if w := ansi.StringWidth(l[:at]); w != ansi.StringWidth("ID  SESSION  deploy_🚀  ") {
			t.Errorf("TIER starts at column %d in %q:\n%s", w, l, term.String())
		}
	}
}
