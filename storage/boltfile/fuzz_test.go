package boltfile

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/internal/record"
)

// What the fuzz targets cover, and what they cannot: bbolt keeps no checksums
// on its B+tree pages and follows their page ids without bounds checks, so a
// log whose meta pages are intact but whose tree pages were overwritten can
// crash any bbolt program; no cheap check finds that damage. undolog defends
// the rest: bytes that are not an intact log (FuzzOpenLog), meta pages whose
// fields are wrong yet checksummed (FuzzLogMeta), records whose contents
// are garbage in a sound tree (FuzzLogRecords), checksummed journal
// records of arbitrary operations (FuzzJournal), and arbitrary journal
// files around valid records (FuzzJournalFile).

// seedLog is a small real log with sessions, effects in several states, an
// approval request and undo entries; its bytes are built once per process.
var seedLog = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "undolog-fuzz-seed-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s := newTestLog(filepath.Join(dir, "seed.db"), testOptions{})
	for i := 0; i < 20; i++ {
		tier := sm.Compensable
		if i%5 == 4 {
			tier = sm.Irreversible
		}
		res, err := s.Intercept(context.Background(), effectlog.InterceptRequest{Session: "s", Tool: "t", Tier: tier, CreateSession: true,
			Args: json.RawMessage(`{"i":` + string(rune('0'+i%10)) + `}`), Key: string(rune('a' + i))})
		if err != nil {
			return nil, err
		}
		if tier == sm.Compensable {
			s.Start(context.Background(), res.Effect.ID, model.Change{})
			if i%2 == 0 {
				s.Commit(context.Background(), res.Effect.ID, model.Change{Result: json.RawMessage(`{"ok":true}`)})
			}
		}
	}
	if err := s.checkpoint(); err != nil { // the file must hold every write
		return nil, err
	}
	s.pause() // the committer lets the log go before the directory goes
	return os.ReadFile(s.Path())
})

// exerciseLog runs every kind of operation on the log at path: each must
// return a result or an error, never panic. Errors other than the expected
// kinds are logged, not failed: a clear error is the right answer to damage.
func exerciseLog(t *testing.T, path string) {
	st := newTestLog(path, testOptions{LockTimeout: 200 * time.Millisecond})
	defer st.pause() // the committer lets the log go before the directory goes
	check := func(what string, err error) {
		if err != nil && !errors.Is(err, model.ErrCorrupt) && !errors.Is(err, model.ErrNewerSchema) && !errors.Is(err, model.ErrNotFound) &&
			!errors.Is(err, sm.ErrInvalidStateTransition) {
			t.Logf("%s: %v", what, err)
		}
	}
	_, _, err := st.ListEffects(t.Context(), effectlog.EffectFilter{})
	check("list", err)
	_, _, err = st.ListSessions(t.Context(), effectlog.SessionFilter{})
	check("sessions", err)
	_, err = st.GetEffect(t.Context(), 1)
	check("get", err)
	_, err = st.GetSession(t.Context(), "s")
	check("session", err)
	_, _, err = st.UndoStack(t.Context(), "s", 0)
	check("undo stack", err)
	_, err = st.Verify(t.Context())
	check("verify", err)
	_, _, err = st.PendingApprovals(t.Context(), "", 0)
	check("approvals", err)
	check("export", st.Export(t.Context(), "", func(effectlog.ExportRecord) error { return nil }))
	_, _, err = st.Changes(t.Context(), 0, 100)
	check("changes", err)
	_, err = st.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "t", Tier: sm.Compensable, CreateSession: true})
	check("intercept", err)
	_, err = st.Transition(t.Context(), 2, sm.Committed, model.Change{})
	check("transition", err)
}

func writeFuzzLog(t *testing.T, data []byte) string {
	path := filepath.Join(t.TempDir(), "fuzz.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// FuzzOpenLog opens arbitrary bytes as a log: junk, truncated logs, and logs
// whose meta pages are damaged must all give an error, never a panic.
func FuzzOpenLog(f *testing.F) {
	seed, err := seedLog()
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("not a log at all"))
	f.Add(seed[:len(seed)/3])
	f.Add(seed[:8192])
	f.Fuzz(func(t *testing.T, data []byte) {
		exerciseLog(t, writeFuzzLog(t, data))
	})
}

// withMeta returns a copy of log whose newest meta page (the one bbolt uses)
// edit has changed, with its checksum made right again: the damage a buggy
// writer would leave. edit gets the meta from its magic to its checksum.
func withMeta(log []byte, edit func(meta []byte)) []byte {
	le := binary.LittleEndian
	pageSize := int(le.Uint32(log[metaOffset+metaPageSize:]))
	at := metaOffset
	if le.Uint64(log[pageSize+metaOffset+metaTxid:]) > le.Uint64(log[metaOffset+metaTxid:]) {
		at += pageSize
	}
	data := append([]byte(nil), log...)
	m := data[at : at+metaChecksumAt-metaOffset+8]
	edit(m)
	h := fnv.New64a()
	h.Write(m[:metaChecksumAt-metaOffset])
	le.PutUint64(m[metaChecksumAt-metaOffset:], h.Sum64())
	return data
}

// FuzzLogMeta gives a real log's newest meta page arbitrary root, freelist,
// high-water and page-size fields with a valid checksum.
func FuzzLogMeta(f *testing.F) {
	seed, err := seedLog()
	if err != nil {
		f.Fatal(err)
	}
	le := binary.LittleEndian
	var root, freelist, highWater uint64
	var pageSize uint32
	withMeta(seed, func(m []byte) {
		root, freelist = le.Uint64(m[metaRoot:]), le.Uint64(m[metaFreelist:])
		highWater, pageSize = le.Uint64(m[metaHighWater:]), le.Uint32(m[metaPageSize:])
	})
	f.Add(root, freelist, highWater, pageSize)
	f.Add(freelist, root, highWater, pageSize)
	f.Add(uint64(3), uint64(4), uint64(1)<<40, uint32(4096))
	f.Fuzz(func(t *testing.T, root, freelist, highWater uint64, pageSize uint32) {
		data := withMeta(seed, func(m []byte) {
			le.PutUint32(m[metaPageSize:], pageSize)
			le.PutUint64(m[metaRoot:], root)
			le.PutUint64(m[metaFreelist:], freelist)
			le.PutUint64(m[metaHighWater:], highWater)
		})
		exerciseLog(t, writeFuzzLog(t, data))
	})
}

// FuzzLogRecords overwrites one record of a real log with arbitrary bytes
// through bbolt, so the tree stays sound and only undolog's decoding of its
// own records is tested.
func FuzzLogRecords(f *testing.F) {
	seed, err := seedLog()
	if err != nil {
		f.Fatal(err)
	}
	for i := range allBuckets {
		f.Add(uint8(i), uint8(0), []byte(`{}`))
		f.Add(uint8(i), uint8(1), []byte(`{"state":"committed","tier":"safe"}`))
	}
	f.Add(uint8(4), uint8(3), []byte{0xff, 0x00})
	// Binary records of each type, to mutate.
	for i, rec := range []any{
		&model.Effect{ID: 2, Session: "s", Tool: "t", Tier: sm.Compensable, State: sm.Committed, Args: json.RawMessage(`{}`),
			Compensation: &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"rm", "x"}}, HistoryLen: 3},
		&model.HistoryRecord{Seq: 2, Kind: model.KindEffect, EffectID: 2, Session: "s", From: "pending", To: "executing", At: time.Unix(1, 0)},
		&model.UndoEntry{EffectID: 2, Session: "s", Tool: "t", State: sm.EntryPending},
		&model.Approval{EffectID: 5, Session: "s", ApprovalRound: model.ApprovalRound{Outcome: model.ApprovalPending}},
		&model.Session{ID: "s", State: sm.SessionActive, Meta: map[string]string{"a": "b"}, Counts: map[sm.State]int{sm.Pending: 1}},
	} {
		data, err := record.Encode(rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8([]int{4, 5, 11, 12, 1}[i]), uint8(0), data)
	}
	f.Fuzz(func(t *testing.T, bucket, record uint8, value []byte) {
		path := writeFuzzLog(t, seed)
		db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true}) // the file is thrown away
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(allBuckets[int(bucket)%len(allBuckets)])
			c := b.Cursor()
			k, _ := c.First()
			for i := 0; k != nil && i < int(record); i++ {
				k, _ = c.Next()
			}
			if k == nil {
				return nil
			}
			return b.Put(append([]byte(nil), k...), value)
		})
		db.Close()
		if err != nil {
			t.Skip(err) // bbolt refused the value (e.g. too large); nothing to test
		}
		exerciseLog(t, path)
	})
}

// seedLogAndBase is seedLog and the base its journal records apply on.
func seedLogAndBase(f *testing.F) ([]byte, journalBase) {
	seed, err := seedLog()
	if err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(f.TempDir(), "seed.db")
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		f.Fatal(err)
	}
	base, err := committedBaseOf(path)
	if err != nil {
		f.Fatal(err)
	}
	return seed, base
}

// FuzzJournal puts arbitrary operations in the journal of a real log, in a
// record with a valid checksum for the log's transaction: replaying them must
// give an error or a working log, never a panic.
func FuzzJournal(f *testing.F) {
	seed, base := seedLogAndBase(f)
	// Real operations to mutate: a session, an effect and its indexes.
	w := &writeTx{}
	w.op(opSequence, bEffects)
	w.ops.Uint(21)
	for _, kv := range [][3][]byte{{bEffects, itob(21), []byte{record.Form1, 1}}, {bBySession, nameKey("s", 21), nil},
		{bMeta, keySchema, itob(SchemaVersion)}} {
		w.op(opPut, kv[0])
		w.ops.Bytes(kv[1])
		w.ops.Bytes(kv[2])
	}
	w.op(opDelete, bByState)
	w.ops.Bytes(nameKey("pending", 5))
	f.Add(w.ops.Buf)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, ops []byte) {
		path := writeFuzzLog(t, seed)
		j := &journal{path: path + JournalSuffix}
		if err := j.append(base, append(make([]byte, journalHeader), ops...)); err != nil {
			t.Fatal(err)
		}
		exerciseLog(t, path)
	})
}

// FuzzJournalFile puts arbitrary bytes in the journal of a real log, seeded
// with records valid for the log followed by leftovers, torn and damaged
// records: reading it must give an error or a working log, never a panic.
func FuzzJournalFile(f *testing.F) {
	seed, base := seedLogAndBase(f)
	record := func(base journalBase, ops ...byte) []byte {
		j := &journal{path: filepath.Join(f.TempDir(), "j")}
		if err := j.append(base, append(make([]byte, journalHeader), ops...)); err != nil {
			f.Fatal(err)
		}
		data, _ := os.ReadFile(j.path)
		return data
	}
	w := &writeTx{}
	w.op(opSequence, bEffects)
	w.ops.Uint(30)
	good, older := record(base, w.ops.Buf...), record(journalBase{base.txid - 1, base.log}, w.ops.Buf...)
	damaged := append([]byte(nil), good...)
	damaged[len(damaged)-1] ^= 1
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	f.Add(cat(good, older, older))
	f.Add(cat(good, good, damaged, older))
	f.Add(cat(damaged, good))
	f.Add(cat(good, good[:10], older[10:]))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, journalBytes []byte) {
		path := writeFuzzLog(t, seed)
		if err := os.WriteFile(path+JournalSuffix, journalBytes, 0o600); err != nil {
			t.Fatal(err)
		}
		exerciseLog(t, path)
	})
}
