package boltfile

import (
	"errors"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// A log written before kept the approval of an irreversible effect that
// failed since (pending, approval approved, no request open). It no longer
// runs on it: a retry opens a new request, and a decision can be made.
func TestFailedApprovalOfAnOlderLogIsAskedAgain(t *testing.T) {
	s, _ := newStore(t)
	older := func() uint64 {
		id := intercept(t, s, "old", "wire", sm.Irreversible, `{"n":1}`).Effect.ID
		must[model.Effect](t)(s.Approve(t.Context(), id, model.Change{Actor: "alice"}))
		must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
		must[model.Effect](t)(s.Fail(t.Context(), id, model.Change{}))
		// Back to what an earlier undolog left after the failure.
		err := s.update(func(tx *writeTx) error {
			a, err := getApproval(plainTx(tx.Tx), id)
			if err != nil {
				return err
			}
			r := a.Earlier[0]
			a.Earlier, a.RequestedAt, a.Outcome, a.DecidedBy, a.DecidedAt = nil, r.RequestedAt, r.Outcome, r.DecidedBy, r.DecidedAt
			if err := putRecord(tx, bApprovals, itob(id), a); err != nil {
				return err
			}
			sess, err := getSession(plainTx(tx.Tx), "old")
			if err != nil {
				return err
			}
			sess.PendingApprovals = 0
			if err := tx.delete(bApprovalsOpen, itob(id)); err != nil {
				return err
			}
			if err := tx.delete(bOpenBySession, nameKey("old", id)); err != nil {
				return err
			}
			return putSession(tx, &sess)
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	id := older()
	verifyClean(t, s)
	if _, err := s.Start(t.Context(), id, model.Change{}); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("started on the old approval: %v", err)
	}
	again := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "old", Tool: "wire", Tier: sm.Irreversible,
		Args: []byte(`{"n":1}`), Start: true}))
	if again.Outcome != model.OutcomeInProgress || again.Effect.State != sm.Pending {
		t.Fatalf("retry: %+v", again)
	}
	if p := pending(t, s); len(p) != 1 || p[0].EffectID != id || len(p[0].Earlier) != 1 {
		t.Fatalf("approvals %+v", p)
	}
	must[model.Effect](t)(s.Reject(t.Context(), id, model.Change{Actor: "bob"}))
	if sess := must[model.Session](t)(s.GetSession(t.Context(), "old")); sess.State != sm.SessionHalted || sess.PendingApprovals != 0 {
		t.Fatalf("session %+v", sess)
	}
	verifyClean(t, s)
}
