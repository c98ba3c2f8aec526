package textfmt

import "testing"

func TestEffectStatusSaysWhatWasUndone(t *testing.T) {
	for _, c := range []struct{ state, entry, want string }{
		{"committed", "compensated", "committed, undone"},
		{"committed", "compensation_failed", "committed, undo failed"},
		{"committed", "resolved", "committed, resolved by hand"},
		{"committed", "pending", "committed"},
		{"committed", "", "committed"},
		{"pending", "skipped", "pending"},
		{"compensated", "compensated", "undone"},
		{"rejected", "", "rejected"},
	} {
		if got := EffectStatus(c.state, c.entry); got != c.want {
			t.Errorf("EffectStatus(%q, %q) = %q, want %q", c.state, c.entry, got, c.want)
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
		{Record{Kind: "input", From: "executing", To: "executing", Trigger: "Awaiting the client's input", Actor: "mcp:agent"}, "Awaiting the client's input"},
	} {
		if got := HistoryWords(c.r); got != c.want {
			t.Errorf("HistoryWords(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
}

func TestCountsWordsSayHowManyWereUndone(t *testing.T) {
	got := CountsWords([]StateCount{{"pending", 1}, {"committed", 4}, {"compensated", 1}, {"rejected", 0}}, 3)
	if want := "1 pending, 4 committed (3 undone), 1 undone"; got != want {
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
