package boltfile

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/internal/record"
)

// TestReplayRefusesATamperedResult: a cached result whose effect fails its
// check is not served; the call gets a clear error and nothing is written.
func TestReplayRefusesATamperedResult(t *testing.T) {
	s, id := seeded(t)
	tamper(t, s, func(tx *bolt.Tx) error {
		var e model.Effect
		if _, err := getRecord(plainTx(tx).Bucket(bEffects), itob(id), &e); err != nil {
			return err
		}
		e.Result = json.RawMessage(`2`)
		return putRecord(&writeTx{Tx: tx}, bEffects, itob(id), &e)
	})
	before := must[model.Session](t)(s.GetSession(t.Context(), "s"))
	res, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "write", Tier: sm.Compensable, Args: json.RawMessage(`{"a":1}`)})
	if !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "damaged or tampered") {
		t.Fatalf("replay of a tampered result: %+v, %v", res, err)
	}
	if after := must[model.Session](t)(s.GetSession(t.Context(), "s")); after.Effects != before.Effects {
		t.Fatalf("the refused replay wrote an effect: %d effects, were %d", after.Effects, before.Effects)
	}
}

// TestUndoStepRefusesATamperedCompensation: the log does not let a
// compensation whose effect fails its check start.
func TestUndoStepRefusesATamperedCompensation(t *testing.T) {
	s, id := seededWithCommand(t)
	tamper(t, s, func(tx *bolt.Tx) error {
		var e model.Effect
		if _, err := getRecord(plainTx(tx).Bucket(bEffects), itob(id), &e); err != nil {
			return err
		}
		e.Compensation.Argv = []string{"rm", "-rf", "/"}
		return putRecord(&writeTx{Tx: tx}, bEffects, itob(id), &e)
	})
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	if err := effectlog.CheckEffect(d); !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "damaged or tampered") {
		t.Fatalf("effectlog.CheckEffect of a tampered compensation: %v", err)
	}
	if _, err := s.UndoStep(t.Context(), id, sm.EntryCompensating, model.Change{Actor: "undo"}); !errors.Is(err, model.ErrCorrupt) {
		t.Fatalf("UndoStep to compensating: %v", err)
	}
	if u := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id)).Undo; u.State != sm.EntryPending {
		t.Fatalf("the refused step moved the entry to %s", u.State)
	}
}

// v1RecordHash is how undolog hashed history records before they covered
// their effect's content: the record's fields and the hash before it.
func v1RecordHash(r *model.HistoryRecord) string {
	return model.FieldsHash("undolog-history-v1", r.Kind, strconv.FormatUint(uint64(r.Seq), 10),
		strconv.FormatUint(r.EffectID, 10), r.Session, r.From, r.To, r.Trigger, r.Actor, r.Reason,
		r.Error, r.At.UTC().Format(time.RFC3339Nano), r.PrevHash)
}

// writtenBefore rewrites every effect's history as an undolog from before
// content hashing wrote it: records hashed under the first rule, as JSON
// (schema 1) when asJSON, and the effects pinning the new heads.
func writtenBefore(t *testing.T, s *testLog, asJSON bool) {
	t.Helper()
	tamper(t, s, func(tx *bolt.Tx) error {
		effects := tx.Bucket(bEffects)
		var ids []uint64
		effects.ForEach(func(k, _ []byte) error { ids = append(ids, btoi(k)); return nil })
		for _, id := range ids {
			var e model.Effect
			if _, err := getRecord(plainTx(tx).Bucket(bEffects), itob(id), &e); err != nil {
				return err
			}
			hist, err := effectHistory(plainTx(tx), id, e.Session)
			if err != nil {
				return err
			}
			prev := ""
			for _, r := range hist {
				r.PrevHash, r.HashVersion = prev, 0
				r.Hash = v1RecordHash(&r)
				prev = r.Hash
				var data []byte
				if asJSON {
					data, err = json.Marshal(r)
				} else {
					data, err = record.Encode(&r)
				}
				if err != nil {
					return err
				}
				if err := tx.Bucket(bHistory).Put(historyKey(id, r.Seq), data); err != nil {
					return err
				}
			}
			e.HistoryHead = prev
			if err := putRecord(&writeTx{Tx: tx}, bEffects, itob(id), &e); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestLogsHashedBeforeContentVerifyClean: a log whose history records were
// hashed before they covered their effect's content verifies clean, moves on
// (new records chain onto the old ones, replays are served), and still
// verifies clean; a changed args is still found by its signature.
func TestLogsHashedBeforeContentVerifyClean(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(map[bool]string{false: "binary", true: "json"}[asJSON], func(t *testing.T) {
			s, id := seeded(t) // id committed, id+1 waits for approval
			flaky := intercept(t, s, "s", "flaky", sm.Compensable, `{}`).Effect.ID
			must[model.Effect](t)(s.Start(t.Context(), flaky, model.Change{}))
			must[model.Effect](t)(s.Fail(t.Context(), flaky, model.Change{Error: "disk full"}))
			writtenBefore(t, s, asJSON)
			verifyClean(t, s)
			if err := effectlog.CheckEffect(must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))); err != nil {
				t.Fatalf("an effect hashed before content: %v", err)
			}
			if res := intercept(t, s, "s", "write", sm.Compensable, `{"a":1}`); res.Outcome != model.OutcomeReplayed || string(res.Effect.Result) != "1" {
				t.Fatalf("replay of an effect hashed before content: %+v", res)
			}
			must[model.Effect](t)(s.Approve(t.Context(), id+1, model.Change{Actor: "alice"}))
			must[model.Effect](t)(s.Start(t.Context(), flaky, model.Change{}))
			must[model.Effect](t)(s.Commit(t.Context(), flaky, model.Change{Result: json.RawMessage(`{"ok":true}`)}))
			must[model.UndoEntry](t)(s.UndoStep(t.Context(), id, sm.EntryCompensating, model.Change{Actor: "undo"}))
			verifyClean(t, s)
			for _, eid := range []uint64{id, id + 1, flaky} {
				if err := effectlog.CheckEffect(must[model.EffectDetail](t)(s.GetEffect(t.Context(), eid))); err != nil {
					t.Fatalf("effect %d, old records and new: %v", eid, err)
				}
			}
			// Their records say nothing of the args, but the signature does.
			writtenBefore(t, s, asJSON)
			tamper(t, s, func(tx *bolt.Tx) error {
				var e model.Effect
				if _, err := getRecord(plainTx(tx).Bucket(bEffects), itob(id), &e); err != nil {
					return err
				}
				e.Args = json.RawMessage(`{"a":2}`)
				return putRecord(&writeTx{Tx: tx}, bEffects, itob(id), &e)
			})
			expectProblem(t, s, "signature", "does not match its args")
		})
	}
}

// TestContentHashCostsNoBytes: a history record that covers its effect's
// content takes no more room than one that did not.
func TestContentHashCostsNoBytes(t *testing.T) {
	s, id := seeded(t)
	var sizes []int
	tamper(t, s, func(tx *bolt.Tx) error {
		return tx.Bucket(bHistory).ForEach(func(k, v []byte) error {
			if binary.BigEndian.Uint64(k) == id {
				sizes = append(sizes, len(v))
				var r model.HistoryRecord
				if err := record.Decode(v, &r); err != nil {
					return err
				}
				if r.HashVersion != model.HashWithContent {
					t.Errorf("record %d has hash version %d", r.Seq, r.HashVersion)
				}
				r.HashVersion = 0
				old, err := record.Encode(&r)
				if err != nil {
					return err
				}
				if len(old) != len(v) {
					t.Errorf("record %d: %d bytes, %d before content hashing", r.Seq, len(v), len(old))
				}
			}
			return nil
		})
	})
	if len(sizes) != 3 {
		t.Fatalf("%d records", len(sizes))
	}
}

// sessionsWrittenBefore rewrites session id as an undolog from before
// session records covered what the session says wrote it: its records hashed
// under the first rule, and its upstream (if any) set without a record, as
// SetUpstream did.
func sessionsWrittenBefore(t *testing.T, s *testLog, id string, upstream []string) {
	t.Helper()
	tamper(t, s, func(tx *bolt.Tx) error {
		sess, err := getSession(plainTx(tx), id)
		if err != nil {
			return err
		}
		hist, err := sessionHistory(plainTx(tx), id)
		if err != nil {
			return err
		}
		prev, n := "", uint32(0)
		for _, r := range hist {
			if r.Trigger == effectlog.TriggerUpstream {
				if err := tx.Bucket(bSessionHistory).Delete(sessionHistoryKey(id, r.Seq)); err != nil {
					return err
				}
				continue
			}
			n++
			r.Seq, r.PrevHash, r.HashVersion = n, prev, 0
			r.Hash = v1RecordHash(&r)
			prev = r.Hash
			if err := putRecord(&writeTx{Tx: tx}, bSessionHistory, sessionHistoryKey(id, r.Seq), &r); err != nil {
				return err
			}
		}
		sess.HistoryLen, sess.HistoryHead, sess.Upstream = n, prev, upstream
		return putSession(&writeTx{Tx: tx}, &sess)
	})
}

// TestSessionsWrittenBeforeVerifyClean: a session whose records were hashed
// before they covered what it says, and whose upstream was set without a
// record, verifies clean and moves on; once its upstream is recorded again
// (a proxy starts on it), a changed upstream is found.
func TestSessionsWrittenBeforeVerifyClean(t *testing.T) {
	s, _ := newStore(t)
	upstream := []string{"mcp-server", "--root=/srv"}
	must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Meta: map[string]string{"via": "proxy"}}))
	intercept(t, s, "p", "write", sm.Compensable, `{"a":1}`)
	sessionsWrittenBefore(t, s, "p", upstream)
	verifyClean(t, s)
	if _, err := s.VerifySession(t.Context(), "p"); err != nil {
		t.Fatalf("a session hashed before content: %v", err)
	}
	intercept(t, s, "p", "pay", sm.Irreversible, `{}`) // a new record on the old chain
	verifyClean(t, s)
	before := must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), "p"))
	must[model.Session](t)(s.SetUpstream(t.Context(), "p", upstream))
	after := must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), "p"))
	if len(after) != len(before)+1 || after[len(after)-1].Trigger != effectlog.TriggerUpstream {
		t.Fatalf("SetUpstream of an upstream no record states: history %s", states(after))
	}
	must[model.Session](t)(s.SetUpstream(t.Context(), "p", upstream)) // stated now: nothing to add
	if again := must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), "p")); len(again) != len(after) {
		t.Fatalf("SetUpstream of the upstream already recorded added a record")
	}
	verifyClean(t, s)
	tamper(t, s, func(tx *bolt.Tx) error {
		sess, err := getSession(plainTx(tx), "p")
		if err != nil {
			return err
		}
		sess.Upstream = []string{"mcp-server", "--root=/etc"}
		return putSession(&writeTx{Tx: tx}, &sess)
	})
	expectProblem(t, s, "history", "upstream was altered")
}
