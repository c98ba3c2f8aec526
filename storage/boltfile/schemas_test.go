package boltfile

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	sm "github.com/undolog/undolog/statemachine"

	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage/internal/record"
	bolt "go.etcd.io/bbolt"
)

// TestJSONRecordsOfOlderLogs: a schema 1 log, whose records are JSON, reads,
// verifies and moves on as before; its first write moves it to schema 2 (so
// that older undologs refuse it), new records are binary, and the two forms
// live side by side.
func TestJSONRecordsOfOlderLogs(t *testing.T) {
	s, id := seeded(t) // effect id committed, id+1 waiting for approval
	before := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	tamper(t, s, func(tx *bolt.Tx) error {
		rewrite := func(bucket []byte, decode func([]byte) (any, error)) error {
			b := tx.Bucket(bucket)
			type kv struct{ k, v []byte }
			var all []kv
			err := b.ForEach(func(k, v []byte) error {
				rec, err := decode(v)
				if err != nil {
					return err
				}
				data, err := json.Marshal(rec)
				all = append(all, kv{append([]byte{}, k...), data})
				return err
			})
			for _, r := range all {
				if err == nil {
					err = b.Put(r.k, r.v)
				}
			}
			return err
		}
		decodeAs := func(newRec func() any) func([]byte) (any, error) {
			return func(v []byte) (any, error) { r := newRec(); return r, record.Decode(v, r) }
		}
		for _, step := range []struct {
			bucket []byte
			rec    func() any
		}{
			{bEffects, func() any { return &model.Effect{} }}, {bHistory, func() any { return &model.HistoryRecord{} }},
			{bUndo, func() any { return &model.UndoEntry{} }}, {bApprovals, func() any { return &model.Approval{} }},
			{bSessions, func() any { return &model.Session{} }},
		} {
			if err := rewrite(step.bucket, decodeAs(step.rec)); err != nil {
				return err
			}
		}
		// Signature keys as hex, as older logs have them.
		sigs := tx.Bucket(bSignatures)
		var keys [][]byte
		sigs.ForEach(func(k, _ []byte) error { keys = append(keys, append([]byte{}, k...)); return nil })
		for _, k := range keys {
			v := append([]byte{}, sigs.Get(k)...)
			if err := sigs.Delete(k); err != nil {
				return err
			}
			if err := sigs.Put([]byte(hex.EncodeToString(k)), v); err != nil {
				return err
			}
		}
		// Change-feed entries naming the history key, as older logs have them.
		changes := tx.Bucket(bChanges)
		var entries [][2][]byte
		changes.ForEach(func(k, v []byte) error {
			entries = append(entries, [2][]byte{append([]byte{}, k...), append([]byte{}, v...)})
			return nil
		})
		for _, kv := range entries {
			if kv[1][0] != changeEffect {
				continue
			}
			bucket, key, err := changeLocation(kv[1])
			if err != nil || string(bucket) != string(bHistory) {
				return fmt.Errorf("change %x: %v", kv[0], err)
			}
			if err := changes.Put(kv[0], append([]byte{changeEffectKey}, key...)); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bMeta).Put(keySchema, itob(1)); err != nil {
			return err
		}
		if v := tx.Bucket(bEffects).Get(itob(id)); len(v) == 0 || v[0] != '{' {
			return fmt.Errorf("effect %d not rewritten as JSON: %q", id, v)
		}
		return nil
	})
	verifyClean(t, s)
	schema := func() uint64 {
		var v uint64
		db, err := bolt.Open(s.Path(), 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.View(func(tx *bolt.Tx) error { v = btoi(tx.Bucket(bMeta).Get(keySchema)); return nil })
		return v
	}
	if v := schema(); v != 1 {
		t.Fatalf("reading moved the schema to %d", v)
	}
	after := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	if after.Effect.CallSignature != before.Effect.CallSignature || len(after.History) != len(before.History) ||
		after.History[2].Hash != before.History[2].Hash || string(after.Effect.Result) != string(before.Effect.Result) {
		t.Fatalf("the JSON records read differently:\n before %+v\n after  %+v", before, after)
	}
	// The same call replays from the JSON record; the waiting one is approved.
	if res := intercept(t, s, "s", "write", sm.Compensable, `{"a":1}`); res.Outcome != model.OutcomeReplayed || res.Effect.ReplayOf == nil || *res.Effect.ReplayOf != id {
		t.Fatalf("replay of a JSON record: %+v", res)
	}
	must[model.Effect](t)(s.Approve(t.Context(), id+1, model.Change{Actor: "alice"}))
	verifyClean(t, s)
	if v := schema(); v != SchemaVersion {
		t.Fatalf("after a write the schema is %d, want %d", v, SchemaVersion)
	}
	// The change feed reads old and new entries alike, in order.
	changes, _, err := s.Changes(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var effectRecords int
	for _, c := range changes {
		if c.Record.Kind == model.KindEffect && c.Record.EffectID == id {
			effectRecords++
		}
	}
	if effectRecords != len(after.History) || changes[len(changes)-1].Record.To != string(sm.Approved) {
		t.Fatalf("change feed: %d records of effect %d (want %d), last %+v", effectRecords, id, len(after.History), changes[len(changes)-1].Record)
	}
}

// TestHistoryLinksWithoutStoredPrevHash: binary history records store
// neither prev_hash nor their effect and session, yet every reader (show, the
// change feed) sees them.
func TestHistoryLinksWithoutStoredPrevHash(t *testing.T) {
	s, id := seeded(t)
	hist := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id)).History
	if len(hist) != 3 {
		t.Fatalf("history %+v", hist)
	}
	byHash := map[string]string{}
	for i, r := range hist {
		if r.EffectID != id || r.Session != "s" {
			t.Fatalf("record %d: effect %d of session %q, want %d of s", r.Seq, r.EffectID, r.Session, id)
		}
		want := ""
		if i > 0 {
			want = hist[i-1].Hash
		}
		if r.PrevHash != want || r.Hash == "" {
			t.Fatalf("record %d: prev_hash %q, want %q", r.Seq, r.PrevHash, want)
		}
		byHash[r.Hash] = r.PrevHash
	}
	changes, _, err := s.Changes(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, c := range changes {
		if prev, ok := byHash[c.Record.Hash]; ok {
			seen++
			if c.Record.PrevHash != prev || c.Record.EffectID != id || c.Record.Session != "s" {
				t.Fatalf("change %d: %+v, want prev_hash %q, effect %d of session s", c.Position, c.Record, prev, id)
			}
		}
	}
	if seen != 3 {
		t.Fatalf("the change feed holds %d of the effect's 3 records", seen)
	}
}
