package textfmt

import (
	"testing"

	sm "github.com/undolog/undolog/statemachine"
)

// Every state an effect, an undo entry or a session can be in has its
// colour, the same in the commands and the view; other words are plain.
func TestEveryStateHasAColour(t *testing.T) {
	var states []string
	for _, s := range sm.States {
		states = append(states, string(s))
	}
	for _, s := range sm.EntryStates {
		states = append(states, string(s))
	}
	for _, s := range sm.SessionStates {
		states = append(states, string(s))
	}
	for _, s := range states {
		if StateColor(s) == nil {
			t.Errorf("%s has no colour", s)
		}
		if got := PaintState(s); got == s || Escape(got) == got {
			t.Errorf("PaintState(%q) = %q: not painted", s, got)
		}
	}
	for _, s := range []string{"", "-", "compensable", "pending "} {
		if StateColor(s) != nil || PaintState(s) != s {
			t.Errorf("%q is painted: %q", s, PaintState(s))
		}
	}
	if got, want := PaintState("failed"), "\x1b[31mfailed\x1b[m"; got != want {
		t.Errorf("PaintState(failed) = %q, want %q", got, want)
	}
}
