package boltfile

import (
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/model"
)

// An index entry that names a lookalike of its session's name (a Cyrillic
// letter) is reported with both names escaped apart, not printed as two
// names that look the same.
func TestVerifyShowsALookalikeSessionEntryApart(t *testing.T) {
	s, _ := seeded(t)
	sess := must[model.Session](t)(s.GetSession(t.Context(), "s"))
	tamper(t, s, func(tx *bolt.Tx) error { return tx.Bucket(bSessionsByTime).Put(itob(sess.Seq), []byte("\u0455")) })
	expectProblem(t, s, "index", `sessions_by_time entry 1 names "\u0455", not "s"`)
}
