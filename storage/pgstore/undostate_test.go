package pgstore_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// TestUndoStateOfRowsWrittenBefore: undo rows of a database migrated from
// schema 4 have no state column value; list --undo still finds them (the
// rules read their records), and a row written since says its state.
func TestUndoStateOfRowsWrittenBefore(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	log := open(url)
	defer log.Close()
	var ids []uint64
	for i := 0; i < 3; i++ {
		res, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
			Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), CreateSession: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Effect.ID)
	}
	if n := count(t, url, `SELECT count(*) FROM undolog_undo WHERE state = 'pending'`); n != 3 {
		t.Fatalf("%d rows say pending, want 3", n)
	}
	exec(t, url, `UPDATE undolog_undo SET state = NULL`)
	list := func(undo sm.EntryState) []uint64 {
		t.Helper()
		got, _, err := log.ListEffects(t.Context(), effectlog.EffectFilter{Undo: undo, Ascending: true})
		if err != nil {
			t.Fatal(err)
		}
		out := []uint64{}
		for _, e := range got {
			out = append(out, e.ID)
		}
		return out
	}
	if got := list(sm.EntryPending); !slices.Equal(got, ids) {
		t.Fatalf("pending rows without a state: %v, want %v", got, ids)
	}
	if _, err := log.SetSessionState(t.Context(), "s", sm.SessionCompensating, model.Change{}); err != nil {
		t.Fatal(err)
	}
	if _, err := log.UndoStep(t.Context(), ids[2], sm.EntrySkipped, model.Change{}); err != nil {
		t.Fatal(err)
	}
	if got := list(sm.EntrySkipped); !slices.Equal(got, ids[2:]) {
		t.Fatalf("skipped: %v", got)
	}
	if got := list(sm.EntryPending); !slices.Equal(got, ids[:2]) {
		t.Fatalf("pending: %v", got)
	}
	if n := count(t, url, `SELECT count(*) FROM undolog_undo WHERE state = 'skipped'`); n != 1 {
		t.Fatalf("%d rows say skipped, want 1", n)
	}
}
