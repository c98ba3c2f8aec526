package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// An input round is recorded on an executing call by its owner only, moves
// no state but the owner's lease, says whether the call awaits the client's
// input, and verifies; the call's end or a new run ends the awaiting.
func testInputRoundsOfTheOwnerOnly(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	ctx := t.Context()
	c := proxyCall(t, s, "p", "confirmed_write", sm.Compensable, `{"k":"v"}`)
	owner := c.Effect.Owner.Identity()
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	awaitingNow := func(want bool) {
		t.Helper()
		d := must[model.EffectDetail](t)(s.GetEffect(ctx, c.Effect.ID))
		if _, ok := effectlog.AwaitingInput(d.History); ok != want || d.Effect.State != sm.Executing {
			t.Fatalf("awaiting %v, want %v; %s: %s", ok, want, d.Effect.State, states(d.History))
		}
	}
	e := must[model.Effect](t)(s.InputRound(ctx, c.Effect.ID, true, model.Change{Actor: "mcp:client", Owner: owner.WithLease(until)}))
	if e.State != sm.Executing || !e.Owner.LeaseUntil.Equal(until) {
		t.Fatalf("after the round: %s, lease %s, want executing until %s", e.State, e.Owner.LeaseUntil, until)
	}
	awaitingNow(true)
	last := must[model.EffectDetail](t)(s.GetEffect(ctx, c.Effect.ID)).History[e.HistoryLen-1]
	if last.Kind != model.KindInput || last.From != "executing" || last.To != "executing" || last.Trigger != effectlog.TriggerAwaitingInput || last.Actor != "mcp:client" {
		t.Fatalf("input record %+v", last)
	}
	other := &model.Owner{PID: 2, Host: "h"}
	if _, err := s.InputRound(ctx, c.Effect.ID, false, model.Change{Owner: other}); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("another owner's round: %v", err)
	}
	awaitingNow(true)
	must[model.Effect](t)(s.InputRound(ctx, c.Effect.ID, false, model.Change{Owner: owner}))
	awaitingNow(false)
	must[model.Effect](t)(s.InputRound(ctx, c.Effect.ID, true, model.Change{Owner: owner}))
	// A fail ends the run: the call's retry starts afresh, awaiting nothing.
	must[model.Effect](t)(s.Fail(ctx, c.Effect.ID, model.Change{Error: "abandoned between input rounds"}))
	if _, err := s.InputRound(ctx, c.Effect.ID, true, model.Change{Owner: owner}); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("a round of a failed call: %v", err)
	}
	retry := proxyCall(t, s, "p", "confirmed_write", sm.Compensable, `{"k":"v"}`)
	if retry.Outcome != model.OutcomeRetry || retry.Effect.ID != c.Effect.ID {
		t.Fatalf("retry %+v", retry)
	}
	awaitingNow(false)
	verifyClean(t, s)
}
