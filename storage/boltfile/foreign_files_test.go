package boltfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/effectlog"
	sm "github.com/undolog/undolog/statemachine"
)

// nobody is the user the files of another user belong to here.
const nobody = 65534

// A log or a journal that another user owns (one who made it first in a
// shared directory, to read every call written there, or to change them) is
// refused to every writer: one clear line naming the file, a permission
// error (exit 1), the files as they were and no log made. Reading another
// user's log works as before (issue 28, item 7).
func TestFilesOfAnotherUserAreRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another user")
	}
	shared := func(t *testing.T) string {
		dir := t.TempDir()
		os.Chmod(dir, 0o777|os.ModeSticky)
		return filepath.Join(dir, "undolog.db")
	}
	tools := 0
	write := func(s *testLog) error { // a new call each time
		tools++
		_, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: fmt.Sprint("w", tools), Tier: sm.Compensable, CreateSession: true})
		return err
	}
	refused := func(t *testing.T, s *testLog, err error, file string) {
		t.Helper()
		if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), file+" belongs to user 65534") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("write: %v", err)
		}
	}
	// withLog is a log of this user's with a write in its journal.
	withLog := func(t *testing.T) *testLog {
		s := newTestLog(shared(t), testOptions{})
		t.Cleanup(func() { s.pause() })
		if err := write(s); err != nil {
			t.Fatal(err)
		}
		if err := write(s); err != nil {
			t.Fatal(err)
		}
		s.pause()()
		return s
	}

	t.Run("journal made before the log", func(t *testing.T) {
		path := shared(t)
		if err := os.WriteFile(path+JournalSuffix, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		os.Chown(path+JournalSuffix, nobody, nobody)
		s := newTestLog(path, testOptions{})
		t.Cleanup(func() { s.pause() })
		refused(t, s, write(s), path+JournalSuffix)
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a log was made: %v", err)
		}
		if info, err := os.Stat(path + JournalSuffix); err != nil || info.Size() != 0 {
			t.Fatalf("the journal: %v %v", info, err)
		}
	})
	t.Run("journal made after the log", func(t *testing.T) {
		s := withLog(t)
		os.Remove(s.journalPath()) // e.g. by a cleaner of the shared directory
		if err := os.WriteFile(s.journalPath(), nil, 0o666); err != nil {
			t.Fatal(err)
		}
		os.Chown(s.journalPath(), nobody, nobody)
		before := fileState(t, s)
		refused(t, s, write(s), s.journalPath())
		s.pause()()
		if fileState(t, s) != before {
			t.Fatal("a file changed")
		}
	})
	for _, file := range []string{"log", "journal"} {
		t.Run(file+" given to another user", func(t *testing.T) {
			s := withLog(t)
			path := s.Path()
			if file == "journal" {
				path = s.journalPath()
			}
			os.Chown(path, nobody, nobody)
			os.Chmod(path, 0o666)
			before := fileState(t, s)
			refused(t, s, write(s), path)
			_, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: "x"})
			refused(t, s, err, path)
			_, _, err = s.Compact()
			refused(t, s, err, path)
			s.pause()()
			if fileState(t, s) != before {
				t.Fatal("a file changed")
			}
		})
	}
	t.Run("another user's log is read", func(t *testing.T) {
		s := withLog(t)
		for _, p := range []string{s.Path(), s.journalPath()} {
			os.Chown(p, nobody, nobody)
		}
		// A journal whose mode is not the log's is its owner's to change.
		os.Chmod(s.Path(), 0o644)
		os.Chmod(s.journalPath(), 0o640)
		before := fileState(t, s)
		effects, _, err := s.ListEffects(t.Context(), effectlog.EffectFilter{})
		if err != nil || len(effects) != 2 {
			t.Fatalf("read: %d effects, %v", len(effects), err)
		}
		if _, err := s.Verify(t.Context()); err != nil {
			t.Fatal(err)
		}
		s.pause()()
		if fileState(t, s) != before {
			t.Fatal("a read changed a file")
		}
	})
}

// A compaction's copy that another user made first at its path (a
// directory others may write, where this user cannot remove it) is not
// written: the log's records would go into a file of theirs, which would
// then take the log's place (issue 28, item 7).
func TestCompactionRefusesACopyOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	// The writer, nobody, runs this test binary from a directory it may enter.
	binDir, err := os.MkdirTemp("", "undolog-bin-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(binDir)
	os.Chmod(binDir, 0o755)
	bin := filepath.Join(binDir, "boltfile.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "undolog-shared-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777|os.ModeSticky)
	path := filepath.Join(dir, "undolog.db")

	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "UNDOLOG_TEST_WRITER=compact-when-told", "UNDOLOG_TEST_LOG="+path, "UNDOLOG_TEST_SESSION=s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	lines.Scan()
	pid, err := strconv.Atoi(lines.Text())
	if err != nil {
		cmd.Wait()
		t.Fatalf("the writer: %q", lines.Text())
	}
	// Root, here the other user, makes the copy first, open to all.
	copyPath := newTestLog(path, testOptions{}).compactCopy(pid)
	if err := os.WriteFile(copyPath, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(copyPath, 0o666)
	fmt.Fprintln(stdin, "go")
	lines.Scan()
	answer := lines.Text()
	cmd.Wait()
	if answer == "compacted" || !strings.Contains(answer, copyPath) {
		t.Errorf("compaction: %q", answer)
	}
	if data, _ := os.ReadFile(copyPath); len(data) != 0 {
		t.Error("the other user's copy was written")
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if uid, _ := fileOwner(info); uid != nobody {
		t.Errorf("the log is another user's file now, %d's", uid)
	}
	if data, _ := os.ReadFile(path); !bytes.Contains(data, []byte("compacted-secret")) && !bytes.Contains(readFile(t, path+JournalSuffix), []byte("compacted-secret")) {
		t.Error("the log lost its record")
	}
}

// A link or a named pipe put at the journal's path after the open checked
// it (another user, in a directory others may write) is not written
// through: the journal is opened without following a link, and what it
// opened must be a regular file. Nor is the log's mode given through the
// link to what it names (issue 28, item 7).
func TestJournalOpensNoLinkNorPipe(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(dir, "undolog.db"+JournalSuffix)
	if err := os.Symlink(victim, journal); err != nil {
		t.Fatal(err)
	}
	if f, err := openJournal(journal, os.O_RDWR|os.O_CREATE, 0o600); err == nil || !strings.Contains(err.Error(), "a symbolic link, not a regular file") {
		if f != nil {
			f.Close()
		}
		t.Errorf("a journal path linked to a file of this user's opened: %v", err)
	}
	pipe := filepath.Join(dir, "pipe.db"+JournalSuffix)
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err := openJournal(pipe, os.O_RDWR|os.O_CREATE, 0o600); err == nil || !strings.Contains(err.Error(), "a named pipe, not a regular file") {
		if f != nil {
			f.Close()
		}
		t.Errorf("a named pipe at the journal's path opened: %v", err)
	}

	// A reader gives the journal the log's mode; not through a link.
	s, _ := newStore(t)
	intercept(t, s, "s", "w", sm.Compensable, `{}`)
	s.pause()()
	if err := os.Chmod(s.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(s.journalPath())
	if err := os.Symlink(victim, s.journalPath()); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(s.Path(), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	pendingJournal(s.Path(), tx)
	if info, err := os.Stat(victim); err != nil || info.Mode().Perm() != 0o600 || string(readFile(t, victim)) != "keep\n" {
		t.Errorf("the file the journal's path links to changed: %v %v", info.Mode(), err)
	}
}

// A named pipe put at the journal's path after the open checked it does not
// hold a process for ever where it opens the journal only to lock it.
func TestWaitingOpensNoPipe(t *testing.T) {
	if !canSeeWaiters {
		t.Skip("no waiters' lock here")
	}
	pipe := filepath.Join(t.TempDir(), "undolog.db"+JournalSuffix)
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		announceWaiting(pipe)()
		watchWaiters(pipe, 0o600).close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("opening the journal to lock it waits on the named pipe")
	}
}
