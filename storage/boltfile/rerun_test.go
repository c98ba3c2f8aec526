package boltfile

import (
	"encoding/json"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// A call made again after its answer reached the client is a second effect
// of one signature, which owns it; verify takes the earlier one only as
// answered, and the index only as naming the newest.
func TestVerifyChecksACallMadeAgain(t *testing.T) {
	seed := func(t *testing.T) (*testLog, uint64, uint64) {
		s, _ := newStore(t)
		req := effectlog.InterceptRequest{Session: "s", Tool: "write", Tier: sm.Compensable, Args: json.RawMessage(`{"c":"A"}`),
			CreateSession: true, Start: true, RunAgainAnswered: true}
		first := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), req)).Effect.ID
		must[model.Effect](t)(s.Commit(t.Context(), first, model.Change{Result: json.RawMessage(`1`)}))
		must[model.Effect](t)(s.Answered(t.Context(), first, model.Change{}))
		again := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), req)).Effect.ID
		verifyClean(t, s)
		return s, first, again
	}
	t.Run("index naming the earlier effect", func(t *testing.T) {
		s, first, again := seed(t)
		tamper(t, s, func(tx *bolt.Tx) error {
			var e model.Effect
			getRecord(plainTx(tx).Bucket(bEffects), itob(again), &e)
			return tx.Bucket(bSignatures).Put(signatureKey(e.CallSignature), itob(first))
		})
		expectProblem(t, s, "index", "signature index does not point at the effect")
	})
	t.Run("earlier effect without its answer", func(t *testing.T) {
		s, first, _ := seed(t)
		tamper(t, s, func(tx *bolt.Tx) error {
			var e model.Effect
			getRecord(plainTx(tx).Bucket(bEffects), itob(first), &e)
			if err := tx.Bucket(bHistory).Delete(historyKey(first, e.HistoryLen)); err != nil {
				return err
			}
			e.HistoryLen--
			return putRecord(&writeTx{Tx: tx}, bEffects, itob(first), &e)
		})
		expectProblem(t, s, "signature", "also owned by effect")
	})
}
