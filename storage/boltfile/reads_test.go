package boltfile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// withJournal makes a log whose journal holds writes bbolt does not: puts,
// deletes (a state index entry moved, an approval request closed) and
// sequences, over a bbolt that holds others. The committer has let it go.
func withJournal(t *testing.T) *testLog {
	t.Helper()
	s, _ := newStore(t)
	ctx := t.Context()
	intercept(t, s, "s1", "write", sm.Compensable, `1`)
	must[model.Effect](t)(s.Start(ctx, 1, model.Change{}))
	if err := s.checkpoint(); err != nil { // bbolt holds these
		t.Fatal(err)
	}
	must[model.Effect](t)(s.Commit(ctx, 1, model.Change{Result: json.RawMessage(`{"ok":1}`)}))
	pay := intercept(t, s, "s1", "pay", sm.Irreversible, `2`).Effect.ID
	must[model.Effect](t)(s.Approve(ctx, pay, model.Change{Actor: "approver"}))
	intercept(t, s, "s2", "pay", sm.Irreversible, `3`) // a request left open
	id := intercept(t, s, "s2", "write", sm.Compensable, `4`).Effect.ID
	must[model.Effect](t)(s.Start(ctx, id, model.Change{}))
	must[model.Effect](t)(s.Fail(ctx, id, model.Change{Error: "boom"}))
	s.pause()()
	if j := journalRecords(t, s); j.records < 5 {
		t.Fatalf("%d records in the journal", j.records)
	}
	if n := effectsInBolt(t, s.Path()); n != 1 {
		t.Fatalf("bbolt holds %d effects, want 1: the rest in the journal", n)
	}
	return s
}

// reads is what the log reads as, through the rules: every kind of read,
// as JSON.
func reads(t *testing.T, s effectlog.Log) string {
	t.Helper()
	ctx := t.Context()
	var out bytes.Buffer
	add := func(what string, v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		b, _ := json.Marshal(v)
		fmt.Fprintf(&out, "%s: %s\n", what, b)
	}
	err := s.Export(ctx, "", func(r effectlog.ExportRecord) error { add("export", r, nil); return nil })
	add("export done", nil, err)
	for _, f := range []effectlog.EffectFilter{{}, {Ascending: true}, {State: sm.Committed}, {State: sm.Pending}, {Tool: "pay"}, {Session: "s2"}, {Limit: 2}, {Cursor: 3}} {
		list, next, err := s.ListEffects(ctx, f)
		add(fmt.Sprintf("list %+v", f), []any{list, next}, err)
	}
	for id := uint64(1); id <= 5; id++ {
		e, err := s.GetEffect(ctx, id)
		if err != nil {
			add(fmt.Sprintf("show %d", id), err.Error(), nil)
			continue
		}
		add(fmt.Sprintf("show %d", id), e, nil)
	}
	sessions, next, err := s.ListSessions(ctx, effectlog.SessionFilter{})
	add("sessions", []any{sessions, next}, err)
	approvals, waiting, err := s.PendingApprovals(ctx, "", 0)
	add("approvals", []any{approvals, waiting}, err)
	changes, last, err := s.Changes(ctx, 0, 0)
	add("changes", []any{changes, last}, err)
	rep, err := s.Verify(ctx)
	add("verify", rep, err)
	return out.String()
}

// fileState is what a read must leave as it was: the bytes, size, mode,
// modification and change times of the log and its journal.
func fileState(t *testing.T, s *testLog) string {
	t.Helper()
	var out bytes.Buffer
	for _, p := range []string{s.Path(), s.journalPath()} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		data := readFile(t, p)
		fmt.Fprintf(&out, "%s: %d bytes %x, mode %v, mtime %v, ctime %v\n", p, info.Size(), data, info.Mode(), info.ModTime().UnixNano(), changeTime(info))
	}
	return out.String()
}

// A read of a log it may not write (a read-only file system; the hook
// refuses every open for writing), with writes still in its journal, reads
// what a writer would hold after replaying them, and leaves both files as
// they were: bytes, sizes, modes, modification and change times. Nothing
// is committed, appended or opened for writing.
func TestReadOnlyLogReadsTheJournal(t *testing.T) {
	s := withJournal(t)
	// What a writer holds: a copy of both files, its journal checkpointed
	// into bbolt (so read without it).
	folded := crashCopy(t, s)
	if err := folded.checkpoint(); err != nil {
		t.Fatal(err)
	}
	folded.pause()()
	if j := journalRecords(t, folded); j.records != 0 {
		t.Fatalf("%d records left after the checkpoint", j.records)
	}
	want := reads(t, folded)
	if !bytes.Contains([]byte(want), []byte(`"boom"`)) {
		t.Fatalf("the journal's last write is not in the reference:\n%s", want)
	}

	before := fileState(t, s)
	durable := s.group.durableWrites()
	var writeOpens atomic.Int32
	openLogFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			writeOpens.Add(1)
			return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EROFS}
		}
		return os.OpenFile(name, flag, perm)
	}
	defer func() { openLogFile = os.OpenFile }()
	got := reads(t, s)
	if got != want {
		t.Fatalf("reads with the journal laid over bbolt:\n%s\nwant, with it replayed:\n%s", got, want)
	}
	if n := writeOpens.Load(); n != 0 {
		t.Fatalf("reads opened the log for writing %d times", n)
	}
	if after := fileState(t, s); after != before {
		t.Fatalf("reads changed a file:\n%s\nwas\n%s", after, before)
	}
	if s.group.durableWrites() != durable {
		t.Fatal("a read committed or appended")
	}
	// A write still fails, with one clear error, and changes nothing.
	_, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s1", Tool: "w", Tier: sm.Compensable, Args: []byte(`9`)})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("read-only file system")) {
		t.Fatalf("write to a read-only log: %v", err)
	}
	if after := fileState(t, s); after != before {
		t.Fatalf("a refused write changed a file:\n%s\nwas\n%s", after, before)
	}
}

// A read with writes in the journal takes no exclusive lock: it gets in
// while another process holds the log's shared lock, and while it reads,
// the shared lock stays free for others (flock: a writer's exclusive lock
// would refuse it). It sees the journal's writes meanwhile.
func TestReadTakesNoExclusiveLock(t *testing.T) {
	s := withJournal(t)
	reader := newTestLog(s.Path(), testOptions{LockTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { reader.pause() })
	lock := func(how int) (release func(), err error) {
		f, err := os.Open(s.Path())
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
			f.Close()
			return nil, err
		}
		return func() { f.Close() }, nil
	}
	// Another reader holds the shared lock throughout.
	release, err := lock(syscall.LOCK_SH)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	err = reader.Engine.View(context.Background(), func(tx storage.ReadTx) error {
		e, err := tx.Effect(4)
		if err != nil || e.State != sm.Pending || e.Error != "boom" {
			return fmt.Errorf("the journal's write: %+v %v", e, err)
		}
		// A third open file takes the shared lock beside this read's.
		again, err := lock(syscall.LOCK_SH)
		if err != nil {
			return fmt.Errorf("the shared lock during a read: %v (the read holds it exclusively)", err)
		}
		again()
		// And this read holds it: a writer's exclusive lock is refused.
		if excl, err := lock(syscall.LOCK_EX); err == nil {
			excl()
			return fmt.Errorf("the exclusive lock is free during a read")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Many reads at once, of several Engines of the log, each with the
// journal laid over bbolt, agree and write nothing (run with -race).
func TestConcurrentReadsOfTheJournal(t *testing.T) {
	s := withJournal(t)
	before := fileState(t, s)
	errs := make(chan error, 8)
	for g := 0; g < cap(errs); g++ {
		go func() {
			l := newTestLog(s.Path(), testOptions{LockTimeout: 5 * time.Second})
			var err error
			for i := 0; i < 10 && err == nil; i++ {
				var list []model.Effect
				if list, _, err = l.ListEffects(context.Background(), effectlog.EffectFilter{State: sm.Pending}); err == nil && (len(list) != 2 || list[0].ID != 4 || list[0].Error != "boom") {
					err = fmt.Errorf("pending effects: %+v", list)
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
	if after := fileState(t, s); after != before {
		t.Fatalf("reads changed a file:\n%s\nwas\n%s", after, before)
	}
}

// Reads while neither bbolt nor the journal changes share one overlay (an
// export's pages, the view's refreshes); a write, a checkpoint or a
// compaction in between is read.
func TestOverlayIsReusedWhileNothingChanges(t *testing.T) {
	s := withJournal(t)
	cached := func() *overlay {
		s.group.overlays.mu.Lock()
		defer s.group.overlays.mu.Unlock()
		return s.group.overlays.ov
	}
	show := func(id uint64) model.EffectDetail {
		t.Helper()
		s.pause()()
		return must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	}
	show(4)
	first := cached()
	if first == nil {
		t.Fatal("no overlay kept")
	}
	if show(2); cached() != first {
		t.Fatal("a read of the same log and journal made another overlay")
	}
	id := intercept(t, s, "s3", "write", sm.Compensable, `5`).Effect.ID
	if e := show(id); e.Effect.Session != "s3" || cached() == first {
		t.Fatalf("after a write: %+v, overlay reused: %v", e.Effect, cached() == first)
	}
	// A checkpoint moves bbolt on: the journal's records are leftovers.
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	second := cached()
	if e := show(id); e.Effect.Session != "s3" || cached() != second {
		t.Fatalf("after a checkpoint: %+v", e.Effect)
	}
	// Journal records again, on the compacted log (a new file, a new id).
	intercept(t, s, "s3", "write", sm.Compensable, `6`)
	show(id + 1)
	third := cached()
	if _, _, err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	next := intercept(t, s, "s3", "write", sm.Compensable, `7`).Effect.ID
	if e := show(next); string(e.Effect.Args) != `7` || cached() == third {
		t.Fatalf("after a compaction: %+v", e.Effect)
	}
	verifyClean(t, s)
}
