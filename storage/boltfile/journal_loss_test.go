package boltfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// copyLog copies the files of the log at path that have the given suffixes
// ("" the log file) into a new directory, as `cp` would; it returns the
// copy's path.
func copyLog(t *testing.T, path string, suffixes ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, suffix := range suffixes {
		if err := os.WriteFile(filepath.Join(dir, "undolog.db"+suffix), readFile(t, path+suffix), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "undolog.db")
}

// openLog is the log at path as another process opens it.
func openLog(t *testing.T, path string) *testLog {
	t.Helper()
	s := newTestLog(path, testOptions{})
	t.Cleanup(func() { s.pause() })
	return s
}

// refusedForItsJournal checks that every read and write of s, and verify,
// is refused for its journal (named), and that neither file changed.
func refusedForItsJournal(t *testing.T, s *testLog) {
	t.Helper()
	journal := s.journalPath()
	logBefore := readFile(t, s.Path())
	journalBefore, journalErr := os.ReadFile(journal)
	_, readErr := s.GetEffect(t.Context(), 1)
	_, _, listErr := s.ListSessions(t.Context(), effectlog.SessionFilter{})
	_, verifyErr := s.Verify(t.Context())
	_, writeErr := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "write", Tier: sm.Compensable,
		Args: json.RawMessage(`"refused"`), CreateSession: true, Actor: "tester"})
	for what, err := range map[string]error{"a read": readErr, "a list": listErr, "verify": verifyErr, "a write": writeErr} {
		if !errors.Is(err, model.ErrCorrupt) || !errors.As(err, new(journalNotTheLogs)) ||
			!strings.Contains(err.Error(), journal) || !strings.Contains(err.Error(), "undolog compact --accept-journal-loss") {
			t.Fatalf("%s: %v; want the journal %s named, and what to do", what, err, journal)
		}
	}
	if !bytes.Equal(readFile(t, s.Path()), logBefore) {
		t.Fatal("the log file changed")
	}
	if now, err := os.ReadFile(journal); !bytes.Equal(now, journalBefore) || (err == nil) != (journalErr == nil) {
		t.Fatalf("the journal changed: %v, was %v", err, journalErr)
	}
}

// Writes acknowledged since the last checkpoint are only in the journal
// while no process holds the log. A journal removed (as sqlite3 does with a
// <db>-journal beside the file it opens), emptied, replaced by an older copy
// of itself or by another log's, or a log file copied without it, is
// refused, never read as the log before those writes; accepting the loss
// (compact --accept-journal-loss) sets the journal aside and opens the file
// as it stands.
func TestLostJournalIsReportedNotAnOlderLog(t *testing.T) {
	other, _ := newStore(t)
	intercept(t, other, "other", "write", sm.Compensable, `1`)
	other.pause()()
	for name, lose := range map[string]func(t *testing.T, path, older string) string{
		"removed": func(t *testing.T, path, _ string) string {
			return path
		},
		"emptied": func(t *testing.T, path, _ string) string {
			os.WriteFile(path+JournalSuffix, nil, 0o600)
			return path
		},
		"an older copy": func(t *testing.T, path, older string) string {
			os.WriteFile(path+JournalSuffix, []byte(older), 0o600)
			return path
		},
		"another log's": func(t *testing.T, path, _ string) string {
			os.WriteFile(path+JournalSuffix, readFile(t, other.journalPath()), 0o600)
			return path
		},
		"the file copied without it": func(t *testing.T, path, _ string) string {
			return copyLog(t, path, "")
		},
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := newStore(t)
			for i := 1; i <= 3; i++ {
				intercept(t, s, "s", "write", sm.Compensable, strconv.Itoa(i))
			}
			s.pause()()
			older := string(readFile(t, s.journalPath())) // a copy, two checkpoints ago
			for i := 4; i <= 5; i++ {
				if err := s.checkpoint(); err != nil {
					t.Fatal(err)
				}
				intercept(t, s, "s", "write", sm.Compensable, strconv.Itoa(i))
			}
			if err := s.checkpoint(); err != nil {
				t.Fatal(err)
			}
			for i := 6; i <= 8; i++ { // acknowledged, in the journal only
				intercept(t, s, "s", "write", sm.Compensable, strconv.Itoa(i))
			}
			s.pause()()
			if n := effectsInBolt(t, s.Path()); n != 5 {
				t.Fatalf("the file holds %d effects, want the 5 checkpointed", n)
			}
			if rep := verifyClean(t, s); rep.Effects != 8 {
				t.Fatalf("the log reads %d effects, want 8", rep.Effects)
			}
			if name == "removed" {
				if err := os.Remove(s.journalPath()); err != nil {
					t.Fatal(err)
				}
			}
			path := lose(t, s.Path(), older)
			lost := openLog(t, path)
			refusedForItsJournal(t, lost)

			aside, err := lost.AcceptJournalLoss()
			if err != nil {
				t.Fatal(err)
			}
			if exists := fileExists(path + JournalSuffix); aside == "" && exists || aside != "" && (exists || !fileExists(aside)) {
				t.Fatalf("set aside at %q; a journal at its path: %v", aside, exists)
			}
			if rep := verifyClean(t, lost); rep.Effects != 5 {
				t.Fatalf("after the loss accepted: %d effects, want the 5 checkpointed", rep.Effects)
			}
			if got := intercept(t, lost, "s", "write", sm.Compensable, `9`).Effect.ID; got != 6 {
				t.Fatalf("a new effect %d, want 6", got)
			}
			lost.pause()()
			if rep := verifyClean(t, openLog(t, path)); rep.Effects != 6 {
				t.Fatalf("opened again: %d effects", rep.Effects)
			}
		})
	}
}

// Accepting a loss where there is none is refused, and changes nothing.
func TestAcceptJournalLossOfASoundLogIsRefused(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "s", "write", sm.Compensable, `1`)
	s.pause()()
	logBefore, journalBefore := readFile(t, s.Path()), readFile(t, s.journalPath())
	if _, err := s.AcceptJournalLoss(); !errors.Is(err, model.ErrInvalidInput) {
		t.Fatalf("accepting a loss of a sound log: %v", err)
	}
	if !bytes.Equal(readFile(t, s.Path()), logBefore) || !bytes.Equal(readFile(t, s.journalPath()), journalBefore) {
		t.Fatal("the files changed")
	}
	if rep := verifyClean(t, s); rep.Effects != 1 {
		t.Fatalf("%d effects", rep.Effects)
	}
}

// Right after a compaction the file alone is the log: copied without its
// journal, or with its journal removed, it opens whole. Once it is written
// again, it needs its journal again.
func TestCompactedLogOpensWithoutItsJournal(t *testing.T) {
	s, _ := newStore(t)
	for i := 1; i <= 3; i++ {
		intercept(t, s, "s", "write", sm.Compensable, strconv.Itoa(i))
	}
	if _, _, err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	if rep := verifyClean(t, openLog(t, copyLog(t, s.Path(), ""))); rep.Effects != 3 {
		t.Fatalf("the compacted file copied alone: %d effects", rep.Effects)
	}
	if err := os.Remove(s.journalPath()); err != nil {
		t.Fatal(err)
	}
	if rep := verifyClean(t, s); rep.Effects != 3 {
		t.Fatalf("the compacted log without its journal: %d effects", rep.Effects)
	}
	intercept(t, s, "s", "write", sm.Compensable, `4`)
	intercept(t, s, "s", "write", sm.Compensable, `5`)
	s.pause()()
	if n := effectsInBolt(t, s.Path()); n != 3 {
		t.Fatalf("the file holds %d effects, want the 3 compacted", n)
	}
	if rep := verifyClean(t, openLog(t, copyLog(t, s.Path(), "", JournalSuffix))); rep.Effects != 5 {
		t.Fatalf("copied with its journal: %d effects", rep.Effects)
	}
	refusedForItsJournal(t, openLog(t, copyLog(t, s.Path(), "")))
}

// A new log says that it needs its journal (with an empty record in it to
// name) before its first write: a copy without the journal, or the journal
// emptied, is refused from then on.
func TestNewLogNeedsItsJournal(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "s", "write", sm.Compensable, `1`)
	s.pause()()
	if n := effectsInBolt(t, s.Path()); n != 0 {
		t.Fatalf("the file holds %d effects: the write should be in the journal only", n)
	}
	refusedForItsJournal(t, openLog(t, copyLog(t, s.Path(), "")))
	emptied := copyLog(t, s.Path(), "", JournalSuffix)
	if err := os.Truncate(emptied+JournalSuffix, 0); err != nil {
		t.Fatal(err)
	}
	refusedForItsJournal(t, openLog(t, emptied))
}

// asSchema6 turns the log at path, of this build, into one of schema 6 as
// an older undolog leaves it: the schema record says 6 (its bytes changed in
// place, so that bbolt's transaction id, which the journal's records name,
// stays), and the journal is at the old name.
func asSchema6(t *testing.T, path string) {
	t.Helper()
	data := readFile(t, path)
	from, to := append([]byte("schema_version"), itob(7)...), append([]byte("schema_version"), itob(6)...)
	if !bytes.Contains(data, from) {
		t.Fatal("no schema record in the file")
	}
	// Free pages may hold older copies of the meta bucket: all are changed.
	if err := os.WriteFile(path, bytes.ReplaceAll(data, from, to), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+JournalSuffix, path+oldJournalSuffix); err != nil {
		t.Fatal(err)
	}
}

// A log of schema 6 keeps its journal at <log>-journal, SQLite's name. It
// is read there; the write that moves the log to schema 7 commits the
// journal's records, then renames the journal to its own name. A kill at
// any point of the move loses nothing: before the commit the files are as
// they were; between the commit and the rename the next holder finishes the
// move (a reader reads the journal at the old name); after it, the journal
// is at its own name.
func TestOldJournalNameIsMoved(t *testing.T) {
	s, _ := newStore(t)
	for i := 1; i <= 3; i++ {
		intercept(t, s, "s", "write", sm.Compensable, strconv.Itoa(i))
	}
	s.pause()()
	asSchema6(t, s.Path())
	if n := effectsInBolt(t, s.Path()); n != 0 {
		t.Fatalf("the file holds %d effects: the writes should be in the old journal only", n)
	}
	oldJournal := s.Path() + oldJournalSuffix
	journalBefore := readFile(t, oldJournal)
	if rep := verifyClean(t, s); rep.Effects != 3 {
		t.Fatalf("the schema 6 log reads %d effects, want 3", rep.Effects)
	}
	if !bytes.Equal(readFile(t, oldJournal), journalBefore) || fileExists(s.journalPath()) {
		t.Fatal("a read moved or changed the journal")
	}
	beforeCommit := copyLog(t, s.Path(), "", oldJournalSuffix) // a kill before the commit leaves this

	var midMove string
	afterCommitBeforeMove = func() { midMove = copyLog(t, s.Path(), "", oldJournalSuffix) }
	defer func() { afterCommitBeforeMove = nil }()
	intercept(t, s, "s", "write", sm.Compensable, `4`)
	afterCommitBeforeMove = nil
	if midMove == "" {
		t.Fatal("the write moved no journal")
	}
	if fileExists(oldJournal) || !fileExists(s.journalPath()) {
		t.Fatal("the journal is not at its own name after the move")
	}
	intercept(t, s, "s", "write", sm.Compensable, `5`)
	s.pause()()
	if rep := verifyClean(t, s); rep.Effects != 5 {
		t.Fatalf("after the move: %d effects, want 5", rep.Effects)
	}

	if rep := verifyClean(t, openLog(t, beforeCommit)); rep.Effects != 3 {
		t.Fatalf("killed before the commit: %d effects, want 3", rep.Effects)
	}
	killed := openLog(t, midMove)
	if rep := verifyClean(t, killed); rep.Effects != 4 {
		t.Fatalf("killed between the commit and the rename: a reader reads %d effects, want 4", rep.Effects)
	}
	if !fileExists(midMove+oldJournalSuffix) || fileExists(midMove+JournalSuffix) {
		t.Fatal("a read finished the move")
	}
	intercept(t, killed, "s", "write", sm.Compensable, `5`)
	killed.pause()()
	if fileExists(midMove+oldJournalSuffix) || !fileExists(midMove+JournalSuffix) {
		t.Fatal("the next holder did not finish the move")
	}
	if rep := verifyClean(t, openLog(t, midMove)); rep.Effects != 5 {
		t.Fatalf("killed mid-move, then written: %d effects, want 5", rep.Effects)
	}
}
