package saga

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// forgeEntryState sets effect id's undo entry to state through the engine,
// behind the rules: what a writer of the log's file or tables can do
// without undolog.
func forgeEntryState(t *testing.T, store effectlog.Log, id uint64, state sm.EntryState) {
	t.Helper()
	err := store.(interface{ Engine() storage.Engine }).Engine().Update(t.Context(), func(tx storage.WriteTx) error {
		e, err := tx.Effect(id)
		if err != nil {
			return err
		}
		u, err := tx.Undo(e.Session, id, &e)
		if err != nil || u == nil {
			return fmt.Errorf("undo entry %v: %v", u, err)
		}
		u.State = state
		return tx.PutUndo(u)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUndoRefusesAForgedDoneEntry: an undo entry that reads compensated or
// skipped though its history never moved it stops the undo, on every
// engine: nothing runs, and the session and the entry stay as they were
// (an undo that passed it by would say the session was compensated).
func TestUndoRefusesAForgedDoneEntry(t *testing.T) {
	open := map[string]func(t *testing.T) effectlog.Log{
		"file": func(t *testing.T) effectlog.Log {
			return logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
		},
		"postgres": func(t *testing.T) effectlog.Log {
			store := logaddr.Open(pgtest.Server(t).NewDatabase(t), logaddr.Options{})
			t.Cleanup(func() { store.Close() })
			return store
		},
	}
	for engine, open := range open {
		for _, forged := range []sm.EntryState{sm.EntryCompensated, sm.EntrySkipped} {
			t.Run(engine+"/"+string(forged), func(t *testing.T) {
				store := open(t)
				runs := filepath.Join(t.TempDir(), "runs")
				first := committed(t, store, "s", &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"sh", "-c", "echo first >> " + runs}}, `1`)
				second := committed(t, store, "s", &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"sh", "-c", "echo second >> " + runs}}, `2`)
				forgeEntryState(t, store, second, forged)
				if _, err := MakePlan(t.Context(), store, "s"); !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "damaged or tampered") {
					t.Fatalf("plan of a session with a forged %s entry: %v", forged, err)
				}
				_, err := (&Runner{Log: store, Actor: "test"}).Run(context.Background(), "s")
				if !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("effect %d fails its check, damaged or tampered", second)) {
					t.Fatalf("undo of a session with a forged %s entry: %v", forged, err)
				}
				if data, err := os.ReadFile(runs); err == nil {
					t.Fatalf("compensations ran: %q", data)
				}
				if s, err := store.GetSession(t.Context(), "s"); err != nil || s.State != sm.SessionActive {
					t.Fatalf("the session after a refused undo: %v %v, want active", s.State, err)
				}
				for id, want := range map[uint64]sm.EntryState{first: sm.EntryPending, second: forged} {
					if d, err := store.GetEffect(t.Context(), id); err != nil || d.Undo.State != want {
						t.Fatalf("effect %d's entry after a refused undo: %+v %v, want %s", id, d.Undo, err, want)
					}
				}
			})
		}
	}
}
