package effectlog_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestAHandMadeUndoRecordFailsTheCheck: a record appended to an effect's
// history, chained and hashed as undolog does, that moves its entry as no
// undo does (to compensated at once, or to skipped though the call ran)
// fails the effect's check, which undo holds every entry on its stack to:
// undo would pass the call by and say the session was compensated.
func TestAHandMadeUndoRecordFailsTheCheck(t *testing.T) {
	cases := []struct {
		name  string
		moves []sm.EntryState
		says  string
	}{
		{"compensated at once", []sm.EntryState{sm.EntryCompensated}, "undo entry pending -> compensated"},
		{"skipped though it ran", []sm.EntryState{sm.EntrySkipped}, "skips the entry of a committed effect"},
		{"resolved at once", []sm.EntryState{sm.EntryResolved}, "undo entry pending -> resolved"},
		{"compensated from failed", []sm.EntryState{sm.EntryCompensating, sm.EntryCompensationFailed, sm.EntryCompensated}, "undo entry compensation_failed -> compensated"},
	}
	open := map[string]func(t *testing.T) effectlog.Log{
		"file": func(t *testing.T) effectlog.Log {
			return logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
		},
		"postgres": func(t *testing.T) effectlog.Log {
			return logaddr.Open(pgtest.Server(t).NewDatabase(t), logaddr.Options{})
		},
	}
	for engine, open := range open {
		for _, c := range cases {
			t.Run(engine+"/"+c.name, func(t *testing.T) { handMadeUndoRecord(t, open(t), c.moves, c.says) })
		}
	}
}

// handMadeUndoRecord: a committed call's entry moved by hand through moves
// fails the effect's check, saying says.
func handMadeUndoRecord(t *testing.T, s effectlog.Log, moves []sm.EntryState, says string) {
	t.Cleanup(func() { s.Close() })
	res, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true, Compensation: &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Effect.ID
	if _, err := s.Start(t.Context(), id, model.Change{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(t.Context(), id, model.Change{}); err != nil {
		t.Fatal(err)
	}
	for _, to := range moves {
		if err := effectlog.AppendUndoRecord(s, id, to); err != nil {
			t.Fatal(err)
		}
	}
	d, err := s.GetEffect(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := effectlog.CheckEffect(d); !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), says) {
		t.Fatalf("the check of an entry moved by hand: %v, want it to say %q", err, says)
	}
}
