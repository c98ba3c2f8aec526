package boltfile

import (
	"testing"

	"github.com/undolog/undolog/conformance"
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
