package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// The refusals and moves below are read from statemachine's tables; the log
// adds its own rules on top of some moves the table allows, named here.

// logRule is the log's answer where it refuses a move the spec's table
// allows: an irreversible effect starts only once approved, and replayed is
// reached only by intercepting a repeat.
func logRule(tier sm.Tier, from, to sm.State) error {
	switch {
	case tier == sm.Irreversible && from == sm.Pending && to == sm.Executing:
		return model.ErrInProgress
	case to == sm.Replayed:
		return model.ErrConflict
	}
	return nil
}

// effectIn makes a new effect of the tier and brings it to state `from`
// through the log's own calls, in a session of its own.
func effectIn(t *testing.T, s effectlog.Log, tier sm.Tier, from sm.State, n int) uint64 {
	t.Helper()
	session := fmt.Sprintf("%s-%s-%d", tier, from, n)
	res := intercept(t, s, session, "tool", tier, fmt.Sprintf(`{"n":%d}`, n))
	id := res.Effect.ID
	start := func() {
		if tier == sm.Irreversible {
			must[model.Effect](t)(s.Approve(t.Context(), id, model.Change{Actor: "alice"}))
		}
		must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
	}
	undo := func(to ...sm.EntryState) {
		start()
		for _, step := range to {
			must[model.UndoEntry](t)(s.UndoStep(t.Context(), id, step, model.Change{}))
		}
	}
	switch from {
	case sm.Pending:
	case sm.Executing:
		start()
	case sm.Approved:
		must[model.Effect](t)(s.Approve(t.Context(), id, model.Change{Actor: "alice"}))
	case sm.Rejected:
		must[model.Effect](t)(s.Reject(t.Context(), id, model.Change{Actor: "alice"}))
	case sm.Committed, sm.Replayed:
		start()
		must[model.Effect](t)(s.Commit(t.Context(), id, model.Change{Result: json.RawMessage(`"done"`)}))
		if from == sm.Replayed {
			rep := intercept(t, s, session, "tool", tier, fmt.Sprintf(`{"n":%d}`, n))
			if rep.Outcome != model.OutcomeReplayed {
				t.Fatalf("repeat of a committed call: %+v", rep)
			}
			id = rep.Effect.ID
		}
	case sm.Compensating:
		undo(sm.EntryCompensating)
	case sm.Compensated:
		undo(sm.EntryCompensating, sm.EntryCompensated)
	case sm.CompensationFailed:
		undo(sm.EntryCompensating, sm.EntryCompensationFailed)
	default:
		t.Fatalf("no way to %s", from)
	}
	if e := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id)); e.Effect.State != from {
		t.Fatalf("effect %d is %s, want %s", id, e.Effect.State, from)
	}
	return id
}

// Every (tier, from, to) the log can be asked: the table's moves are made,
// with the table's trigger in the history, and every other one is refused
// with the spec's reason and changes nothing.
func testEveryEffectTransition(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	n := 0
	rows := map[sm.Transition]bool{}
	for _, tier := range []sm.Tier{sm.Compensable, sm.Irreversible} {
		for _, from := range sm.States {
			if !tier.Reachable(from) {
				continue // no call of the log leads there
			}
			// One effect takes every refusal; each allowed move gets its own.
			n++
			refused := effectIn(t, s, tier, from, n)
			for _, to := range sm.States {
				row, verr := sm.Validate(tier, from, to)
				id := refused
				if verr == nil && logRule(tier, from, to) == nil {
					n++
					id = effectIn(t, s, tier, from, n)
				}
				before := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
				last := must[uint64](t)(s.LastChange(t.Context()))
				e, err := s.Transition(t.Context(), id, to, model.Change{Actor: "tester"})
				name := fmt.Sprintf("%s %s -> %s", tier, from, to)
				switch rule := logRule(tier, from, to); {
				case verr != nil:
					var te *sm.TransitionError
					want := verr.(*sm.TransitionError).Reason
					if !errors.Is(err, sm.ErrInvalidStateTransition) || !errors.As(err, &te) || te.Reason != want {
						t.Errorf("%s: %v, want the reason %q", name, err, want)
					}
				case rule != nil:
					if !errors.Is(err, rule) {
						t.Errorf("%s: %v, want %v", name, err, rule)
					}
				default:
					if err != nil || e.State != to {
						t.Errorf("%s: %+v %v", name, e, err)
						continue
					}
					d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
					found := false
					for _, r := range d.History[len(before.History):] {
						found = found || r.Kind == model.KindEffect && r.From == string(from) && r.To == string(to) && r.Trigger == row.Trigger
					}
					if !found {
						t.Errorf("%s: no history record with the trigger %q: %s", name, row.Trigger, states(d.History))
					}
					rows[sm.Transition{From: from, To: to, Trigger: row.Trigger, Description: row.Description}] = true
					continue
				}
				after := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
				if after.Effect.State != from || len(after.History) != len(before.History) || must[uint64](t)(s.LastChange(t.Context())) != last {
					t.Errorf("%s: the refusal changed the log: %s", name, states(after.History))
				}
			}
		}
	}
	// Replayed is reached by intercepting a repeat (effectIn checks the
	// outcome); its record carries the table's trigger.
	rep := effectIn(t, s, sm.Compensable, sm.Replayed, n+1)
	for _, r := range must[model.EffectDetail](t)(s.GetEffect(t.Context(), rep)).History {
		if r.From == string(sm.Pending) && r.To == string(sm.Replayed) {
			row, _ := sm.Validate(sm.Compensable, sm.Pending, sm.Replayed)
			if r.Trigger != row.Trigger {
				t.Errorf("replay record trigger %q, want %q", r.Trigger, row.Trigger)
			}
			rows[row] = true
		}
	}
	for _, row := range sm.Transitions() {
		if !rows[row] {
			t.Errorf("the table's %s -> %s was never made", row.From, row.To)
		}
	}
	verifyClean(t, s)
}

// sessionIn makes a session and brings it to state `from` along the table.
func sessionIn(t *testing.T, s effectlog.Log, from sm.SessionState, n int) string {
	t.Helper()
	id := fmt.Sprintf("s-%s-%d", from, n)
	must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: id}))
	if from == sm.SessionAwaitingApproval { // as a session comes to await approval: a call waits
		intercept(t, s, id, "deploy", sm.Irreversible, `{}`)
		return id
	}
	path := map[sm.SessionState][]sm.SessionState{
		sm.SessionCompensated: {sm.SessionCompensating, sm.SessionCompensated},
	}[from]
	if path == nil && from != sm.SessionActive {
		path = []sm.SessionState{from}
	}
	for _, to := range path {
		must[model.Session](t)(s.SetSessionState(t.Context(), id, to, model.Change{}))
	}
	return id
}

// Every session move: the table's are made and recorded with their trigger,
// the rest refused with the table's reason, changing nothing.
func testEverySessionTransition(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	n := 0
	for _, from := range sm.SessionStates {
		n++
		refused := sessionIn(t, s, from, n)
		for _, to := range sm.SessionStates {
			row, verr := sm.ValidateSession(from, to)
			id := refused
			if verr == nil {
				n++
				id = sessionIn(t, s, from, n)
			}
			before := must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), id))
			sess, err := s.SetSessionState(t.Context(), id, to, model.Change{Actor: "tester", Reason: "because"})
			name := fmt.Sprintf("%s -> %s", from, to)
			// Moves between active and awaiting_approval say a call waits,
			// or none: asked for while that is not so, they are refused.
			if from == sm.SessionAwaitingApproval && to == sm.SessionActive || from == sm.SessionActive && to == sm.SessionAwaitingApproval {
				got := must[model.Session](t)(s.GetSession(t.Context(), id))
				if !errors.Is(err, model.ErrConflict) || got.State != from || len(must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), id))) != len(before) {
					t.Errorf("%s with %d waiting: %v, the session %+v", name, got.PendingApprovals, err, got)
				}
				continue
			}
			if verr != nil {
				var te *sm.TransitionError
				want := verr.(*sm.TransitionError).Reason
				if !errors.As(err, &te) || te.Reason != want {
					t.Errorf("%s: %v, want the reason %q", name, err, want)
				}
				got := must[model.Session](t)(s.GetSession(t.Context(), id))
				if got.State != from || len(must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), id))) != len(before) {
					t.Errorf("%s: the refusal changed the session: %+v", name, got)
				}
				continue
			}
			if err != nil || sess.State != to || sess.Reason != "because" {
				t.Errorf("%s: %+v %v", name, sess, err)
				continue
			}
			hist := must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), id))
			last := hist[len(hist)-1]
			if len(hist) != len(before)+1 || last.From != string(from) || last.To != string(to) || last.Trigger != row.Trigger || last.Actor != "tester" {
				t.Errorf("%s: history %s, last %+v", name, states(hist), last)
			}
		}
	}
	verifyClean(t, s)
}

// entryIn makes a compensable effect whose undo entry is in state `from`;
// ran says whether the effect ran (executing) before the walk reached it.
func entryIn(t *testing.T, s effectlog.Log, from sm.EntryState, ran bool, n int) uint64 {
	t.Helper()
	id := intercept(t, s, "undo", "tool", sm.Compensable, fmt.Sprintf(`{"n":%d}`, n)).Effect.ID
	if ran {
		must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
	}
	path := map[sm.EntryState][]sm.EntryState{
		sm.EntrySkipped:            {sm.EntrySkipped},
		sm.EntryCompensating:       {sm.EntryCompensating},
		sm.EntryCompensated:        {sm.EntryCompensating, sm.EntryCompensated},
		sm.EntryCompensationFailed: {sm.EntryCompensating, sm.EntryCompensationFailed},
		sm.EntryResolved:           {sm.EntryCompensating, sm.EntryCompensationFailed, sm.EntryResolved},
	}[from]
	for _, to := range path {
		must[model.UndoEntry](t)(s.UndoStep(t.Context(), id, to, model.Change{}))
	}
	return id
}

// Every undo-entry move: the table's are made (the effect following where the
// spec has a move for it), the rest refused with the table's reason.
func testEveryUndoEntryTransition(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	n := 0
	for _, from := range sm.EntryStates {
		// An entry is skipped only if its effect never ran; every other
		// entry here belongs to an effect that did.
		n++
		refused := entryIn(t, s, from, from != sm.EntryPending && from != sm.EntrySkipped, n)
		for _, to := range sm.EntryStates {
			trigger, verr := sm.ValidateEntry(from, to)
			id := refused
			if verr == nil {
				n++
				id = entryIn(t, s, from, to != sm.EntrySkipped, n)
			}
			before := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
			last := must[uint64](t)(s.LastChange(t.Context()))
			u, err := s.UndoStep(t.Context(), id, to, model.Change{Actor: "tester"})
			name := fmt.Sprintf("%s -> %s", from, to)
			switch {
			case from == sm.EntryCompensating && to == sm.EntryCompensating:
				// Taking over a compensation needs the owner judged gone.
				if !errors.Is(err, model.ErrInProgress) {
					t.Errorf("%s: %v, want ErrInProgress", name, err)
				}
			case verr != nil:
				var te *sm.TransitionError
				want := verr.(*sm.TransitionError).Reason
				if !errors.As(err, &te) || te.Reason != want {
					t.Errorf("%s: %v, want the reason %q", name, err, want)
				}
			default:
				if err != nil || u.State != to {
					t.Errorf("%s: %+v %v", name, u, err)
					continue
				}
				d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
				want := map[sm.EntryState]sm.State{sm.EntryCompensating: sm.Compensating, sm.EntryCompensated: sm.Compensated,
					sm.EntryCompensationFailed: sm.CompensationFailed}[to]
				if want == "" {
					want = before.Effect.State
				}
				rec := d.History[len(d.History)-1]
				if d.Undo.State != to || d.Effect.State != want || rec.Kind != model.KindUndo || rec.Trigger != trigger {
					t.Errorf("%s: effect %s, entry %s, last record %+v", name, d.Effect.State, d.Undo.State, rec)
				}
				continue
			}
			after := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
			if after.Undo.State != from || len(after.History) != len(before.History) || must[uint64](t)(s.LastChange(t.Context())) != last {
				t.Errorf("%s: the refusal changed the log: %s", name, states(after.History))
			}
		}
	}
	verifyClean(t, s)
}
