package boltfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

func TestGCDropsOldFinishedSessionsAndCompactShrinks(t *testing.T) {
	s, clk := newStore(t)
	fill := func(session string, n int) {
		for i := 0; i < n; i++ {
			res := intercept(t, s, session, "w", sm.Compensable, fmt.Sprintf(`{"i":%d,"pad":"%0200d"}`, i, i))
			must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{}))
			must[model.Effect](t)(s.Commit(t.Context(), res.Effect.ID, model.Change{Result: json.RawMessage(`1`)}))
			intercept(t, s, session, "w", sm.Compensable, fmt.Sprintf(`{"i":%d,"pad":"%0200d"}`, i, i)) // a replay
		}
		irr := intercept(t, s, session, "pay", sm.Irreversible, `{}`)
		must[model.Effect](t)(s.Approve(t.Context(), irr.Effect.ID, model.Change{}))
		// Run once approved: a session with an approved call left does not complete.
		must[model.Effect](t)(s.Start(t.Context(), irr.Effect.ID, model.Change{}))
		must[model.Effect](t)(s.Commit(t.Context(), irr.Effect.ID, model.Change{Result: json.RawMessage(`1`)}))
	}
	fill("old-done", 300)
	must[model.Session](t)(s.SetSessionState(t.Context(), "old-done", sm.SessionCompleted, model.Change{}))
	fill("old-live", 5)
	clk.add(48 * time.Hour)
	fill("new-done", 5)
	must[model.Session](t)(s.SetSessionState(t.Context(), "new-done", sm.SessionCompleted, model.Change{}))

	rep := must[effectlog.GCReport](t)(s.GC(t.Context(), clk.now().Add(-24*time.Hour), []sm.SessionState{sm.SessionCompleted, sm.SessionCompensated}))
	if len(rep.Sessions) != 1 || rep.Sessions[0] != "old-done" || rep.Effects != 601 {
		t.Fatalf("%+v", rep)
	}
	if _, err := s.GetSession(t.Context(), "old-done"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("dropped session still there: %v", err)
	}
	if _, err := s.GetEffect(t.Context(), 1); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("dropped effect still there: %v", err)
	}
	for _, id := range []string{"old-live", "new-done"} {
		if sess := must[model.Session](t)(s.GetSession(t.Context(), id)); sess.Effects != 11 {
			t.Fatalf("%s: %+v", id, sess)
		}
	}
	// The dropped call is a new call again.
	if res := intercept(t, s, "old-live", "w", sm.Compensable, `{"fresh":1}`); res.Outcome != model.OutcomeNew {
		t.Fatalf("%+v", res)
	}
	verifyClean(t, s)

	before, after, err := s.Compact()
	if err != nil {
		t.Fatal(err)
	}
	if after >= before*2/3 {
		t.Fatalf("compaction shrank %d to %d bytes only", before, after)
	}
	rep2 := verifyClean(t, s)
	if rep2.Sessions != 2 || rep2.Effects != 23 {
		t.Fatalf("after compaction: %+v", rep2)
	}
	if res := intercept(t, s, "old-live", "w", sm.Compensable, `{"after":1}`); res.Outcome != model.OutcomeNew {
		t.Fatal("the compacted log does not take writes")
	}
}

func TestCompactRefusedWhileHeld(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "a", "w", sm.Compensable, `{}`)
	held, err := bolt.Open(s.Path(), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	quick := newTestLog(s.Path(), testOptions{LockTimeout: 100 * time.Millisecond})
	if _, _, err := quick.Compact(); !errors.Is(err, model.ErrBusy) {
		t.Fatalf("%v", err)
	}
}

// gc chooses its victims from the session records, not from the index of
// their order: an entry of that index that names no session, or a session
// the index lacks (damage verify reports), changes nothing of what gc drops.
func TestGCDespiteADamagedSessionOrderIndex(t *testing.T) {
	for _, damage := range []string{"dangling entry", "missing entry"} {
		t.Run(damage, func(t *testing.T) {
			s, clk := newStore(t)
			for _, id := range []string{"a", "b", "c"} {
				res := intercept(t, s, id, "w", sm.Compensable, `{}`)
				must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{}))
				must[model.Effect](t)(s.Commit(t.Context(), res.Effect.ID, model.Change{}))
				must[model.Session](t)(s.SetSessionState(t.Context(), id, sm.SessionCompleted, model.Change{}))
			}
			b := must[model.Session](t)(s.GetSession(t.Context(), "b"))
			err := s.update(func(tx *writeTx) error {
				if damage == "dangling entry" {
					return tx.put(bSessionsByTime, itob(99), []byte("ghost"))
				}
				return tx.delete(bSessionsByTime, itob(b.Seq))
			})
			if err != nil {
				t.Fatal(err)
			}
			clk.add(48 * time.Hour)
			rep := must[effectlog.GCReport](t)(s.GC(t.Context(), clk.now().Add(-time.Hour), []sm.SessionState{sm.SessionCompleted}))
			if len(rep.Sessions) != 3 || rep.Effects != 3 {
				t.Fatalf("gc dropped %v (%d effects), want a, b and c", rep.Sessions, rep.Effects)
			}
		})
	}
}
