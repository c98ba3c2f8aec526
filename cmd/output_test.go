package cmd

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// A tool name that a log written before names were checked may hold shows
// escaped in a table, and its tab breaks no column.
func TestTablesEscapeStoredText(t *testing.T) {
	var out bytes.Buffer
	now := time.Now()
	f := &Factory{Out: &out, Getenv: func(string) string { return "" }, Now: func() time.Time { return now }}
	list := []model.Effect{{ID: 1, Session: "s", Tool: "send_\u202eexe.txt\x1b]0;owned\x07\tx", Tier: sm.Compensable, State: sm.Pending, CreatedAt: now}}
	if err := renderEffects(f, list, nil); err != nil {
		t.Fatal(err)
	}
	want := "1\ts\tsend_\\u202eexe.txt\\x1b]0;owned\\x07\\tx\tcompensable\tpending\t0s\t0\n"
	if got := out.String(); got != want {
		t.Fatalf("table row\n%q, want\n%q", got, want)
	}
	if n := strings.Count(out.String(), "\t"); n != 6 {
		t.Fatalf("%d tabs, want 6", n)
	}
}
