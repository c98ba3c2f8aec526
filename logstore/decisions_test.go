package logstore

import (
	"errors"
	"strings"
	"testing"

	sm "github.com/undolog/undolog/statemachine"
)

// A decision on a decided effect is the spec's invalid transition, with the
// spec's reason where it names one, and changes nothing.
func TestSecondDecisionIsInvalidTransition(t *testing.T) {
	s, _ := newStore(t)
	approved := intercept(t, s, "a", "pay", sm.Irreversible, `{"n":1}`).Effect.ID
	rejected := intercept(t, s, "b", "pay", sm.Irreversible, `{"n":2}`).Effect.ID
	must[Effect](t)(s.Approve(approved, Change{Actor: "alice"}))
	must[Effect](t)(s.Reject(rejected, Change{Actor: "dana", Reason: "no"}))
	cases := []struct {
		id     uint64
		to     sm.State
		reason string
		who    string
	}{
		{approved, sm.Approved, sm.ReasonNoSkipping, "already approved by alice"},
		{approved, sm.Rejected, sm.ReasonNoSkipping, "already approved by alice"},
		{rejected, sm.Approved, sm.ReasonTerminal, "already rejected by dana"},
		{rejected, sm.Rejected, sm.ReasonTerminal, "already rejected by dana"},
	}
	for _, c := range cases {
		before := must[EffectDetail](t)(s.GetEffect(c.id))
		_, err := s.Transition(c.id, c.to, Change{Actor: "bob"})
		var te *sm.TransitionError
		if !errors.As(err, &te) || te.Reason != c.reason || !strings.Contains(err.Error(), c.who) {
			t.Errorf("effect %d -> %s: %v", c.id, c.to, err)
		}
		after := must[EffectDetail](t)(s.GetEffect(c.id))
		if len(after.History) != len(before.History) || after.Approval.DecidedBy != before.Approval.DecidedBy {
			t.Errorf("effect %d changed: %+v", c.id, after.Approval)
		}
	}
	verifyClean(t, s)
}
