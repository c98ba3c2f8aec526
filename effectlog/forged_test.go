package effectlog_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/engines"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// TestAHandMadeUndoRecordFailsTheCheck: a record appended to an effect's
// history, chained and hashed as undolog does, that moves its entry as no
// undo does (to compensated at once, or to skipped though the call ran)
// fails the effect's check, which undo holds every entry on its stack to:
// undo would pass the call by and say the session was compensated.
func TestAHandMadeUndoRecordFailsTheCheck(t *testing.T) {
	cases := []struct {
		name   string
		commit bool
		moves  []sm.EntryState
		says   string
	}{
		{"compensated at once", true, []sm.EntryState{sm.EntryCompensated}, "undo entry pending -> compensated"},
		{"skipped though it ran", true, []sm.EntryState{sm.EntrySkipped}, "skips the entry of a committed effect"},
		{"resolved at once", true, []sm.EntryState{sm.EntryResolved}, "undo entry pending -> resolved"},
		{"compensated from failed", true, []sm.EntryState{sm.EntryCompensating, sm.EntryCompensationFailed, sm.EntryCompensated}, "undo entry compensation_failed -> compensated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := engines.File(filepath.Join(t.TempDir(), "u.db"), engines.Options{})
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
			for _, to := range c.moves {
				if err := effectlog.AppendUndoRecord(s, id, to); err != nil {
					t.Fatal(err)
				}
			}
			d, err := s.GetEffect(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if err := effectlog.CheckEffect(d); !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("the check of an entry moved by hand: %v, want it to say %q", err, c.says)
			}
		})
	}
}
