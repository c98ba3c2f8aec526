package saga

import (
	"context"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// UndoneCount is how many of session s's effects an undo compensated; only
// a session an undo reached has any, and only its undo stack is read.
func UndoneCount(ctx context.Context, store effectlog.Log, s model.Session) (int, error) {
	switch s.State {
	case sm.SessionCompensating, sm.SessionCompensated, sm.SessionHalted:
	default:
		return 0, nil
	}
	entries, _, err := store.UndoStack(ctx, s.ID, 0)
	n := 0
	for _, u := range entries {
		if u.State == sm.EntryCompensated {
			n++
		}
	}
	return n, err
}

// CountsWords renders a session's per-state counts in the spec's state
// order, in words, with how many of the committed were undone (undone is
// UndoneCount's): of the undone entries, those of effects undone while
// they ran are counted as such.
func CountsWords(counts map[sm.State]int, undone int) string {
	var parts []textfmt.StateCount
	for _, st := range sm.States {
		parts = append(parts, textfmt.StateCount{State: string(st), N: counts[st]})
	}
	return textfmt.CountsWords(parts, max(0, undone-counts[sm.Compensated]))
}
