package boltfile

import (
	"testing"
	"time"

	"github.com/undolog/undolog/conformance"
	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	bolt "go.etcd.io/bbolt"
)

// One record that does not decode (a history record, an undo entry, an
// effect's record) harms only its own effect.
func TestDamagedRowStaysLocal(t *testing.T) {
	s, _ := newStore(t)
	garbage := func(t *testing.T, bucket, key []byte) {
		t.Helper()
		tamper(t, s, func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key, []byte{0xff, 0}) })
	}
	conformance.DamagedRowStaysLocal(t, s, conformance.Damage{
		History: func(t *testing.T, id uint64, seq uint32) { garbage(t, bHistory, historyKey(id, seq)) },
		Undo:    func(t *testing.T, session string, id uint64) { garbage(t, bUndo, nameKey(session, id)) },
		Effect:  func(t *testing.T, id uint64) { garbage(t, bEffects, itob(id)) },
		Session: func(t *testing.T, id string) { garbage(t, bSessions, []byte(id)) },
	})
}

// An index entry that names a record the log does not hold (an effect in a
// session's index, a session in the order of sessions) harms only its own
// row: list and session list show it by its id as damaged, and the rest.
func TestDanglingIndexEntryStaysLocal(t *testing.T) {
	s, id := seeded(t)
	tamper(t, s, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bBySession).Put(nameKey("s", 77), nil); err != nil {
			return err
		}
		return tx.Bucket(bSessionsByTime).Put(itob(99), []byte("ghost"))
	})
	for _, f := range []effectlog.EffectFilter{{Session: "s"}, {Session: "s", Since: time.Unix(0, 0)}} {
		l, _, err := s.ListEffects(t.Context(), f)
		if err != nil || len(l) != 3 || l[0].ID != 77 || l[0].State != model.StateDamaged || l[0].Damage == "" || l[2].ID != id {
			t.Fatalf("list %+v: %+v, %v; want effect 77 damaged and the session's 2 effects", f, l, err)
		}
	}
	sessions, _, err := s.ListSessions(t.Context(), effectlog.SessionFilter{})
	if err != nil || len(sessions) != 2 || sessions[0].ID != "ghost" || sessions[0].State != model.SessionDamaged || sessions[1].ID != "s" {
		t.Fatalf("session list: %+v, %v; want ghost damaged and s", sessions, err)
	}
}
