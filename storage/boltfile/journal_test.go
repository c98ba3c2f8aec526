package boltfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// effectsInBolt counts the effects bbolt itself holds, without the journal.
func effectsInBolt(t *testing.T, path string) int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	db.View(func(tx *bolt.Tx) error { n = tx.Bucket(bEffects).Stats().KeyN; return nil })
	return n
}

// crashCopy copies the log and its journal as a crash would leave them: the
// process gone, the files as they are.
func crashCopy(t *testing.T, s *testLog) *testLog {
	t.Helper()
	dir := t.TempDir()
	for _, suffix := range []string{"", JournalSuffix} {
		data, err := os.ReadFile(s.Path() + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "undolog.db"+suffix), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := newTestLog(filepath.Join(dir, "undolog.db"), testOptions{})
	t.Cleanup(func() { c.pause() })
	return c
}

// committedBase is what the next holder of the log would replay the journal
// on: the last transaction bbolt committed. It lets the committer let the
// log go first, as if another process were asking.
func committedBase(t *testing.T, s *testLog) journalBase {
	t.Helper()
	s.pause()()
	base, err := committedBaseOf(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// committedBaseOf is the base of the log file at path.
func committedBaseOf(path string) (journalBase, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return journalBase{}, err
	}
	defer db.Close()
	var base journalBase
	err = db.View(func(tx *bolt.Tx) error { base = baseOf(tx); return nil })
	return base, err
}

// journalRecords reads the journal as the next holder of the log would.
func journalRecords(t *testing.T, s *testLog) *journal {
	t.Helper()
	j, err := readJournal(s.journalPath(), committedBase(t, s), journalNeed{}, s.Path())
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// An acknowledged write may be in the journal only; it survives a crash and
// every reader sees it.
func TestJournalHoldsAcknowledgedWrites(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "s", "write", sm.Compensable, `{"n":1}`) // creates the log
	must[model.Effect](t)(s.Start(t.Context(), 1, model.Change{}))
	id := intercept(t, s, "s", "write", sm.Compensable, `{"n":2}`).Effect.ID
	if n := effectsInBolt(t, s.Path()); n != 0 {
		t.Fatalf("bbolt holds %d effects; the writes should be in the journal", n)
	}
	if info, err := os.Stat(s.journalPath()); err != nil || info.Size() == 0 {
		t.Fatalf("journal: %v %v", info, err)
	}

	crashed := crashCopy(t, s)
	logBefore, journalBefore := readFile(t, crashed.Path()), readFile(t, crashed.journalPath())
	d := must[model.EffectDetail](t)(crashed.GetEffect(t.Context(), id))
	if d.Effect.State != sm.Pending || string(d.Effect.Args) != `{"n":2}` {
		t.Fatalf("%+v", d.Effect)
	}
	if e := must[model.EffectDetail](t)(crashed.GetEffect(t.Context(), 1)); e.Effect.State != sm.Executing {
		t.Fatalf("effect 1 is %s", e.Effect.State)
	}
	verifyClean(t, crashed)
	// Reads wrote nothing: both files are as the crash left them.
	if !bytes.Equal(readFile(t, crashed.Path()), logBefore) || !bytes.Equal(readFile(t, crashed.journalPath()), journalBefore) {
		t.Fatal("a read changed the log or its journal")
	}
	if j := journalRecords(t, crashed); j.records != 3 {
		t.Fatalf("the journal holds %d records to apply, want 3", j.records)
	}
	// The original goes on where it was.
	must[model.Effect](t)(s.Commit(t.Context(), 1, model.Change{}))
	verifyClean(t, s)
}

// Writes go to the journal until it holds journalMaxRecords records or would
// pass journalMaxBytes; then one bbolt commit takes them all, and the
// journal starts again.
func TestJournalIsCheckpointedWhenFull(t *testing.T) {
	for name, argSize := range map[string]int{"small records": 10, "large records": 6000} {
		t.Run(name, func(t *testing.T) {
			s, _ := newStore(t)
			intercept(t, s, "s", "write", sm.Compensable, `1`)
			commits := s.group.commits.Load()
			var records, size int
			for i := 0; s.group.commits.Load() == commits; i++ {
				if i > 1000 {
					t.Fatal("no checkpoint after 1000 writes")
				}
				j := journalRecords(t, s)
				records, size = j.records, len(j.data)
				intercept(t, s, "s", "write", sm.Compensable, fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, bytes.Repeat([]byte("x"), argSize)))
			}
			// The write that checkpointed found the journal full.
			full := records == journalMaxRecords || records > 0 && size+size/records > journalMaxBytes
			if !full || records > journalMaxRecords || size > journalMaxBytes {
				t.Fatalf("checkpointed at %d records, %d bytes (limits %d, %d)", records, size, journalMaxRecords, journalMaxBytes)
			}
			if j := journalRecords(t, s); j.records != 0 {
				t.Fatalf("%d records still to apply after the checkpoint", j.records)
			}
			rep := verifyClean(t, s)
			if n := effectsInBolt(t, s.Path()); n != rep.Effects {
				t.Fatalf("bbolt holds %d effects of %d", n, rep.Effects)
			}
		})
	}
}

// A crash during an append leaves a torn record after the valid ones, over
// what the file held there: nothing, or the leftovers of records already
// checkpointed, which may line up with the torn record's end. It was never
// acknowledged, is ignored, and the next write replaces it.
func TestJournalTornAppendIsIgnored(t *testing.T) {
	for name, tear := range map[string]func(rec []byte) []byte{
		"cut short":    func(rec []byte) []byte { return rec[:len(rec)/2] },
		"bad checksum": func(rec []byte) []byte { rec[len(rec)-1] ^= 0xff; return rec },
		"header only":  func(rec []byte) []byte { return rec[:10] },
	} {
		for _, first := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, first record %v", name, first), func(t *testing.T) {
				s, _ := newStore(t)
				intercept(t, s, "s", "write", sm.Compensable, `1`)
				intercept(t, s, "s", "write", sm.Compensable, `2`)
				want := 3
				if first {
					if err := s.checkpoint(); err != nil { // the torn record is the journal's first
						t.Fatal(err)
					}
					want = 1
				}
				at := int(journalRecords(t, s).size)
				before, _ := os.ReadFile(s.journalPath())
				intercept(t, s, "s", "write", sm.Compensable, `3`)
				s.pause()() // the committer lets the log go: this test plays another process
				after, _ := os.ReadFile(s.journalPath())
				rec := after[at : at+journalHeader+int(binary.LittleEndian.Uint32(after[at:]))]
				if first && !bytes.Equal(rec, after[:len(rec)]) || len(before) < at {
					t.Fatal("the record was not written after the valid ones")
				}
				// Where the torn write did not land, the file holds what it held.
				torn := append([]byte(nil), before...)
				part := tear(append([]byte(nil), rec...))
				torn = append(torn, make([]byte, max(0, at+len(part)-len(torn)))...)
				copy(torn[at:], part)
				if err := os.WriteFile(s.journalPath(), torn, 0o600); err != nil {
					t.Fatal(err)
				}
				// The next write replaces the tear and is kept.
				if got := intercept(t, s, "s", "write", sm.Compensable, `4`).Effect.ID; got != 3 {
					t.Fatalf("new effect %d, want 3", got)
				}
				if j := journalRecords(t, s); j.records != want {
					t.Fatalf("journal after the next write: %d records, want %d", j.records, want)
				}
				if e := must[model.EffectDetail](t)(s.GetEffect(t.Context(), 3)); string(e.Effect.Args) != `4` {
					t.Fatalf("effect 3 has args %s", e.Effect.Args)
				}
				rep := verifyClean(t, s)
				if rep.Effects != 3 {
					t.Fatalf("%d effects", rep.Effects)
				}
			})
		}
	}
}

// A damaged record followed by others is not a torn append: the log is
// refused, for reads and writes, and neither file is touched.
func TestJournalDamageIsRefused(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "s", "write", sm.Compensable, `1`)
	intercept(t, s, "s", "write", sm.Compensable, `2`)
	intercept(t, s, "s", "write", sm.Compensable, `3`)
	s.pause()() // the committer lets the log go: this test plays another process
	data, _ := os.ReadFile(s.journalPath())
	data[journalHeader+2] ^= 0x01
	os.WriteFile(s.journalPath(), data, 0o600)
	log, _ := os.ReadFile(s.Path())
	for what, op := range map[string]func() error{
		"read":  func() error { _, err := s.GetEffect(t.Context(), 1); return err },
		"write": func() error { _, err := s.Start(t.Context(), 1, model.Change{}); return err },
	} {
		if err := op(); !errors.Is(err, model.ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("journal")) {
			t.Fatalf("%s: %v", what, err)
		}
	}
	if now, _ := os.ReadFile(s.journalPath()); !bytes.Equal(now, data) {
		t.Fatal("the journal changed")
	}
	if now, _ := os.ReadFile(s.Path()); !bytes.Equal(now, log) {
		t.Fatal("the log changed")
	}
}

// A journal whose records bbolt already holds (the journal as a crash right
// after a checkpoint leaves it) is dropped, not applied a second time.
func TestStaleJournalIsNotReplayed(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "s", "write", sm.Compensable, `1`)
	intercept(t, s, "s", "write", sm.Compensable, `2`)
	must[model.Effect](t)(s.Start(t.Context(), 1, model.Change{}))
	stale, _ := os.ReadFile(s.journalPath())
	if len(stale) == 0 {
		t.Fatal("nothing journaled")
	}
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	s.pause()() // the committer lets the log go: this test plays another process
	os.WriteFile(s.journalPath(), stale, 0o600)
	if e := must[model.EffectDetail](t)(s.GetEffect(t.Context(), 1)); e.Effect.State != sm.Executing || len(e.History) != 2 {
		t.Fatalf("%s with %d history records", e.Effect.State, len(e.History))
	}
	if got := intercept(t, s, "s", "write", sm.Compensable, `3`).Effect.ID; got != 3 {
		t.Fatalf("new effect %d, want 3", got)
	}
	if rep := verifyClean(t, s); rep.Effects != 3 {
		t.Fatalf("%d effects", rep.Effects)
	}
}

// Compaction takes the journal's writes into the new file and leaves the
// journal empty, since the new file numbers its transactions anew.
func TestCompactAppliesTheJournal(t *testing.T) {
	s, _ := newStore(t)
	for i := 0; i < 5; i++ {
		intercept(t, s, "s", "write", sm.Compensable, string(rune('1'+i)))
	}
	if n := effectsInBolt(t, s.Path()); n == 5 {
		t.Fatal("nothing was journaled")
	}
	if _, _, err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	if n := effectsInBolt(t, s.Path()); n != 5 {
		t.Fatalf("the compacted file holds %d effects", n)
	}
	if info, _ := os.Stat(s.journalPath()); info.Size() != 0 {
		t.Fatalf("journal of %d bytes after compaction", info.Size())
	}
	verifyClean(t, s)
}

// A record with a valid checksum but operations that make no sense is damage.
func TestJournalOperationsAreChecked(t *testing.T) {
	for name, ops := range map[string][]byte{
		"unknown bucket":    append([]byte{opPut, 4}, "nope\x01k\x01v"...),
		"unknown operation": append([]byte{'x', 4}, "meta"...),
		"cut operation":     append([]byte{opPut, 4}, "meta\x05k"...),
		"empty key":         append([]byte{opPut, 4}, "meta\x00\x01v"...),
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := newStore(t)
			intercept(t, s, "s", "write", sm.Compensable, `1`)
			if err := s.checkpoint(); err != nil { // bbolt at transaction T, journal empty
				t.Fatal(err)
			}
			writeJournalRecord(t, s, ops)
			if _, err := s.GetEffect(t.Context(), 1); !errors.Is(err, model.ErrCorrupt) {
				t.Fatalf("%v", err)
			}
		})
	}
}

// writeJournalRecord writes a journal of one record of ops, valid for the
// log's current bbolt transaction.
func writeJournalRecord(t *testing.T, s *testLog, ops []byte) {
	t.Helper()
	base := committedBase(t, s)
	j := &journal{path: s.journalPath()}
	if err := j.append(base, append(make([]byte, journalHeader), ops...)); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(j.path); binary.LittleEndian.Uint64(data[8:]) != base.txid {
		t.Fatal("record not written")
	}
}

// The journal of a log deleted with its journal left behind is not applied
// to a new log made at the same path, though their transaction ids agree.
func TestJournalOfAnotherLogIsNotReplayed(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "old", "write", sm.Compensable, `1`)
	if info, err := os.Stat(s.journalPath()); err != nil || info.Size() == 0 {
		t.Fatal("nothing journaled")
	}
	if err := os.Remove(s.Path()); err != nil {
		t.Fatal(err)
	}
	intercept(t, s, "new", "write", sm.Compensable, `1`)
	if _, err := s.GetSession(t.Context(), "old"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the old log's journal was applied to the new log: %v", err)
	}
	if rep := verifyClean(t, s); rep.Effects != 1 {
		t.Fatalf("%d effects", rep.Effects)
	}
}

// A reader never makes a log, not even when the log is removed while its
// journal holds writes: the checkpoint the reader asks for, or a read in the
// committer, finds no log and leaves none.
func TestReadOfRemovedLogMakesNone(t *testing.T) {
	for name, read := range map[string]func(s *testLog) error{
		"checkpoint": func(s *testLog) error { return s.checkpoint() },
		"read": func(s *testLog) error {
			_, err := s.GetSession(t.Context(), "s")
			if errors.Is(err, model.ErrNotFound) {
				return nil
			}
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := newStore(t)
			intercept(t, s, "s", "write", sm.Compensable, `1`)
			if n := effectsInBolt(t, s.Path()); n != 0 {
				t.Fatal("the write is not in the journal only")
			}
			// The committer still runs: it holds the log, or lingers.
			if err := os.Remove(s.Path()); err != nil {
				t.Fatal(err)
			}
			if err := read(s); err != nil {
				t.Fatal(err)
			}
			s.pause()()
			if err := read(s); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a %s made the log anew: %v", name, err)
			}
		})
	}
}

// After a checkpoint the journal is written again from its start, over the
// records bbolt now holds: once it has filled, appends hardly ever grow the
// file, so an fdatasync mostly has no metadata to commit.
func TestJournalIsReusedInPlace(t *testing.T) {
	s, _ := newStore(t)
	write := func(i int) { intercept(t, s, "s", "write", sm.Compensable, fmt.Sprintf(`{"i":"%04d"}`, i)) }
	write(0) // a new log commits first, to say that it needs its journal
	commits := s.group.commits.Load()
	i := 1
	for ; s.group.commits.Load() == commits; i++ {
		write(i)
	}
	full, err := os.Stat(s.journalPath())
	if err != nil || full.Size() == 0 {
		t.Fatalf("journal after the first checkpoint: %v", err)
	}
	for ; s.group.commits.Load() < commits+3; i++ {
		write(i)
		// Never shorter; longer only as much as later records are (their
		// ids take more bytes).
		if info, _ := os.Stat(s.journalPath()); info.Size() < full.Size() || info.Size() > full.Size()*11/10 {
			t.Fatalf("write %d: journal of %d bytes, was %d", i, info.Size(), full.Size())
		}
	}
	write(i)
	if j := journalRecords(t, s); j.records != 1 {
		t.Fatalf("%d records after a checkpoint and one write", j.records)
	}
	if rep := verifyClean(t, s); rep.Effects != i+1 {
		t.Fatalf("%d effects, want %d", rep.Effects, i+1)
	}
}

// The journal has the log's permission bits, after a write and after a
// read: whoever may read the log may read the journal, which a reader must
// to know what it holds.
func TestJournalTakesTheLogsMode(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "s", "write", sm.Compensable, `1`)
	for _, mode := range []os.FileMode{0o640, 0o600, 0o644} {
		for what, op := range map[string]func(){
			"read":  func() { must[model.EffectDetail](t)(s.GetEffect(t.Context(), 1)) },
			"write": func() { intercept(t, s, "s", "write", sm.Compensable, fmt.Sprintf(`"%o"`, mode)) },
		} {
			// Nothing left to fold in: a read then holds nothing, and must
			// still mend the journal's mode.
			if err := s.checkpoint(); err != nil {
				t.Fatal(err)
			}
			s.pause()()
			if err := os.Chmod(s.journalPath(), 0o604); err != nil { // none of the modes tried
				t.Fatal(err)
			}
			if err := os.Chmod(s.Path(), mode); err != nil {
				t.Fatal(err)
			}
			op()
			if info, err := os.Stat(s.journalPath()); err != nil || info.Mode().Perm() != mode {
				t.Fatalf("after a %s of a log of mode %o, the journal's is %v (%v)", what, mode, info.Mode(), err)
			}
		}
	}
	// A journal made anew is made with the log's mode (after a compaction,
	// when the log needs no journal).
	if _, _, err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(s.journalPath()); err != nil {
		t.Fatal(err)
	}
	os.Chmod(s.Path(), 0o640)
	intercept(t, s, "s", "write", sm.Compensable, `"new"`)
	if info, err := os.Stat(s.journalPath()); err != nil || info.Mode().Perm() != 0o640 {
		t.Fatalf("a new journal beside a log of mode 640: %v (%v)", info.Mode(), err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkpoint commits the journal's records to bbolt and empties it, as the
// committer does when the journal is full (a call with neither a write nor
// a read asks for it).
func (s *testLog) checkpoint() error {
	return s.enqueue(&writeCall{})
}
