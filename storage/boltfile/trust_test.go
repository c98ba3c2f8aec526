package boltfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// A process that opened the log while a compaction held it locks the old
// file once the compacted one is renamed into place: it must write to the
// new one, or its acknowledged write is lost (issue 12, item 1).
func TestWriteWaitingForCompactionIsKept(t *testing.T) {
	s, _ := newStore(t)
	for i := 0; i < 20; i++ {
		intercept(t, s, "old", "w", sm.Compensable, strconv.Itoa(i))
	}
	var out bytes.Buffer
	var writer interface{ Wait() error }
	compactBeforeRename = func() {
		cmd := writerCmd(t, "count:1", s.Path(), "during")
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Error(err)
			return
		}
		writer = cmd
		// It waits for the lock, on the file about to be renamed away.
		w := watchWaiters(s.journalPath(), 0o600)
		defer w.close()
		for deadline := time.Now().Add(10 * time.Second); !w.others() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // into bbolt's flock wait
	}
	defer func() { compactBeforeRename = nil }()
	if _, _, err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	compactBeforeRename = nil
	if writer == nil {
		t.Fatal("no writer ran")
	}
	if err := writer.Wait(); err != nil {
		t.Fatalf("writer: %v", err)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(out.String()), 10, 64)
	if err != nil {
		t.Fatalf("writer printed %q", out.String())
	}
	d, err := s.GetEffect(t.Context(), id)
	if err != nil || d.Effect.Session != "during" || d.Effect.State != sm.Committed {
		t.Fatalf("the write acknowledged during compaction: %+v %v", d.Effect, err)
	}
	verifyClean(t, s)
}

// A journal removed, cut short or replaced while a writer holds the log loses
// nothing it acknowledged: the writer sees it and commits its transaction,
// which holds every write the journal held, to bbolt (item 2).
func TestJournalLostUnderItsWriter(t *testing.T) {
	for name, lose := range map[string]func(path string) error{
		"removed":   os.Remove,
		"truncated": func(path string) error { return os.Truncate(path, 0) },
		"cut short": func(path string) error { return os.Truncate(path, 30) },
		"replaced": func(path string) error {
			if err := os.Remove(path); err != nil {
				return err
			}
			return os.WriteFile(path, nil, 0o600)
		},
	} {
		for _, writeAfter := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, write after %v", name, writeAfter), func(t *testing.T) {
				s, _ := newStore(t)
				intercept(t, s, "s", "w", sm.Compensable, `1`)
				intercept(t, s, "s", "w", sm.Compensable, `2`)
				if j := journalRecords(t, s); j.records == 0 {
					t.Fatal("nothing in the journal")
				}
				// Inside the committer, holding the log with the journal's
				// writes in its transaction.
				err := s.update(func(tx *writeTx) error {
					if err := lose(s.journalPath()); err != nil {
						return err
					}
					if !writeAfter {
						return nil
					}
					// A session with no history yet: what the engine is
					// given, written as any other.
					w := txWriter{txReader{plainTx(tx.Tx)}, tx}
					seq, err := w.NextSessionSeq()
					if err != nil {
						return err
					}
					now := time.Now().UTC()
					return w.InsertSession(&model.Session{ID: "after", State: sm.SessionActive, Seq: seq, CreatedAt: now, UpdatedAt: now,
						Counts: map[sm.State]int{}, Meta: map[string]string{}})
				})
				if err != nil {
					t.Fatal(err)
				}
				s.pause()() // the log is let go, as at a process's end
				crashed := crashCopyOrEmpty(t, s)
				for _, id := range []uint64{1, 2} {
					if _, err := crashed.GetEffect(t.Context(), id); err != nil {
						t.Fatalf("acknowledged effect %d: %v", id, err)
					}
				}
				if _, err := crashed.GetSession(t.Context(), "after"); writeAfter && err != nil {
					t.Fatalf("the write after: %v", err)
				}
				verifyClean(t, crashed)
				// And the log goes on.
				intercept(t, s, "s", "w", sm.Compensable, `3`)
				verifyClean(t, crashCopyOrEmpty(t, s))
			})
		}
	}
}

// crashCopyOrEmpty is crashCopy for a log whose journal may be missing.
func crashCopyOrEmpty(t *testing.T, s *testLog) *testLog {
	t.Helper()
	if _, err := os.Stat(s.journalPath()); errors.Is(err, os.ErrNotExist) {
		os.WriteFile(s.journalPath(), nil, 0o600)
	}
	return crashCopy(t, s)
}

// One flipped bit in the header of a record that other records follow is
// damage, not a torn tail: the log is refused, untouched. In the last record
// it is a torn tail (item 3).
func TestJournalDamagedHeaderIsRefused(t *testing.T) {
	for rec := 0; rec < 3; rec++ {
		for _, bit := range []uint{0, 3, 9, 30, 40, 64, 100, 135, 190} { // length, checksum, txid, log id
			t.Run(fmt.Sprintf("record %d bit %d", rec, bit), func(t *testing.T) {
				s, _ := newStore(t)
				for i := 0; i < 3; i++ {
					intercept(t, s, "s", "w", sm.Compensable, strconv.Itoa(i))
				}
				s.pause()()
				data := readFile(t, s.journalPath())
				at := 0
				for i := 0; i < rec; i++ {
					at += journalHeader + int(binary.LittleEndian.Uint32(data[at:]))
				}
				data[at+int(bit/8)] ^= 1 << (bit % 8)
				os.WriteFile(s.journalPath(), data, 0o600)
				logBefore := readFile(t, s.Path())
				_, err := s.GetEffect(t.Context(), 1)
				if rec == 2 {
					// Like a torn append: the last record is dropped, the rest read.
					if err != nil {
						t.Fatalf("damaged last record: %v", err)
					}
					if _, err := s.GetEffect(t.Context(), 3); !errors.Is(err, model.ErrNotFound) {
						t.Fatalf("effect 3 of the damaged last record: %v", err)
					}
					return
				}
				if !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "damaged record") {
					t.Fatalf("read: %v", err)
				}
				if _, err := s.Start(t.Context(), 1, model.Change{}); !errors.Is(err, model.ErrCorrupt) {
					t.Fatalf("write: %v", err)
				}
				if !bytes.Equal(readFile(t, s.journalPath()), data) || !bytes.Equal(readFile(t, s.Path()), logBefore) {
					t.Fatal("a file changed")
				}
			})
		}
	}
}

// A copy of the log made before a compaction (right after one, when the file
// alone is the log), restored beside the journal of the compacted log once
// its transaction ids have come round to the copy's, is read as the copy:
// compaction gives the log a new id (item 4).
func TestBackupRestoredBesideACompactedLogsJournal(t *testing.T) {
	s, _ := newStore(t)
	for i := 0; i < 3; i++ {
		intercept(t, s, "before", "w", sm.Compensable, strconv.Itoa(i))
		if err := s.checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	backup := readFile(t, s.Path())
	backupBase := must[journalBase](t)(committedBaseOf(s.Path()))
	if _, _, err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	// Write on, checkpointing, until the compacted log stands at the copy's
	// transaction id, then leave writes in the journal there.
	for i := 0; ; i++ {
		base := committedBase(t, s)
		if base.txid == backupBase.txid {
			break
		} else if base.txid > backupBase.txid {
			t.Fatalf("the compacted log is at transaction %d, past the copy's %d", base.txid, backupBase.txid)
		}
		if _, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: fmt.Sprintf("pad-%d", i)}); err != nil {
			t.Fatal(err)
		}
		if err := s.checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		intercept(t, s, "after", "w", sm.Compensable, strconv.Itoa(i))
	}
	s.pause()()
	if j := journalRecords(t, s); j.records == 0 {
		t.Fatal("nothing in the journal")
	}
	if err := os.WriteFile(s.Path(), backup, 0o600); err != nil {
		t.Fatal(err)
	}
	rep := verifyClean(t, s)
	if rep.Effects != 3 {
		t.Fatalf("the restored copy reads %d effects, want its 3", rep.Effects)
	}
	if _, err := s.GetSession(t.Context(), "after"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the compacted log's session in the copy: %v", err)
	}
}

// A compaction killed with its copy made leaves the copy, which the next one
// removes; compaction keeps the log's mode (item 15).
func TestCompactionCopiesGoAndModeStays(t *testing.T) {
	s, _ := newStore(t)
	for i := 0; i < 50; i++ {
		intercept(t, s, "s", "w", sm.Compensable, strconv.Itoa(i))
	}
	s.pause()()
	cmd := writerCmd(t, "compact-and-hang", s.Path(), "")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "copied\n" {
		t.Fatalf("compaction said %q", line)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	copies := func() []string {
		entries, _ := os.ReadDir(filepath.Dir(s.Path()))
		var out []string
		for _, e := range entries {
			if strings.Contains(e.Name(), "compact") {
				out = append(out, e.Name())
			}
		}
		return out
	}
	if len(copies()) != 1 {
		t.Fatalf("copies after a killed compaction: %v", copies())
	}
	if err := os.Chmod(s.Path(), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	if left := copies(); len(left) != 0 {
		t.Fatalf("copies left: %v", left)
	}
	if info, _ := os.Stat(s.Path()); info.Mode().Perm() != 0o640 {
		t.Fatalf("mode after compaction: %v", info.Mode().Perm())
	}
	verifyClean(t, s)
}

// A read never writes: with writes in the journal, reading leaves both files
// as they were, even where nothing can be written (item 16). (The CLI's
// faults.txtar reads on a full disk; TestPermissionDeniedAndReadOnlyLog as a
// user who may not write the log.)
func TestReadsWithTheJournalWriteNothing(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "s", "w", sm.Compensable, `1`)
	s.pause()()
	intercept(t, s, "s", "w", sm.Compensable, `2`)
	s.pause()()
	logBefore, journalBefore := readFile(t, s.Path()), readFile(t, s.journalPath())
	commits := s.group.commits.Load()
	for _, read := range []func() error{
		func() error { _, err := s.GetEffect(t.Context(), 2); return err },
		func() error { _, _, err := s.ListEffects(t.Context(), effectlog.EffectFilter{}); return err },
		func() error { _, err := s.Verify(t.Context()); return err },
	} {
		if err := read(); err != nil {
			t.Fatal(err)
		}
		s.pause()()
	}
	if s.group.commits.Load() != commits {
		t.Fatal("a read committed")
	}
	if !bytes.Equal(readFile(t, s.Path()), logBefore) || !bytes.Equal(readFile(t, s.journalPath()), journalBefore) {
		t.Fatal("a read changed a file")
	}
}

// A record whose sync failed is taken back, so that a write reported failed
// never appears; if it cannot be taken back the write is in doubt, and says
// so (item 17).
func TestFailedJournalSyncIsTakenBack(t *testing.T) {
	syncErr := errors.New("injected: I/O error")
	for name, c := range map[string]struct {
		syncFails     int // the number of syncs that fail
		truncateFails bool
		inDoubt       bool
	}{
		"truncated":           {syncFails: 1},
		"truncate fails":      {syncFails: 1, truncateFails: true},
		"nothing can be done": {syncFails: 99, truncateFails: true, inDoubt: true},
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := newStore(t)
			intercept(t, s, "s", "w", sm.Compensable, `1`)
			fails := c.syncFails
			syncJournal = func(f *os.File) error {
				if fails > 0 {
					fails--
					return syncErr
				}
				return fdatasync(f)
			}
			if c.truncateFails {
				truncateJournal = func(*os.File, int64) error { return syscall.EIO }
			}
			defer func() { syncJournal, truncateJournal = fdatasync, (*os.File).Truncate }()
			_, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable, Args: []byte(`2`)})
			if err == nil || errors.Is(err, model.ErrInDoubt) != c.inDoubt || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("intercept: %v", err)
			}
			syncJournal, truncateJournal = fdatasync, (*os.File).Truncate
			s.pause()()
			crashed := crashCopy(t, s)
			_, err = crashed.GetEffect(t.Context(), 2)
			if !c.inDoubt && !errors.Is(err, model.ErrNotFound) {
				t.Fatalf("the failed write is in the log: %v", err)
			}
			verifyClean(t, crashed)
			if got := intercept(t, s, "s", "w", sm.Compensable, `3`).Effect.ID; !c.inDoubt && got != 2 {
				t.Fatalf("next effect %d", got)
			}
		})
	}
}

// An export to a consumer that stops reading holds no lock meanwhile: a
// write made while the consumer waits gets through at once.
func TestSlowExportConsumerBlocksNoWriter(t *testing.T) {
	const effects = 515
	s, _ := newStore(t)
	for i := 0; i < effects; i++ {
		intercept(t, s, fmt.Sprintf("s%d", i%3), "w", sm.Compensable, strconv.Itoa(i))
	}
	s.pause()()
	writer := newTestLog(s.Path(), testOptions{LockTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { writer.pause() })
	records, writes := 0, 0
	err := s.Export(t.Context(), "", func(r effectlog.ExportRecord) error {
		records++
		if records%200 == 1 { // the consumer is slow: someone else writes meanwhile
			if _, err := writer.CreateSession(t.Context(), effectlog.NewSession{ID: fmt.Sprintf("meanwhile-%d", records)}); err != nil {
				return err
			}
			writer.pause()()
			writes++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after %d records and %d writes: %v", records, writes, err)
	}
	if exported := 0; true {
		err := s.Export(t.Context(), "", func(r effectlog.ExportRecord) error {
			if r.Type == "effect" {
				exported++
			}
			return nil
		})
		if err != nil || exported != effects {
			t.Fatalf("%d effects exported: %v", exported, err)
		}
	}
	verifyClean(t, s)
}

// A reader that may not open the log for writing reads the journal's
// writes, many at the same moment: none of them opens the log for writing
// or starts this process's committer.
func TestReadsWithoutWriteAccessReadTheJournal(t *testing.T) {
	s, _ := newStore(t)
	for i := 0; i < 5; i++ {
		intercept(t, s, "s", "w", sm.Compensable, strconv.Itoa(i))
	}
	s.pause()()
	if j := journalRecords(t, s); j.records == 0 {
		t.Fatal("nothing in the journal")
	}
	var writeOpens atomic.Int32
	openLogFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			writeOpens.Add(1)
			return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EROFS}
		}
		return os.OpenFile(name, flag, perm)
	}
	defer func() { openLogFile = os.OpenFile }()
	errs := make(chan error, 40)
	for g := 0; g < cap(errs); g++ {
		go func() {
			var err error
			for i := 0; i < 5 && err == nil; i++ {
				var effects []model.Effect
				if effects, _, err = s.ListEffects(t.Context(), effectlog.EffectFilter{}); err == nil && len(effects) != 5 {
					err = fmt.Errorf("%d effects read, want 5", len(effects))
				}
			}
			errs <- err
		}()
	}
	for g := 0; g < cap(errs); g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := writeOpens.Load(); n != 0 {
		t.Fatalf("reads opened the log for writing %d times", n)
	}
}

// A session written to while its export is written out is exported as its
// one read transaction saw it: the export completes, and what it holds
// agrees with itself (its counts with its effects) and imports.
func TestExportOfASessionWrittenMeanwhileIsAsRead(t *testing.T) {
	const effects = 300
	s, _ := newStore(t)
	for i := 0; i < effects; i++ {
		intercept(t, s, "big", "w", sm.Compensable, strconv.Itoa(i))
	}
	var recs []effectlog.ExportRecord
	err := s.Export(t.Context(), "", func(r effectlog.ExportRecord) error {
		if recs = append(recs, r); len(recs) == 3 { // the session is read, its transaction over
			intercept(t, s, "big", "w", sm.Compensable, `"meanwhile"`)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("export of a session written meanwhile: %v", err)
	}
	end, _ := recs[len(recs)-1].Record.(*effectlog.ExportEnd)
	if end == nil || end.Sessions != 1 || end.Effects != effects {
		t.Fatalf("export of a session written meanwhile ends with %+v, want the %d effects it had when read", end, effects)
	}
	into, _ := newStore(t)
	next := 0
	if _, err := into.Import(t.Context(), func() (effectlog.ExportRecord, bool, error) {
		if next == len(recs) {
			return effectlog.ExportRecord{}, false, nil
		}
		next++
		return pointedRecord(recs[next-1]), true, nil
	}); err != nil {
		t.Fatalf("import of it: %v", err)
	}
	verifyClean(t, into)
}

// pointedRecord gives an exported record as import takes it, by pointer
// (as undolog import reads them).
func pointedRecord(r effectlog.ExportRecord) effectlog.ExportRecord {
	switch v := r.Record.(type) {
	case model.Session:
		r.Record = &v
	case model.HistoryRecord:
		r.Record = &v
	case model.Effect:
		r.Record = &v
	}
	return r
}
