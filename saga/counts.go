package saga

import (
	"context"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// UndoCounts are how many of session s's undo entries an undo compensated,
// failed to compensate, and a person resolved by hand; only a session an
// undo reached has any, and only its undo stack is read.
func UndoCounts(ctx context.Context, store effectlog.Log, s model.Session) (textfmt.UndoCounts, error) {
	var n textfmt.UndoCounts
	switch s.State {
	case sm.SessionCompensating, sm.SessionCompensated, sm.SessionHalted:
	default:
		return n, nil
	}
	entries, _, err := store.UndoStack(ctx, s.ID, 0)
	for _, u := range entries {
		switch u.State {
		case sm.EntryCompensated:
			n.Undone++
		case sm.EntryCompensationFailed:
			n.Failed++
		case sm.EntryResolved:
			n.Resolved++
		}
	}
	return n, err
}

// CountsWords renders a session's per-state counts in the spec's state
// order, in words, with what an undo did to the committed (undo is
// UndoCounts'): of its entries, those of effects undone (or not) while
// they ran are counted by their effects' states.
func CountsWords(counts map[sm.State]int, undo textfmt.UndoCounts) string {
	var parts []textfmt.StateCount
	for _, st := range sm.States {
		parts = append(parts, textfmt.StateCount{State: string(st), N: counts[st]})
	}
	undo.Undone = max(0, undo.Undone-counts[sm.Compensated])
	undo.Failed = max(0, undo.Failed-counts[sm.CompensationFailed])
	return textfmt.CountsWords(parts, undo)
}
