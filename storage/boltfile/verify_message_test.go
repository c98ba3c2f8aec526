package boltfile

import (
	"fmt"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage/internal/record"
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

// A request whose outcome is a lookalike of pending (a Cyrillic letter) is
// reported with the outcome escaped: "approval is pending but pending index
// entry=true" read as a contradiction with no difference to see.
func TestVerifyShowsALookalikeOutcomeApart(t *testing.T) {
	s, _ := seeded(t)
	tamper(t, s, func(tx *bolt.Tx) error {
		b := tx.Bucket(bApprovals)
		var a model.Approval
		if err := record.Decode(b.Get(itob(2)), &a); err != nil || a.Outcome != model.ApprovalPending {
			return fmt.Errorf("approval 2: %v %q", err, a.Outcome)
		}
		a.Outcome = "p\u0435nding"
		data, err := record.Encode(&a)
		if err != nil {
			return err
		}
		return b.Put(itob(2), data)
	})
	expectProblem(t, s, "index", `approval is "p\u0435nding" but pending index entry=true`)
}

// An open request's entry under a lookalike of its effect's session shows
// both names, escaped apart, not one name that reads as the right one.
func TestVerifyShowsALookalikeOpenRequestSessionApart(t *testing.T) {
	s, _ := seeded(t)
	tamper(t, s, func(tx *bolt.Tx) error {
		b := tx.Bucket(bOpenBySession)
		v := b.Get(nameKey("s", 2))
		if v == nil {
			return fmt.Errorf("no open request of effect 2 under session s")
		}
		if err := b.Delete(nameKey("s", 2)); err != nil {
			return err
		}
		return b.Put(nameKey("\u0455", 2), v)
	})
	expectProblem(t, s, "index", `open requests index entry is under session "\u0455", the effect's "s"`)
}

// An upstream command changed deep inside a long argument (a script given
// inline) is one line that shows where it differs, element by element, not
// the whole command twice.
func TestVerifyShowsALongUpstreamArgumentWhereItDiffers(t *testing.T) {
	s, _ := newStore(t)
	script := strings.Repeat("console.log(1);", 4096)
	must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Upstream: []string{"node", "-e", script + "serve('/srv')"}}))
	verifyClean(t, s)
	tamper(t, s, func(tx *bolt.Tx) error {
		sess, err := getSession(plainTx(tx), "p")
		if err != nil {
			return err
		}
		sess.Upstream[2] = script + "serve('/etc')"
		return putSession(&writeTx{Tx: tx}, &sess)
	})
	rep := must[effectlog.VerifyReport](t)(s.Verify(t.Context()))
	for _, p := range rep.Problems {
		if strings.Contains(p.Detail, "upstream was altered") {
			if len(p.Detail) > 400 || !strings.Contains(p.Detail, `serve('/etc')"]`) || !strings.Contains(p.Detail, `serve('/srv')"]`) {
				t.Fatalf("verify says %d bytes: %.300q", len(p.Detail), p.Detail)
			}
			return
		}
	}
	t.Fatalf("verify did not find the upstream changed: %v", rep.Problems)
}
