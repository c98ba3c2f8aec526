package boltfile

import (
	"testing"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/internal/record"
)

// The owner and its start time survive the log, and records without them
// (written before) still read.
func TestOwnerIsStoredWithItsStartTime(t *testing.T) {
	s, _ := newStore(t)
	res := intercept(t, s, "a", "w", sm.Compensable, `{}`)
	owner := model.NewOwner(time.Now())
	owner.ProcessStart = 123456789
	must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{Owner: owner}))
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID))
	if !d.Effect.Owner.Same(owner) {
		t.Fatalf("stored %+v, want %+v", d.Effect.Owner, owner)
	}
	u := must[model.UndoEntry](t)(s.UndoStep(t.Context(), res.Effect.ID, sm.EntryCompensating, model.Change{Owner: owner}))
	if !u.Owner.Same(owner) {
		t.Fatalf("undo entry owner %+v", u.Owner)
	}
	d = must[model.EffectDetail](t)(s.GetEffect(t.Context(), res.Effect.ID))
	if !d.Undo.Owner.Same(owner) {
		t.Fatalf("stored undo entry owner %+v", d.Undo.Owner)
	}
	verifyClean(t, s)

	// Form 1, before: an effect record ending at its history head, an undo
	// record ending at its update time.
	e := d.Effect
	e.Owner.LeaseUntil = time.Time{} // form 3 ends with it: one byte when zero
	data, err := record.Encode(&e)
	if err != nil {
		t.Fatal(err)
	}
	data[0] = record.Form1
	var back model.Effect
	if err := record.Decode(data[:len(data)-1-len(uvarint(owner.ProcessStart))], &back); err != nil {
		t.Fatal(err)
	}
	if back.Owner == nil || back.Owner.PID != owner.PID || back.Owner.ProcessStart != 0 {
		t.Fatalf("form 1 effect record: %+v", back.Owner)
	}
	entry := *d.Undo
	entry.Owner = nil
	if data, err = record.Encode(&entry); err != nil {
		t.Fatal(err)
	}
	data[0] = record.Form1
	var backU model.UndoEntry
	if err := record.Decode(data[:len(data)-1], &backU); err != nil || backU.Owner != nil || backU.State != sm.EntryCompensating {
		t.Fatalf("form 1 undo record: %+v %v", backU, err)
	}
}

func uvarint(v uint64) []byte {
	w := record.Writer{}
	w.Uint(v)
	return w.Buf
}
