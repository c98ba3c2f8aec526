package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// A reclaim fails the effect only while the owner judged dead still owns
// it: if another process reclaimed it meanwhile, the reclaim is refused and
// nothing changes.
func testReclaimOfAnOwnerThatChangedIsRefused(t *testing.T, open opener) {
	s, _ := open(t)
	res := intercept(t, s, "a", "w", sm.Compensable, `{}`)
	dead := &model.Owner{PID: 1 << 30, Host: "h", StartedAt: time.Unix(100, 0), ProcessStart: 7}
	must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{Owner: dead}))
	judged := must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID)).Effect.Owner

	// Another process reclaims it first and runs it again.
	must[model.Effect](t)(s.Fail(t.Context(), res.Effect.ID, model.Change{Error: "in doubt", ExpectOwner: judged}))
	other := &model.Owner{PID: 42, Host: "h", StartedAt: time.Unix(200, 0), ProcessStart: 9}
	must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{Owner: other}))
	before := must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID))

	_, err := s.Fail(t.Context(), res.Effect.ID, model.Change{Error: "in doubt", ExpectOwner: judged})
	if !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("reclaim of an owner that changed: %v", err)
	}
	after := must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID))
	if after.Effect.State != sm.Executing || !after.Effect.Owner.Same(other) || len(after.History) != len(before.History) {
		t.Fatalf("the refused reclaim changed the effect: %+v", after.Effect)
	}
	// Expecting no owner where there is one is refused too.
	if _, err := s.Fail(t.Context(), res.Effect.ID, model.Change{ExpectOwner: &model.Owner{}}); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("expecting none: %v", err)
	}
	verifyClean(t, s)
}

// A compensating entry is never taken by a second undo unless it names the
// owner it judged dead, and then only while that owner still holds it.
func testCompensationOwnerIsTakenOnlyByReclaim(t *testing.T, open opener) {
	s, _ := open(t)
	res := intercept(t, s, "a", "w", sm.Compensable, `{}`)
	must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{}))
	must[model.Effect](t)(s.Commit(t.Context(), res.Effect.ID, model.Change{}))
	first := &model.Owner{PID: 1 << 30, Host: "h", StartedAt: time.Unix(100, 0), ProcessStart: 7}
	must[model.UndoEntry](t)(s.UndoStep(t.Context(), res.Effect.ID, sm.EntryCompensating, model.Change{Owner: first}))

	second := &model.Owner{PID: 42, Host: "h", StartedAt: time.Unix(200, 0)}
	if _, err := s.UndoStep(t.Context(), res.Effect.ID, sm.EntryCompensating, model.Change{Owner: second}); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("a second undo took a compensating entry: %v", err)
	}
	wrong := *first
	wrong.PID++
	if _, err := s.UndoStep(t.Context(), res.Effect.ID, sm.EntryCompensating, model.Change{Owner: second, ExpectOwner: &wrong}); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("a reclaim naming another owner: %v", err)
	}
	u := must[model.UndoEntry](t)(s.UndoStep(t.Context(), res.Effect.ID, sm.EntryCompensating, model.Change{Owner: second, ExpectOwner: first, Reason: "retry in doubt"}))
	if !u.Owner.Same(second) || u.State != sm.EntryCompensating {
		t.Fatalf("%+v", u)
	}
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID))
	last := d.History[len(d.History)-1]
	if last.Kind != model.KindUndo || last.From != "compensating" || last.To != "compensating" || last.Reason != "retry in doubt" {
		t.Fatalf("reclaim history %+v", last)
	}
	// The first owner, back, finds its entry taken.
	if _, err := s.UndoStep(t.Context(), res.Effect.ID, sm.EntryCompensating, model.Change{Owner: first, ExpectOwner: first}); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("%v", err)
	}
	u = must[model.UndoEntry](t)(s.UndoStep(t.Context(), res.Effect.ID, sm.EntryCompensated, model.Change{}))
	if u.Owner != nil {
		t.Fatalf("a compensated entry keeps an owner: %+v", u.Owner)
	}
	verifyClean(t, s)
}
