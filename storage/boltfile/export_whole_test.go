package boltfile

import (
	"errors"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	bolt "go.etcd.io/bbolt"
)

// An export never ends clean without every record the log holds: an index
// entry missing or dangling, or a record that does not read, fails it
// (ErrCorrupt, a damaged log) and names what disagrees, rather than
// leaving a session or an effect out under an end record that agrees with
// what it wrote.
func TestExportOfADamagedIndexFails(t *testing.T) {
	cases := map[string]struct {
		damage  func(tx *bolt.Tx, id uint64) error
		session string // also an export of this session alone fails
		names   string
	}{
		"session missing from the order of sessions": {
			damage: func(tx *bolt.Tx, id uint64) error { return tx.Bucket(bSessionsByTime).Delete(itob(2)) },
			names:  "session other",
		},
		"effect missing from its session's index": {
			damage:  func(tx *bolt.Tx, id uint64) error { return tx.Bucket(bBySession).Delete(nameKey("s", id)) },
			session: "s",
			names:   "the log holds 1: its index leaves effects out",
		},
		"session's index names an effect not there": {
			damage:  func(tx *bolt.Tx, id uint64) error { return tx.Bucket(bBySession).Put(nameKey("s", 77), nil) },
			session: "s",
			names:   "index names effect 77, which the log does not hold",
		},
		"open request entry of an effect with no request": {
			damage: func(tx *bolt.Tx, id uint64) error {
				return tx.Bucket(bApprovalsOpen).Put(itob(id), pendingValue("s", nil))
			},
			names: "pending approval entry names no request",
		},
		"effect record that does not read": {
			damage:  func(tx *bolt.Tx, id uint64) error { return tx.Bucket(bEffects).Put(itob(id), []byte("garbage")) },
			session: "s",
			names:   "effect 1: not a valid undolog log: record effects/0000000000000001",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, id := seeded(t)
			intercept(t, s, "other", "write", sm.Compensable, `{"c":3}`)
			tamper(t, s, func(tx *bolt.Tx) error { return c.damage(tx, id) })
			for _, session := range []string{"", c.session} {
				var end *effectlog.ExportEnd
				err := s.Export(t.Context(), session, func(r effectlog.ExportRecord) error {
					if e, ok := r.Record.(*effectlog.ExportEnd); ok {
						end = e
					}
					return nil
				})
				if !errors.Is(err, model.ErrCorrupt) {
					t.Fatalf("export of session %q: %v (end record %+v); want it failed as a damaged log", session, err, end)
				}
				t.Logf("export of session %q: %v", session, err)
				if session == "" && !strings.Contains(err.Error(), c.names) {
					t.Fatalf("export of the log: %v; want it to name %q", err, c.names)
				}
				if c.session == "" {
					break
				}
			}
		})
	}
}
