package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// A lease is renewed only by the owner that holds the effect (its run, or
// its compensation), as a compare-and-swap: no history record, no change in
// the feed, verify as clean as before. Anyone else, or the owner once the
// effect moved on, is refused and changes nothing.
func testRenewLeaseOnlyWhileOwned(t *testing.T, open opener) {
	s, clk := open(t)
	res := intercept(t, s, "a", "w", sm.Compensable, `{}`)
	id := res.Effect.ID
	owner := &model.Owner{PID: 1 << 30, Host: "m1", StartedAt: clk.now(), ProcessStart: 7}
	first := clk.now().Add(time.Second)
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{Owner: owner.WithLease(first)}))
	before := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	if !before.Effect.Owner.LeaseUntil.Equal(first) {
		t.Fatalf("lease stored as %v, want %v", before.Effect.Owner.LeaseUntil, first)
	}
	feed := must[uint64](t)(s.LastChange(t.Context()))

	// The owner renews it, whatever lease the owner it names says.
	renewed := first.Add(1500 * time.Millisecond).Add(7) // to the nanosecond
	if err := s.RenewLease(t.Context(), id, owner.WithLease(time.Unix(1, 0)), renewed); err != nil {
		t.Fatalf("renewal by the owner: %v", err)
	}
	after := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	if !after.Effect.Owner.Same(owner) || !after.Effect.Owner.LeaseUntil.Equal(renewed) {
		t.Fatalf("after renewal the owner is %+v, want %v until %v", after.Effect.Owner, owner, renewed)
	}
	if len(after.History) != len(before.History) || after.Effect.State != sm.Executing || !after.Effect.UpdatedAt.Equal(before.Effect.UpdatedAt) {
		t.Fatalf("a renewal moved the effect or wrote history: %d records, was %d; %+v", len(after.History), len(before.History), after.Effect)
	}
	if n := must[uint64](t)(s.LastChange(t.Context())); n != feed {
		t.Fatalf("a renewal entered the change feed: %d, was %d", n, feed)
	}
	verifyClean(t, s)

	// Another owner cannot renew it.
	other := &model.Owner{PID: 42, Host: "m2", StartedAt: clk.now(), ProcessStart: 9}
	if err := s.RenewLease(t.Context(), id, other, renewed.Add(time.Hour)); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("renewal by another owner: %v", err)
	}
	if o := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id)).Effect.Owner; !o.LeaseUntil.Equal(renewed) {
		t.Fatalf("a refused renewal moved the lease to %v", o.LeaseUntil)
	}

	// A reclaim judged on the first lease (it had run out) finds it renewed:
	// the owner lives, and is not overtaken.
	stale := before.Effect.Owner
	if _, err := s.Fail(t.Context(), id, model.Change{Error: "in doubt", ExpectOwner: stale}); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("reclaim judged on a lease renewed since: %v", err)
	}
	if d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id)); d.Effect.State != sm.Executing || len(d.History) != len(before.History) {
		t.Fatalf("the refused reclaim changed the effect: %+v", d.Effect)
	}
	// Judged on the lease as it stands, the reclaim goes ahead ...
	must[model.Effect](t)(s.Fail(t.Context(), id, model.Change{Error: "in doubt", ExpectOwner: after.Effect.Owner}))
	// ... and the owner, back, can neither renew it nor record its end.
	if err := s.RenewLease(t.Context(), id, owner, renewed.Add(time.Hour)); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("renewal of a reclaimed effect: %v", err)
	}
	must[model.Effect](t)(s.Start(t.Context(), id, model.Change{Owner: other.WithLease(clk.now().Add(time.Minute))}))
	if _, err := s.Commit(t.Context(), id, model.Change{ExpectOwner: owner.Identity()}); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("commit by the owner it was taken from: %v", err)
	}
	if err := s.RenewLease(t.Context(), id, owner, renewed.Add(time.Hour)); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("renewal of an effect another owner runs: %v", err)
	}
	// Its owner records the end, whatever its lease became meanwhile.
	must[model.Effect](t)(s.Commit(t.Context(), id, model.Change{ExpectOwner: other.Identity()}))
	if err := s.RenewLease(t.Context(), id, other, clk.now().Add(time.Hour)); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("renewal of a committed effect: %v", err)
	}

	// A running compensation's lease is renewed the same way.
	undoer := &model.Owner{PID: 43, Host: "m3", StartedAt: clk.now()}
	must[model.UndoEntry](t)(s.UndoStep(t.Context(), id, sm.EntryCompensating, model.Change{Owner: undoer.WithLease(clk.now().Add(time.Second))}))
	beforeUndo := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	if err := s.RenewLease(t.Context(), id, undoer, renewed); err != nil {
		t.Fatalf("renewal of a compensation by its owner: %v", err)
	}
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	if !d.Undo.Owner.Same(undoer) || !d.Undo.Owner.LeaseUntil.Equal(renewed) || len(d.History) != len(beforeUndo.History) {
		t.Fatalf("compensation after renewal: %+v, %d records (was %d)", d.Undo.Owner, len(d.History), len(beforeUndo.History))
	}
	if err := s.RenewLease(t.Context(), id, other, renewed.Add(time.Hour)); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("renewal of a compensation by another owner: %v", err)
	}
	// Judged on the lease it had, a reclaim of the compensation is refused.
	if _, err := s.UndoStep(t.Context(), id, sm.EntryCompensating, model.Change{Owner: other, ExpectOwner: beforeUndo.Undo.Owner}); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("reclaim of a compensation judged on a lease renewed since: %v", err)
	}
	must[model.UndoEntry](t)(s.UndoStep(t.Context(), id, sm.EntryCompensated, model.Change{ExpectOwner: undoer.Identity()}))
	if err := s.RenewLease(t.Context(), id, undoer, renewed.Add(time.Hour)); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("renewal of a compensated entry: %v", err)
	}
	if err := s.RenewLease(t.Context(), id+100, owner, renewed); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("renewal of no effect: %v", err)
	}
	verifyClean(t, s)
}
