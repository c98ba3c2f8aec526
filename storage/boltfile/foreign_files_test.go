package boltfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		os.Chmod(dir, 0o1777)
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
