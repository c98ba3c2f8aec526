package boltfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/undolog/undolog/storage/internal/record"
)

// The overlay reads as the journal replayed into a write transaction (what
// the next writer holds, and what readers read before the overlay): random
// bbolt contents (with empty values and nested buckets), random journal
// records of puts, deletes and sequences (with keys bbolt refuses), then
// every Get, Sequence, ForEach and random cursor walk (both directions,
// seeks, moves past either end) agrees, and where the replay fails the
// overlay fails with the same error.
func TestOverlayReadsAsTheReplay(t *testing.T) {
	dir := t.TempDir()
	n := 0
	buckets := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	// Few short keys, so that the journal's keys meet bbolt's often.
	key := rapid.Custom(func(t *rapid.T) []byte {
		return rapid.SliceOfN(rapid.SampledFrom([]byte{0, 1, 'k', 'l', 0xff}), 1, 3).Draw(t, "key")
	})
	value := rapid.SliceOfN(rapid.Byte(), 0, 3)
	rapid.Check(t, func(t *rapid.T) {
		n++
		path := filepath.Join(dir, fmt.Sprintf("%d.db", n))
		defer os.Remove(path)
		db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// bbolt's contents.
		err = db.Update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucket(bMeta)
			if err != nil {
				return err
			}
			if err := meta.Put(keyLogID, []byte("12345678")); err != nil {
				return err
			}
			for _, name := range buckets {
				b, err := tx.CreateBucket(name)
				if err != nil {
					return err
				}
				for i, m := 0, rapid.IntRange(0, 40).Draw(t, "keys"); i < m; i++ {
					k := key.Draw(t, "bbolt key")
					if rapid.IntRange(0, 15).Draw(t, "nested") == 0 {
						if b.Get(k) == nil {
							b.CreateBucketIfNotExists(k)
						}
						continue
					}
					if b.Bucket(k) == nil {
						if err := b.Put(k, value.Draw(t, "bbolt value")); err != nil {
							return err
						}
					}
				}
				if rapid.Bool().Draw(t, "sequence") {
					b.SetSequence(rapid.Uint64Range(0, 9).Draw(t, "bbolt sequence"))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The journal: records of random operations, sealed on bbolt's state.
		var base journalBase
		if err := db.View(func(tx *bolt.Tx) error { base = baseOf(tx); return nil }); err != nil {
			t.Fatal(err)
		}
		bucketNames := append(append([][]byte{}, buckets...), bMeta, []byte("none"))
		var journalBytes []byte
		for r, records := 0, rapid.IntRange(1, 4).Draw(t, "records"); r < records; r++ {
			w := record.Writer{Buf: make([]byte, journalHeader)}
			for i, m := 0, rapid.IntRange(0, 30).Draw(t, "ops"); i < m; i++ {
				name := buckets[rapid.IntRange(0, len(buckets)-1).Draw(t, "bucket")]
				if rapid.IntRange(0, 60).Draw(t, "no bucket") == 0 {
					name = []byte("none")
				}
				switch rapid.IntRange(0, 9).Draw(t, "op") {
				case 0, 1, 2, 3, 4:
					k := key.Draw(t, "put key")
					if rapid.IntRange(0, 60).Draw(t, "empty key") == 0 {
						k = nil
					}
					w.Buf = append(w.Buf, opPut)
					w.Bytes(name)
					w.Bytes(k)
					w.Bytes(value.Draw(t, "put value"))
				case 5, 6, 7, 8:
					w.Buf = append(w.Buf, opDelete)
					w.Bytes(name)
					w.Bytes(key.Draw(t, "delete key"))
				case 9:
					w.Buf = append(w.Buf, opSequence)
					w.Bytes(name)
					w.Uint(rapid.Uint64Range(0, 99).Draw(t, "journal sequence"))
				}
			}
			sealRecord(w.Buf, base)
			journalBytes = append(journalBytes, w.Buf...)
		}
		jpath := path + JournalSuffix
		if err := os.WriteFile(jpath, journalBytes, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(jpath)

		// The reference: the journal replayed into a write transaction.
		wtx, err := db.Begin(true)
		if err != nil {
			t.Fatal(err)
		}
		defer wtx.Rollback()
		jw, err := readJournal(jpath, baseOf(wtx), journalNeed{}, path)
		if err != nil {
			t.Fatal(err)
		}
		_, replayErr := jw.replay(wtx)
		// The overlay, on a read transaction beside it.
		rtx, err := db.Begin(false)
		if err != nil {
			t.Fatal(err)
		}
		defer rtx.Rollback()
		jr, err := readJournal(jpath, baseOf(rtx), journalNeed{}, path)
		if err != nil {
			t.Fatal(err)
		}
		if jr.records != jw.records {
			t.Fatalf("%d records read for the overlay, %d for the replay", jr.records, jw.records)
		}
		ov, overlayErr := jr.overlay(rtx)
		if fmt.Sprint(replayErr) != fmt.Sprint(overlayErr) {
			t.Fatalf("replay: %v; overlay: %v", replayErr, overlayErr)
		}
		if replayErr != nil {
			return
		}
		want, got := plainTx(wtx), &readTx{tx: rtx, ov: ov}
		for _, name := range bucketNames {
			wb, gb := want.Bucket(name), got.Bucket(name)
			if (wb == nil) != (gb == nil) {
				t.Fatalf("bucket %q: %v, want %v", name, gb != nil, wb != nil)
			}
			if wb == nil {
				continue
			}
			if w, g := wb.Sequence(), gb.Sequence(); w != g {
				t.Fatalf("bucket %q: sequence %d, want %d", name, g, w)
			}
			var wantAll, gotAll []string
			wb.ForEach(func(k, v []byte) error { wantAll = append(wantAll, kv(k, v)); return nil })
			gb.ForEach(func(k, v []byte) error { gotAll = append(gotAll, kv(k, v)); return nil })
			if fmt.Sprint(wantAll) != fmt.Sprint(gotAll) {
				t.Fatalf("bucket %q: ForEach\n got %v\nwant %v", name, gotAll, wantAll)
			}
			for i := 0; i < 20; i++ {
				k := key.Draw(t, "get")
				if w, g := wb.Get(k), gb.Get(k); kv(k, w) != kv(k, g) {
					t.Fatalf("bucket %q: Get(%x) = %s, want %s", name, k, kv(k, g), kv(k, w))
				}
			}
			// Walks: a start, then moves, each answer compared.
			for walk := 0; walk < 4; walk++ {
				wc, gc := wb.Cursor(), gb.Cursor()
				var trace []string
				for i, m := 0, rapid.IntRange(1, 25).Draw(t, "moves"); i < m; i++ {
					var wk, wv, gk, gv []byte
					move := rapid.IntRange(0, 9).Draw(t, "move")
					if i == 0 {
						move %= 3 // a walk starts with First, Last or Seek
					}
					switch move {
					case 0:
						wk, wv = wc.First()
						gk, gv = gc.First()
						trace = append(trace, "First")
					case 1:
						wk, wv = wc.Last()
						gk, gv = gc.Last()
						trace = append(trace, "Last")
					case 2:
						k := key.Draw(t, "seek")
						wk, wv = wc.Seek(k)
						gk, gv = gc.Seek(k)
						trace = append(trace, fmt.Sprintf("Seek(%x)", k))
					case 3, 4, 5:
						wk, wv = wc.Next()
						gk, gv = gc.Next()
						trace = append(trace, "Next")
					default:
						wk, wv = wc.Prev()
						gk, gv = gc.Prev()
						trace = append(trace, "Prev")
					}
					if kv(wk, wv) != kv(gk, gv) {
						t.Fatalf("bucket %q: %v: %s, want %s", name, trace, kv(gk, gv), kv(wk, wv))
					}
				}
			}
		}
	})
}

// kv shows a key and value, telling nil (none, or a nested bucket) from
// empty.
func kv(k, v []byte) string {
	switch {
	case k == nil:
		return "end"
	case v == nil:
		return fmt.Sprintf("%x:nil", k)
	}
	return fmt.Sprintf("%x:%x", k, v)
}

// A cursor with no overlay under it is bbolt's: the committer's reads, and
// a read of a log whose journal holds nothing, take bbolt's own path.
func TestReadTxWithoutJournalIsBbolts(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "x.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucket([]byte("a"))
		return b.Put([]byte("k"), []byte("v"))
	})
	db.View(func(tx *bolt.Tx) error {
		b := plainTx(tx).Bucket([]byte("a"))
		if b.o != nil || b.Cursor().o != nil {
			t.Fatal("an overlay without a journal")
		}
		if k, v := b.Cursor().First(); !bytes.Equal(k, []byte("k")) || !bytes.Equal(v, []byte("v")) {
			t.Fatalf("First: %q %q", k, v)
		}
		if plainTx(tx).Bucket([]byte("none")) != nil {
			t.Fatal("a bucket that is not there")
		}
		return nil
	})
}
