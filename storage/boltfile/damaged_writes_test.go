package boltfile

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// damagedSeed is a log whose effects and history fill several pages, with
// an effect intercepted, one executing and one committed at their end, and
// a write still only in its journal.
type damagedSeed struct {
	path                          string
	pending, executing, committed uint64
}

func seedForDamage(t *testing.T) damagedSeed {
	t.Helper()
	s, _ := newStore(t)
	pad := strings.Repeat("x", 200)
	for i := 0; i < 300; i++ {
		intercept(t, s, "old", "w", sm.Compensable, `{"i":`+strconv.Itoa(i)+`,"pad":"`+pad+`"}`)
	}
	seed := damagedSeed{path: s.Path()}
	seed.committed = intercept(t, s, "new", "w", sm.Compensable, `{"c":1}`).Effect.ID
	must[model.Effect](t)(s.Start(t.Context(), seed.committed, model.Change{}))
	must[model.Effect](t)(s.Commit(t.Context(), seed.committed, model.Change{Result: json.RawMessage(`1`)}))
	seed.executing = intercept(t, s, "new", "w", sm.Compensable, `{"c":2}`).Effect.ID
	must[model.Effect](t)(s.Start(t.Context(), seed.executing, model.Change{}))
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	seed.pending = intercept(t, s, "new", "w", sm.Compensable, `{"c":3}`).Effect.ID
	s.pause()()
	if j := journalRecords(t, s); j.records == 0 {
		t.Fatal("nothing in the journal")
	}
	return seed
}

// bucketPages returns the pages of the bucket's tree, the first leaf first.
func bucketPages(t *testing.T, path string, bucket []byte) (leaves []uint64, branches []uint64, pageSize int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	db.View(func(tx *bolt.Tx) error { root = uint64(tx.Bucket(bucket).Root()); return nil })
	pageSize = db.Info().PageSize
	db.Close()
	data := readFile(t, path)
	le := binary.LittleEndian
	var walk func(id uint64)
	walk = func(id uint64) {
		p := data[id*uint64(pageSize):]
		if le.Uint16(p[8:])&branchPageFlag == 0 {
			leaves = append(leaves, id)
			return
		}
		branches = append(branches, id)
		for i := 0; i < int(le.Uint16(p[10:])); i++ {
			walk(le.Uint64(p[pageHeaderSize+i*16+8:])) // a branch entry: position, key size, page id
		}
	}
	if root == 0 {
		t.Fatalf("bucket %s is inline", bucket)
	}
	walk(root)
	return leaves, branches, pageSize
}

// freelistPage is the freelist page of data, the log file at path.
func freelistPage(t *testing.T, path string, data []byte) []byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	pageSize := db.Info().PageSize
	db.Close()
	var freelist uint64
	withMeta(data, func(m []byte) { freelist = binary.LittleEndian.Uint64(m[metaFreelist:]) })
	return data[freelist*uint64(pageSize):][:pageSize]
}

// A log with a page damaged takes no write: each writer fails with the
// damage, exit 1's error, and neither the file nor its journal changes by a
// byte, whether readers meet the damage (a leaf of the effects, which a
// listing reads), only verify does (a leaf of the history of the first
// effects) or none does (a page in use listed free), however little of the
// file the write would touch (issue 28, item 5).
func TestDamagedLogTakesNoWrites(t *testing.T) {
	seed := seedForDamage(t)
	zero := func(what string, bucket []byte) func(data []byte) {
		leaves, _, pageSize := bucketPages(t, seed.path, bucket)
		if len(leaves) < 3 {
			t.Fatalf("%s: %d leaves", what, len(leaves))
		}
		return func(data []byte) { clear(data[leaves[0]*uint64(pageSize):][:pageSize]) }
	}
	damages := map[string]func(data []byte){
		"a leaf of the effects":          zero("effects", bEffects),
		"a leaf of the history":          zero("history", bHistory),
		"a leaf of the signatures index": zero("signatures", bSignatures),
		"the freelist page":              func(data []byte) { clear(freelistPage(t, seed.path, data)) },
		// A writer would give the page to new records over the ones it holds.
		"a page in use listed free": func(data []byte) {
			leaves, _, _ := bucketPages(t, seed.path, bEffects)
			p := freelistPage(t, seed.path, data)
			if n := binary.LittleEndian.Uint16(p[10:]); n == 0 || n == 0xFFFF {
				t.Fatalf("%d free pages", n)
			}
			binary.LittleEndian.PutUint64(p[pageHeaderSize:], leaves[1])
		},
	}
	// Keys out of order: bbolt, which finds a key by halving, misses some,
	// and a write would log again a call the log holds (a new effect: the
	// call runs twice). Neither a reader nor verify notices.
	entryKey := func(p []byte, i int) []byte {
		at := pageHeaderSize + i*16
		e := p[at:]
		if binary.LittleEndian.Uint16(p[8:])&branchPageFlag != 0 { // position, key size, page id
			pos, ksize := int(binary.LittleEndian.Uint32(e)), int(binary.LittleEndian.Uint32(e[4:]))
			return p[at+pos:][:ksize]
		}
		pos, ksize := int(binary.LittleEndian.Uint32(e[4:])), int(binary.LittleEndian.Uint32(e[8:])) // flags, position, key and value sizes
		return p[at+pos:][:ksize]
	}
	swapKeys := func(p []byte, i, j int) {
		a, b := entryKey(p, i), entryKey(p, j)
		if len(a) != len(b) {
			t.Fatalf("keys of %d and %d bytes", len(a), len(b))
		}
		tmp := append([]byte(nil), a...)
		copy(a, b)
		copy(b, tmp)
	}
	page := func(data []byte, id uint64, pageSize int) []byte { return data[id*uint64(pageSize):][:pageSize] }
	damages["two keys of a leaf of the signatures index swapped"] = func(data []byte) {
		leaves, _, pageSize := bucketPages(t, seed.path, bSignatures)
		swapKeys(page(data, leaves[0], pageSize), 0, 1)
	}
	damages["two keys of a branch of the effects swapped"] = func(data []byte) {
		_, branches, pageSize := bucketPages(t, seed.path, bEffects)
		swapKeys(page(data, branches[0], pageSize), 1, 2)
	}
	damages["a leaf's last key past where its branch ends it"] = func(data []byte) {
		leaves, _, pageSize := bucketPages(t, seed.path, bEffects)
		p := page(data, leaves[0], pageSize)
		last := entryKey(p, int(binary.LittleEndian.Uint16(p[10:]))-1)
		copy(last, entryKey(page(data, leaves[1], pageSize), 0))
	}
	writers := map[string]func(s *testLog) error{
		"intercept in a new session": func(s *testLog) error {
			_, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "other", Tool: "w", Tier: sm.Compensable, CreateSession: true})
			return err
		},
		"intercept": func(s *testLog) error {
			_, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "new", Tool: "w", Tier: sm.Compensable, Args: json.RawMessage(`{"c":4}`)})
			return err
		},
		"start": func(s *testLog) error { _, err := s.Start(t.Context(), seed.pending, model.Change{}); return err },
		"commit": func(s *testLog) error {
			_, err := s.Commit(t.Context(), seed.executing, model.Change{Result: json.RawMessage(`2`)})
			return err
		},
		"fail": func(s *testLog) error { _, err := s.Fail(t.Context(), seed.executing, model.Change{}); return err },
		"session start": func(s *testLog) error {
			_, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: "x"})
			return err
		},
		"undo step": func(s *testLog) error {
			_, err := s.UndoStep(t.Context(), seed.committed, sm.EntryCompensating, model.Change{})
			return err
		},
		"session state": func(s *testLog) error {
			_, err := s.SetSessionState(t.Context(), "new", sm.SessionCompleted, model.Change{})
			return err
		},
		"gc": func(s *testLog) error {
			_, err := s.GC(t.Context(), time.Now().Add(time.Hour), []sm.SessionState{sm.SessionActive})
			return err
		},
		"compact": func(s *testLog) error { _, _, err := s.Compact(); return err },
	}
	for damage, apply := range damages {
		data := readFile(t, seed.path)
		apply(data)
		journal := readFile(t, seed.path+JournalSuffix)
		for writer, write := range writers {
			t.Run(damage+"/"+writer, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "undolog.db")
				os.WriteFile(path, data, 0o600)
				os.WriteFile(path+JournalSuffix, journal, 0o600)
				s := newTestLog(path, testOptions{LockTimeout: 2 * time.Second})
				before := fileState(t, s)
				t.Cleanup(func() { s.pause() })
				err := write(s)
				if !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "damaged") || strings.Contains(err.Error(), "\n") {
					t.Errorf("write: %v", err)
				}
				s.pause()()
				if fileState(t, s) != before {
					t.Error("a file changed: its bytes, size, mode or times")
				}
			})
		}
	}
	// Readers: a listing meets a damaged leaf of the effects, not one of the
	// history, which verify meets.
	for damage, readerSees := range map[string]bool{"a leaf of the effects": true, "a leaf of the history": false} {
		data := readFile(t, seed.path)
		damages[damage](data)
		path := filepath.Join(t.TempDir(), "undolog.db")
		os.WriteFile(path, data, 0o600)
		os.WriteFile(path+JournalSuffix, readFile(t, seed.path+JournalSuffix), 0o600)
		s := newTestLog(path, testOptions{})
		if _, _, err := s.ListEffects(t.Context(), effectlog.EffectFilter{}); errors.Is(err, model.ErrCorrupt) != readerSees {
			t.Errorf("%s: list: %v", damage, err)
		}
		if rep, err := s.Verify(t.Context()); err == nil && len(rep.Problems) == 0 {
			t.Errorf("%s: verify found nothing", damage)
		}
		s.pause()
	}
}

// The pages a writer walks are those of a sound log: one the library wrote
// through splits, merges, deletions and compaction takes writes.
func TestSoundLogTakesWrites(t *testing.T) {
	seed := seedForDamage(t)
	s := newTestLog(seed.path, testOptions{})
	t.Cleanup(func() { s.pause() })
	must[model.Effect](t)(s.Commit(t.Context(), seed.executing, model.Change{Result: json.RawMessage(`2`)}))
	must[effectlog.GCReport](t)(s.GC(t.Context(), time.Now().Add(time.Hour), []sm.SessionState{sm.SessionActive}))
	if _, _, err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "after"}))
	// Another process's first open walks the pages again.
	s.pause()()
	copied := crashCopy(t, s)
	must[model.Session](t)(copied.CreateSession(t.Context(), effectlog.NewSession{ID: "after2"}))
	verifyClean(t, copied)
}

// A process that walked the file walks it again when it changed since, even
// with its size and modification time as they were (damage written, and
// the time set back, as a copy that keeps times does): the change time,
// which no one sets, moved.
func TestDamageUnderTheSameTimesIsFound(t *testing.T) {
	if changeTime(must[os.FileInfo](t)(os.Stat(t.TempDir()))) == 0 {
		t.Skip("no change time on this system")
	}
	seed := seedForDamage(t)
	s := newTestLog(seed.path, testOptions{LockTimeout: 2 * time.Second})
	t.Cleanup(func() { s.pause() })
	must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "walked"}))
	s.pause()()
	leaves, _, pageSize := bucketPages(t, seed.path, bHistory)
	info := must[os.FileInfo](t)(os.Stat(seed.path))
	f := must[*os.File](t)(os.OpenFile(seed.path, os.O_WRONLY, 0))
	if _, err := f.WriteAt(make([]byte, pageSize), int64(leaves[0])*int64(pageSize)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(seed.path, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	before := fileState(t, s)
	_, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: "after"})
	if !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a write after the damage: %v", err)
	}
	s.pause()()
	if fileState(t, s) != before {
		t.Error("a file changed")
	}
}

// A writer process that finds the file in a state a writer walked, or wrote
// after a walk, walks it no more (the mark on the journal), so a writer of
// a log of many pages does not pay a walk of the whole file each time; a
// state changed since, even with the modification time set back, is walked
// again and its damage refuses the write.
func TestAWalkedStateIsWalkedOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the journal carries the mark on Linux")
	}
	seed := seedForDamage(t)
	s := newTestLog(seed.path, testOptions{LockTimeout: 2 * time.Second})
	t.Cleanup(func() { s.pause() })
	newProcess := func() {
		s.pause()()
		s.group.walked = walkedFile{} // what a process of its own knows
	}
	must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "first"}))
	walks := s.group.walks.Load()
	newProcess()
	must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "second"}))
	if err := s.checkpoint(); err != nil { // a state this process wrote
		t.Fatal(err)
	}
	newProcess()
	must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "third"}))
	if got := s.group.walks.Load(); got != walks {
		t.Errorf("%d walks more of states walked or written", got-walks)
	}

	newProcess()
	leaves, _, pageSize := bucketPages(t, seed.path, bHistory)
	info := must[os.FileInfo](t)(os.Stat(seed.path))
	f := must[*os.File](t)(os.OpenFile(seed.path, os.O_WRONLY, 0))
	if _, err := f.WriteAt(make([]byte, pageSize), int64(leaves[0])*int64(pageSize)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(seed.path, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: "after"}); !errors.Is(err, model.ErrCorrupt) {
		t.Errorf("a write after the damage: %v", err)
	}
}

// A write refused after the walk (a damaged journal) leaves no mark: the
// journal stays as it was, its change time too.
func TestARefusedWriteLeavesNoMark(t *testing.T) {
	seed := seedForDamage(t)
	s := newTestLog(seed.path, testOptions{LockTimeout: 2 * time.Second})
	t.Cleanup(func() { s.pause() })
	must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "second-record"}))
	s.pause()()
	s.group.walked = walkedFile{} // a process of its own, on a state no one marked
	if err := unix.Removexattr(s.journalPath(), walkedAttr); err != nil && runtime.GOOS == "linux" {
		t.Fatal(err)
	}
	f := must[*os.File](t)(os.OpenFile(s.journalPath(), os.O_WRONLY, 0))
	if _, err := f.WriteAt([]byte{0xff}, journalHeader+16); err != nil { // the first record's payload
		t.Fatal(err)
	}
	f.Close()
	before := fileState(t, s)
	if _, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: "after"}); !errors.Is(err, model.ErrCorrupt) {
		t.Fatalf("a write over a damaged journal: %v", err)
	}
	s.pause()()
	if after := fileState(t, s); after != before {
		t.Errorf("a file changed:\n%.300s\n%.300s", before, after)
	}
}
