package statemachine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The spec's valid transitions with the tiers that may take them, written out by
// hand from spec/effect-states.txt rather than derived from the package's table.
var specValid = map[string]bool{
	"compensable:pending->executing":                true,
	"irreversible:pending->executing":               true,
	"irreversible:pending->approved":                true,
	"irreversible:pending->rejected":                true,
	"compensable:pending->replayed":                 true,
	"irreversible:pending->replayed":                true,
	"compensable:executing->committed":              true,
	"irreversible:executing->committed":             true,
	"compensable:executing->pending":                true,
	"irreversible:executing->pending":               true,
	"compensable:executing->compensating":           true,
	"irreversible:approved->executing":              true,
	"compensable:compensating->compensated":         true,
	"compensable:compensating->compensation_failed": true,
}

var allStates = []State{"pending", "executing", "committed", "compensating", "compensated", "compensation_failed", "approved", "rejected", "replayed"}

// expectedReason is the reason the spec gives for refusing (tier, from, to),
// written independently of Validate.
func expectedReason(tier Tier, from, to State) string {
	compOnly := map[State]bool{"compensating": true, "compensated": true, "compensation_failed": true}
	irrOnly := map[State]bool{"approved": true, "rejected": true}
	terminal := map[State]bool{"committed": true, "compensated": true, "compensation_failed": true, "rejected": true, "replayed": true}
	// A state outside the tier's machine is named by the rule of its own class.
	outside := func(s State) string {
		if compOnly[s] && tier != "compensable" {
			return "Compensating / Compensated / CompensationFailed are only reachable for Compensable tier effects."
		}
		if irrOnly[s] && tier != "irreversible" {
			return "Approved / Rejected are only reachable for Irreversible tier effects."
		}
		return ""
	}
	switch {
	case tier == "safe":
		return "Safe tier never enters the effect state machine."
	case outside(from) != "":
		return outside(from)
	case outside(to) != "":
		return outside(to)
	case from == "pending" && to == "compensating":
		return "Compensation requires prior execution."
	case from == "committed" && to == "compensating":
		return "Compensation retry path not implemented."
	case from == "executing" && to == "approved":
		return "Approval is only from Pending."
	case from == "pending" && to == "committed":
		return "Must execute first."
	case terminal[from]:
		return "Terminal state. No further transitions."
	}
	return "No skipping: not a transition of the spec; every transition must go through the defined path."
}

func TestValidateEveryTriple(t *testing.T) {
	tiers := []Tier{"safe", "compensable", "irreversible"}
	valid := 0
	for _, tier := range tiers {
		for _, from := range allStates {
			for _, to := range allStates {
				key := fmt.Sprintf("%s:%s->%s", tier, from, to)
				tr, err := Validate(tier, from, to)
				if specValid[key] {
					valid++
					if err != nil {
						t.Errorf("%s: want valid, got %v", key, err)
						continue
					}
					if tr.From != from || tr.To != to || tr.Trigger == "" {
						t.Errorf("%s: wrong row %+v", key, tr)
					}
					continue
				}
				if err == nil {
					t.Errorf("%s: want invalid, got valid", key)
					continue
				}
				if !errors.Is(err, ErrInvalidStateTransition) {
					t.Errorf("%s: error %v does not match ErrInvalidStateTransition", key, err)
				}
				var te *TransitionError
				if !errors.As(err, &te) {
					t.Fatalf("%s: error %T is not a *TransitionError", key, err)
				}
				if want := expectedReason(tier, from, to); te.Reason != want {
					t.Errorf("%s: reason %q, want %q", key, te.Reason, want)
				}
				if !strings.Contains(err.Error(), te.Reason) || !strings.Contains(err.Error(), string(to)) {
					t.Errorf("%s: message %q does not name the reason and target", key, err)
				}
			}
		}
	}
	if valid != len(specValid) || len(specValid) != 14 {
		t.Fatalf("checked %d valid triples, table has %d", valid, len(specValid))
	}
}

// Every pair the spec names in its invalid table gets exactly its reason for the
// tier where the pair is otherwise meaningful.
func TestSpecNamedInvalidPairs(t *testing.T) {
	cases := []struct {
		tier     Tier
		from, to State
		reason   string
	}{
		{Compensable, Committed, Executing, "Terminal state. No further transitions."},
		{Compensable, Compensated, Pending, "Terminal state. No further transitions."},
		{Compensable, CompensationFailed, Compensating, "Terminal state. No further transitions."},
		{Irreversible, Rejected, Executing, "Terminal state. No further transitions."},
		{Irreversible, Replayed, Pending, "Terminal state. No further transitions."},
		{Compensable, Replayed, Replayed, "Terminal state. No further transitions."},
		{Compensable, Pending, Compensating, "Compensation requires prior execution."},
		{Compensable, Committed, Compensating, "Compensation retry path not implemented."},
		{Irreversible, Executing, Approved, "Approval is only from Pending."},
		{Compensable, Pending, Committed, "Must execute first."},
		{Irreversible, Pending, Committed, "Must execute first."},
		{Irreversible, Pending, Compensating, ReasonCompensableOnly},
		{Compensable, Pending, Approved, ReasonIrreversible},
		{Safe, Pending, Executing, ReasonSafe},
	}
	for _, c := range cases {
		_, err := Validate(c.tier, c.from, c.to)
		var te *TransitionError
		if !errors.As(err, &te) || te.Reason != c.reason {
			t.Errorf("%s %s->%s: got %v, want reason %q", c.tier, c.from, c.to, err, c.reason)
		}
	}
}

func TestTerminalStates(t *testing.T) {
	want := map[State]bool{Committed: true, Compensated: true, CompensationFailed: true, Rejected: true, Replayed: true}
	for _, s := range allStates {
		if s.IsTerminal() != want[s] {
			t.Errorf("%s: IsTerminal=%v", s, s.IsTerminal())
		}
		for _, tier := range []Tier{Compensable, Irreversible} {
			if s.IsTerminal() && len(Next(tier, s)) != 0 {
				t.Errorf("%s %s: terminal state offers %v", tier, s, Next(tier, s))
			}
		}
	}
}

func TestNext(t *testing.T) {
	cases := map[string]string{
		"compensable:pending":      "executing replayed",
		"irreversible:pending":     "executing approved rejected replayed",
		"compensable:executing":    "committed pending compensating",
		"irreversible:executing":   "committed pending",
		"irreversible:approved":    "executing",
		"compensable:approved":     "",
		"compensable:compensating": "compensated compensation_failed",
		"safe:pending":             "",
	}
	for k, want := range cases {
		tier, from, _ := strings.Cut(k, ":")
		var got []string
		for _, s := range Next(Tier(tier), State(from)) {
			got = append(got, string(s))
		}
		if strings.Join(got, " ") != want {
			t.Errorf("Next(%s) = %q, want %q", k, strings.Join(got, " "), want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, s := range allStates {
		if got, err := ParseState(string(s)); err != nil || got != s {
			t.Errorf("ParseState(%q) = %q, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "Pending", "done", "compensation-failed"} {
		if _, err := ParseState(bad); !errors.Is(err, ErrUnknownName) || !strings.Contains(err.Error(), "pending") {
			t.Errorf("ParseState(%q): %v", bad, err)
		}
	}
	// The message is one plain sentence: what is unknown and what is valid.
	const want = `unknown tier "reversible" (valid: safe, compensable, irreversible)`
	if _, err := ParseTier("reversible"); !errors.Is(err, ErrUnknownName) || err.Error() != want {
		t.Errorf("ParseTier: %v", err)
	}
	if _, err := ParseSessionState("running"); !errors.Is(err, ErrUnknownName) {
		t.Errorf("ParseSessionState: %v", err)
	}
	if _, err := Validate(Compensable, "bogus", Pending); !errors.Is(err, ErrInvalidStateTransition) {
		t.Errorf("unknown state: %v", err)
	}
}

// The session table of DESIGN.md, written out by hand.
var sessionValid = map[string]bool{
	"active->awaiting_approval":       true,
	"awaiting_approval->active":       true,
	"active->halted":                  true,
	"awaiting_approval->halted":       true,
	"active->completed":               true,
	"awaiting_approval->completed":    true,
	"active->failed":                  true,
	"awaiting_approval->failed":       true,
	"active->compensating":            true,
	"failed->compensating":            true,
	"halted->compensating":            true,
	"awaiting_approval->compensating": true,
	"completed->compensating":         true,
	"compensating->compensated":       true,
	"compensating->halted":            true,
	"halted->active":                  true,
}

func TestValidateSessionEveryPair(t *testing.T) {
	all := []SessionState{"active", "awaiting_approval", "completed", "failed", "halted", "compensating", "compensated"}
	for _, from := range all {
		for _, to := range all {
			key := string(from) + "->" + string(to)
			_, err := ValidateSession(from, to)
			if sessionValid[key] != (err == nil) {
				t.Errorf("%s: err=%v, want valid=%v", key, err, sessionValid[key])
			}
			if err != nil {
				var te *TransitionError
				if !errors.Is(err, ErrInvalidStateTransition) || !errors.As(err, &te) {
					t.Fatalf("%s: %v", key, err)
				}
				want := "Not a transition of the session table."
				if from == "compensated" {
					want = "Terminal session state. No further transitions."
				}
				if te.Reason != want {
					t.Errorf("%s: reason %q want %q", key, te.Reason, want)
				}
			}
		}
		accepts := from == "active" || from == "awaiting_approval"
		if from.AcceptsEffects() != accepts {
			t.Errorf("%s: AcceptsEffects=%v", from, from.AcceptsEffects())
		}
	}
}

func TestValidateEntry(t *testing.T) {
	valid := map[string]bool{
		"pending->compensating": true, "pending->skipped": true,
		"compensating->compensated": true, "compensating->compensation_failed": true,
		"compensation_failed->resolved": true,
	}
	for _, from := range EntryStates {
		for _, to := range EntryStates {
			_, err := ValidateEntry(from, to)
			if valid[string(from)+"->"+string(to)] != (err == nil) {
				t.Errorf("%s->%s: %v", from, to, err)
			}
			if err != nil && !errors.Is(err, ErrInvalidStateTransition) {
				t.Errorf("%s->%s: %v", from, to, err)
			}
		}
	}
}

// Random event sequences: whatever is asked, an effect never leaves a terminal
// state, never reaches a state outside its tier, and only moves along the table.
func TestPropertyRandomEvents(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tier := rapid.SampledFrom([]Tier{Compensable, Irreversible}).Draw(t, "tier")
		state := Pending
		steps := rapid.SliceOfN(rapid.SampledFrom(allStates), 1, 40).Draw(t, "events")
		for _, to := range steps {
			_, err := Validate(tier, state, to)
			if state.IsTerminal() && err == nil {
				t.Fatalf("left terminal state %s for %s", state, to)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidStateTransition) {
					t.Fatalf("error %v not ErrInvalidStateTransition", err)
				}
				continue
			}
			if !specValid[fmt.Sprintf("%s:%s->%s", tier, state, to)] {
				t.Fatalf("accepted %s %s->%s outside the spec", tier, state, to)
			}
			state = to
			if !tier.Reachable(state) {
				t.Fatalf("tier %s reached %s", tier, state)
			}
		}
	})
}

func TestPropertySessionNeverLeavesTerminal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := SessionActive
		for _, to := range rapid.SliceOfN(rapid.SampledFrom(SessionStates), 1, 30).Draw(t, "events") {
			_, err := ValidateSession(s, to)
			if s.IsTerminal() && err == nil {
				t.Fatalf("left terminal session state %s", s)
			}
			if err == nil {
				s = to
			}
		}
	})
}
