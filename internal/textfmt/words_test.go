package textfmt

import (
	"strings"
	"testing"
)

func TestEffectStatusSaysWhatWasUndone(t *testing.T) {
	for _, c := range []struct {
		state, entry string
		failed       bool
		want         string
	}{
		{"committed", "compensated", false, "committed, undone"},
		{"committed", "compensation_failed", false, "committed, undo failed"},
		{"committed", "resolved", false, "committed, resolved by hand"},
		{"committed", "pending", false, "committed"},
		{"committed", "", false, "committed"},
		{"pending", "skipped", false, "pending"},
		{"pending", "pending", true, "failed, can run again"},
		{"pending", "", true, "failed, can run again"},
		{"pending", "skipped", true, "failed"},
		{"compensated", "compensated", false, "undone"},
		{"compensation_failed", "compensation_failed", false, "undo failed"},
		{"compensation_failed", "resolved", false, "resolved by hand"}, // an effect undone while it ran, its undo put right by a person
		{"rejected", "", false, "rejected"},
	} {
		if got := EffectStatus(c.state, c.entry, c.failed); got != c.want {
			t.Errorf("EffectStatus(%q, %q, %v) = %q, want %q", c.state, c.entry, c.failed, got, c.want)
		}
	}
}

// A pending effect has nothing to undo yet: its UNDO column is empty,
// not "not undone".
func TestUndoStatusOfAnEffectThatDidNotRun(t *testing.T) {
	if got := UndoStatus("pending", "pending"); got != "-" {
		t.Errorf("UndoStatus(pending, pending) = %q, want -", got)
	}
	if got := UndoStatus("committed", "pending"); got != "not undone" {
		t.Errorf("UndoStatus(committed, pending) = %q, want not undone", got)
	}
}

// Every word the STATE and UNDO columns print selects what it says.
func TestTheColumnsWordsAreFilters(t *testing.T) {
	for entry, word := range undoWords {
		for _, typed := range []string{word, entry, strings.ToUpper(word), "  " + strings.ReplaceAll(word, " ", "   ") + " "} {
			if got, ok := UndoNamed(typed); !ok || got != entry {
				t.Errorf("UndoNamed(%q) = %q, %v; want %q", typed, got, ok, entry)
			}
		}
	}
	for _, bad := range []string{"", "done", "undone!", "pending undone"} {
		if got, ok := UndoNamed(bad); ok {
			t.Errorf("UndoNamed(%q) = %q: no such word", bad, got)
		}
	}
	for _, c := range []struct {
		state, entry string
		failed       bool
	}{
		{"committed", "compensated", false}, {"committed", "compensation_failed", false}, {"committed", "resolved", false},
		{"compensated", "compensated", false}, {"pending", "pending", true}, {"pending", "skipped", true},
	} {
		word := EffectStatus(c.state, c.entry, c.failed)
		sel, ok := StatusNamed(word)
		if !ok {
			t.Errorf("StatusNamed(%q): not a word", word)
			continue
		}
		// What it selects holds for the effect that printed it.
		if sel.State != "" && sel.State != c.state || sel.Entry != "" && sel.Entry != c.entry || sel.Failed && !c.failed {
			t.Errorf("StatusNamed(%q) = %+v, which the effect (%s, %s, failed %v) is not", word, sel, c.state, c.entry, c.failed)
		}
	}
	if sel, _ := StatusNamed("undone"); sel != (Selection{Entry: "compensated"}) {
		t.Errorf("StatusNamed(undone) = %+v: every undone effect, whatever its state", sel)
	}
	for _, bad := range []string{"not undone", "nothing to undo", "pending", "committed, pending", "a b, undone"} {
		if sel, ok := StatusNamed(bad); ok {
			t.Errorf("StatusNamed(%q) = %+v: not a word of the STATE column", bad, sel)
		}
	}
}

// No undo entry's word is an effect state's name: "pending" there would
// read as "not run yet".
func TestUndoWordsAreNoEffectStates(t *testing.T) {
	effectStates := []string{"pending", "executing", "committed", "compensating", "compensated", "compensation_failed", "approved", "rejected", "replayed"}
	for entry := range undoWords {
		w := UndoWord(entry)
		for _, s := range effectStates {
			if w == s {
				t.Errorf("undo entry state %s reads %q, an effect state", entry, w)
			}
		}
	}
}

func TestHistoryWordsNameNoProducerThatWasNotThere(t *testing.T) {
	for _, c := range []struct {
		r    Record
		want string
	}{
		{Record{Kind: "effect", From: "approved", To: "executing", Trigger: "Proxy resumes tool call"}, "ran"},
		{Record{Kind: "effect", From: "pending", To: "approved", Trigger: "Human approves via dashboard", Actor: "alice"}, "approved by alice"},
		{Record{Kind: "effect", From: "executing", To: "committed", Trigger: "Commit RPC", Actor: "ci"}, "committed"},
		{Record{Kind: "undo", From: "compensating", To: "compensated", Trigger: "Compensation succeeds", Actor: "bob"}, "undone by bob"},
		{Record{Kind: "effect", From: "pending", To: "rejected", Actor: "system:timeout"}, "approval request expired"},
		{Record{Kind: "session", From: "halted", To: "active", Actor: "bob"}, "resumed by bob"},
		{Record{Kind: "session", From: "awaiting_approval", To: "active", Actor: "alice"}, "approval decided, runs on"},
		{Record{Kind: "input", From: "executing", To: "executing", Trigger: "Awaiting the client's input", Actor: "mcp:agent"}, "Awaiting the client's input"},
	} {
		if got := HistoryWords(c.r); got != c.want {
			t.Errorf("HistoryWords(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
}

func TestCountsWordsSayHowManyWereUndone(t *testing.T) {
	got := CountsWords([]StateCount{{"pending", 1}, {"committed", 4}, {"compensated", 1}, {"rejected", 0}}, UndoCounts{Undone: 3})
	if want := "1 pending, 4 committed (3 undone), 1 undone"; got != want {
		t.Errorf("CountsWords = %q, want %q", got, want)
	}
	// A failed undo, and one a person resolved, are counted too.
	got = CountsWords([]StateCount{{"committed", 3}}, UndoCounts{Undone: 1, Failed: 1, Resolved: 1})
	if want := "3 committed (1 undone, 1 undo failed, 1 resolved by hand)"; got != want {
		t.Errorf("CountsWords = %q, want %q", got, want)
	}
}

func TestApprovalWordsAreWords(t *testing.T) {
	for outcome, want := range map[string]string{"pending": "waiting", "timed_out": "timed out", "closed": "closed unanswered",
		"approved": "approved", "rejected": "rejected"} {
		if got := ApprovalWord(outcome); got != want {
			t.Errorf("ApprovalWord(%q) = %q, want %q", outcome, got, want)
		}
	}
}
