package boltfile

import (
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// TestSchema6IndexesOfAnOlderLog: a log of schema 5 (without the indexes of
// undo entries by state and of open requests by session, one of its
// requests in the older form that names no session) lists and counts as
// before without writing; its first write builds both indexes from the
// records, after which a session's requests are read from its own entries
// alone, and verify finds them in step.
func TestSchema6IndexesOfAnOlderLog(t *testing.T) {
	s, _ := newStore(t)
	a1 := intercept(t, s, "a", "pay", sm.Irreversible, `{"n":1}`).Effect.ID
	intercept(t, s, "b", "pay", sm.Irreversible, `{"n":2}`)
	w1 := intercept(t, s, "a", "write", sm.Compensable, `{"n":3}`).Effect.ID
	w2 := intercept(t, s, "b", "write", sm.Compensable, `{"n":4}`).Effect.ID
	must[model.Session](t)(s.SetSessionState(t.Context(), "b", sm.SessionCompensating, model.Change{}))
	must[model.UndoEntry](t)(s.UndoStep(t.Context(), w2, sm.EntrySkipped, model.Change{}))
	verifyClean(t, s)
	tamper(t, s, func(tx *bolt.Tx) error {
		for _, name := range schema6Buckets {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bApprovalsOpen).Put(itob(a1), nil); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Put(keySchema, itob(5))
	})
	check := func(when string) {
		t.Helper()
		list, n, err := s.PendingApprovals(t.Context(), "a", 0)
		if err != nil || n != 1 || len(list) != 1 || list[0].EffectID != a1 {
			t.Fatalf("%s: approvals of a: %d waiting, %+v, %v", when, n, list, err)
		}
		for undo, want := range map[sm.EntryState][]uint64{sm.EntryPending: {w1}, sm.EntrySkipped: {w2}, sm.EntryCompensated: {}} {
			got, _, err := s.ListEffects(t.Context(), effectlog.EffectFilter{Undo: undo})
			if ids := effectIDs(got); err != nil || !slices.Equal(ids, want) {
				t.Fatalf("%s: list --undo %s: %v, want %v (%v)", when, undo, ids, want, err)
			}
		}
	}
	check("schema 5")
	if v := schemaOf(t, s); v != 5 {
		t.Fatalf("reads moved the schema to %d", v)
	}
	verifyClean(t, s)

	c1 := intercept(t, s, "c", "pay", sm.Irreversible, `{"n":5}`).Effect.ID
	if v := schemaOf(t, s); v != SchemaVersion {
		t.Fatalf("after a write the schema is %d, want %d", v, SchemaVersion)
	}
	check("upgraded")
	verifyClean(t, s)
	must[model.Effect](t)(s.Approve(t.Context(), a1, model.Change{Actor: "ops"}))
	must[model.UndoEntry](t)(s.UndoStep(t.Context(), w1, sm.EntrySkipped, model.Change{}))
	if list, n, err := s.PendingApprovals(t.Context(), "a", 0); err != nil || n != 0 || len(list) != 0 {
		t.Fatalf("approvals of a once decided: %d, %+v, %v", n, list, err)
	}
	if got, _, _ := s.ListEffects(t.Context(), effectlog.EffectFilter{Undo: sm.EntrySkipped, Ascending: true}); !slices.Equal(effectIDs(got), []uint64{w1, w2}) {
		t.Fatalf("list --undo skipped: %v", effectIDs(got))
	}
	verifyClean(t, s)

	// A session's requests are its own entries: one of the whole index that
	// says it is a's, but is not in a's, is not walked.
	tamper(t, s, func(tx *bolt.Tx) error {
		return tx.Bucket(bApprovalsOpen).Put(itob(999), pendingValue("a", nil))
	})
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(s.Path(), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		var a, all []uint64
		txReader{plainTx(tx)}.OpenRequests("a", func(r storage.OpenRequest) (bool, error) { a = append(a, r.EffectID); return true, nil })
		txReader{plainTx(tx)}.OpenRequests("", func(r storage.OpenRequest) (bool, error) { all = append(all, r.EffectID); return true, nil })
		if len(a) != 0 || !slices.Equal(all, []uint64{c1, 999}) {
			t.Errorf("open requests of a: %v; of all: %v", a, all)
		}
		return nil
	})
}

func schemaOf(t *testing.T, s *testLog) uint64 {
	t.Helper()
	var v uint64
	db, err := bolt.Open(s.Path(), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error { v = btoi(tx.Bucket(bMeta).Get(keySchema)); return nil })
	return v
}

func effectIDs(list []model.Effect) []uint64 {
	out := []uint64{}
	for _, e := range list {
		out = append(out, e.ID)
	}
	return out
}

// TestVerifyChecksSchema6Indexes: an undo entry missing from the index by
// state, or there twice, and an open request missing from its session's
// index, or under another session, are reported.
func TestVerifyChecksSchema6Indexes(t *testing.T) {
	for _, c := range []struct {
		name, detail string
		edit         func(tx *bolt.Tx, compensable, irreversible uint64) error
	}{
		{"undo entry not indexed", "holds the entry 0 times", func(tx *bolt.Tx, id, _ uint64) error {
			return tx.Bucket(bUndoByState).Delete(nameKey("pending", id))
		}},
		{"undo entry indexed twice", "holds the entry 2 times", func(tx *bolt.Tx, id, _ uint64) error {
			return tx.Bucket(bUndoByState).Put(nameKey("skipped", id), nil)
		}},
		{"request not indexed", "1 open requests, 0 in the index by session", func(tx *bolt.Tx, _, id uint64) error {
			return tx.Bucket(bOpenBySession).Delete(nameKey("s", id))
		}},
		{"request under another session", `is under session "t"`, func(tx *bolt.Tx, _, id uint64) error {
			v := tx.Bucket(bOpenBySession).Get(nameKey("s", id))
			if err := tx.Bucket(bOpenBySession).Delete(nameKey("s", id)); err != nil {
				return err
			}
			return tx.Bucket(bOpenBySession).Put(nameKey("t", id), append([]byte{}, v...))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, id := seeded(t) // id compensable, id+1 waiting for approval
			tamper(t, s, func(tx *bolt.Tx) error { return c.edit(tx, id, id+1) })
			expectProblem(t, s, "index", c.detail)
		})
	}
}
