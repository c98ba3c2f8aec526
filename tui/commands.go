package tui

import (
	"context"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/saga"
	sm "github.com/undolog/undolog/statemachine"
)

// All I/O happens here, in tea.Cmds: each opens the log for one operation and
// closes it, so the view never holds the log between refreshes.

const pageSize = 200

func loadSessions(ctx context.Context, store effectlog.Log) tea.Cmd {
	return func() tea.Msg {
		list, _, err := store.ListSessions(ctx, effectlog.SessionFilter{Limit: pageSize})
		undone := map[string]textfmt.UndoCounts{}
		for _, s := range list {
			if err != nil {
				break
			}
			undone[s.ID], err = saga.UndoCounts(ctx, store, s)
		}
		return sessionsMsg{sessions: list, undone: undone, err: err}
	}
}

// loadEffects loads one page of a session's effects, oldest first, starting
// after the effect id `after`.
func loadEffects(ctx context.Context, store effectlog.Log, session string, filter effectlog.EffectFilter, page int, after uint64) tea.Cmd {
	return func() tea.Msg {
		sess, err := store.GetSession(ctx, session)
		if err != nil {
			return effectsMsg{err: err}
		}
		filter.Session, filter.Ascending, filter.Limit, filter.Cursor = session, true, pageSize, after
		list, next, err := store.ListEffects(ctx, filter)
		if err != nil {
			return effectsMsg{err: err}
		}
		ids := make([]uint64, len(list))
		for i, e := range list {
			ids[i] = e.ID
		}
		entries, err := store.UndoEntries(ctx, session, ids)
		return effectsMsg{session: sess, effects: list, entries: entries, page: page, next: next, err: err}
	}
}

func loadDetail(ctx context.Context, store effectlog.Log, id uint64) tea.Cmd {
	return func() tea.Msg {
		d, err := store.GetEffect(ctx, id)
		return detailMsg{detail: d, err: err}
	}
}

func tick(d time.Duration) tea.Cmd {
	return tea.Tick(d, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// firstLoad reads the change feed's position, then the first screen
// (load): one load, and a change made after the position is read is seen
// by the first watch, which starts from it.
func firstLoad(ctx context.Context, store effectlog.Log, load tea.Cmd) tea.Cmd {
	return func() tea.Msg {
		pos, err := store.LastChange(ctx)
		if err != nil {
			return primeMsg{err: err}
		}
		return primeMsg{position: pos, screen: load()}
	}
}

func checkChanges(ctx context.Context, store effectlog.Log) tea.Cmd {
	return func() tea.Msg {
		pos, err := store.LastChange(ctx)
		return changeMsg{position: pos, err: err}
	}
}

// watchChanges waits for the change feed to move past position after (told
// by the engine, or after poll where it cannot tell), then reads where it
// is. Exactly one watch runs at a time: each changeMsg starts the next.
func watchChanges(ctx context.Context, store effectlog.Log, after uint64, poll time.Duration) tea.Cmd {
	return func() tea.Msg {
		if store.WaitChange(ctx, after, poll) != nil {
			return nil // the view is closing
		}
		pos, err := store.LastChange(ctx)
		return changeMsg{position: pos, err: err}
	}
}

// decide moves the effect shown to to: only while its id is still that call
// (ExpectCall), not another's of a log replaced under the view.
func decide(ctx context.Context, store effectlog.Log, shown model.Effect, to sm.State, actor, reason string) tea.Cmd {
	return func() tea.Msg {
		e, err := store.Transition(ctx, shown.ID, to, model.Change{Actor: actor, Reason: reason, ExpectCall: shown.CallSignature, ExpectState: shown.State})
		if err != nil {
			return actionMsg{err: err}
		}
		return actionMsg{text: "effect " + itoa(e.ID) + " " + string(e.State) + " by " + actor}
	}
}

// resolveEntry records that a person fixed effect id's failed compensation
// by hand, as `undolog resolve` does.
func resolveEntry(ctx context.Context, store effectlog.Log, id uint64, actor, reason string) tea.Cmd {
	return func() tea.Msg {
		u, err := store.UndoStep(ctx, id, sm.EntryResolved, model.Change{Actor: actor, Reason: reason})
		if err != nil {
			return actionMsg{err: err}
		}
		return actionMsg{text: "effect " + itoa(id) + ": " + textfmt.UndoWord(string(u.State)) + " by " + actor}
	}
}

func makePlan(ctx context.Context, store effectlog.Log, session string) tea.Cmd {
	return func() tea.Msg {
		plan, err := saga.MakePlan(ctx, store, session)
		return planMsg{plan: plan, err: err}
	}
}

// runUndo starts the undo walk in the background and streams its progress
// lines as messages, one listen at a time.
// It runs only the plan the person confirmed: if the session's plan has
// changed since (a call logged meanwhile), nothing runs (saga.ErrPlanChanged).
func runUndo(ctx context.Context, store effectlog.Log, plan saga.Plan, actor, cli string) tea.Cmd {
	return func() tea.Msg {
		ch := make(chan undoEvent, 16)
		go func() {
			r := &saga.Runner{Log: store, Actor: actor, Progress: lineWriter(ch), CLI: cli, Confirmed: &plan}
			res, err := r.Run(ctx, plan.Session)
			ch <- undoEvent{done: &undoDoneMsg{result: res, err: err}}
			close(ch)
		}()
		return listenUndo(ch)()
	}
}

func listenUndo(ch <-chan undoEvent) tea.Cmd {
	return func() tea.Msg {
		ev, ok := <-ch
		if !ok {
			return nil
		}
		if ev.done != nil {
			return *ev.done
		}
		return undoLineMsg{line: ev.line, ch: ch}
	}
}

// lineWriter turns the runner's progress output into events.
type lineWriter chan<- undoEvent

func (w lineWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w <- undoEvent{line: line}
	}
	return len(p), nil
}
