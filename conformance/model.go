package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// modelEffect is what the model knows of one effect.
type modelEffect struct {
	id       uint64
	session  string
	tier     sm.Tier
	state    sm.State
	entry    sm.EntryState // "" without an undo entry (irreversible, replays)
	approval string        // "" without an approval request
	moved    bool          // its state changed after the intercept
}

// model is the log as statemachine's tables and the log's documented rules
// say it must be.
type logModel struct {
	sessions map[string]sm.SessionState
	effects  map[uint64]*modelEffect
	ids      []uint64
	owners   map[string]uint64 // the call (session, tier, args) -> its owner effect
	// haltedFrom is the state a halted session was halted from: one its
	// undo halted (compensating) is not resumed.
	haltedFrom map[string]sm.SessionState
}

func (m *logModel) waiting(session string) int {
	n := 0
	for _, e := range m.effects {
		if e.session == session && e.approval == model.ApprovalPending {
			n++
		}
	}
	return n
}

// approvedNotRun counts the session's effects a person approved that have
// not run.
func (m *logModel) approvedNotRun(session string) int {
	n := 0
	for _, e := range m.effects {
		if e.session == session && e.state == sm.Approved {
			n++
		}
	}
	return n
}

// moveSession makes a session move; one that stops accepting effects closes
// its waiting requests.
func (m *logModel) moveSession(session string, to sm.SessionState) {
	if to == sm.SessionHalted {
		m.haltedFrom[session] = m.sessions[session]
	}
	m.sessions[session] = to
	if to.AcceptsEffects() {
		return
	}
	for _, e := range m.effects {
		if e.session == session && e.approval == model.ApprovalPending {
			e.approval = model.ApprovalClosed
		}
	}
}

// expect says what a refused call must answer: a transition refused with
// the table's reason, or a sentinel error.
type expect struct {
	reason string // non-empty: a *sm.TransitionError with this reason
	err    error
}

func refusedBy(err error) *expect {
	var te *sm.TransitionError
	if errors.As(err, &te) {
		return &expect{reason: te.Reason}
	}
	return &expect{err: err}
}

func (x *expect) check(t *rapid.T, what string, err error) {
	t.Helper()
	if x == nil {
		if err != nil {
			t.Fatalf("%s: %v, the model allows it", what, err)
		}
		return
	}
	if x.reason != "" {
		var te *sm.TransitionError
		if !errors.As(err, &te) || te.Reason != x.reason {
			t.Fatalf("%s: %v, want the refusal %q", what, err, x.reason)
		}
		return
	}
	if !errors.Is(err, x.err) {
		t.Fatalf("%s: %v, want %v", what, err, x.err)
	}
}

// Random operations on the log agree with the model after every step, and
// the log verifies clean.
func testRandomOperations(t *testing.T, newStore opener) {
	sessions := []string{"s1", "s2"}
	tiers := []sm.Tier{sm.Compensable, sm.Irreversible}
	rapid.Check(t, func(rt *rapid.T) {
		s, _ := newStore(t)
		m := &logModel{sessions: map[string]sm.SessionState{}, effects: map[uint64]*modelEffect{}, owners: map[string]uint64{},
			haltedFrom: map[string]sm.SessionState{}}
		pick := func(rt *rapid.T) *modelEffect {
			if len(m.ids) == 0 {
				rt.Skip("no effect yet")
			}
			return m.effects[rapid.SampledFrom(m.ids).Draw(rt, "effect")]
		}
		// transition makes one effect move of the table through `call`.
		transition := func(rt *rapid.T, name string, to sm.State, call func(context.Context, uint64, model.Change) (model.Effect, error)) {
			e := pick(rt)
			var want *expect
			_, verr := sm.Validate(e.tier, e.state, to)
			accepts := m.sessions[e.session].AcceptsEffects()
			switch {
			case (to == sm.Approved || to == sm.Rejected) && e.tier == sm.Irreversible && e.state == sm.Pending && !accepts:
				want = &expect{err: model.ErrSessionNotActive}
			case verr != nil:
				want = refusedBy(verr)
			case to == sm.Executing && !accepts:
				want = &expect{err: model.ErrSessionNotActive}
			case to == sm.Executing && e.tier == sm.Irreversible && e.state == sm.Pending:
				want = &expect{err: model.ErrInProgress}
			}
			got, err := call(context.Background(), e.id, model.Change{Actor: "rapid", Error: "boom"})
			want.check(rt, fmt.Sprintf("%s effect %d (%s %s)", name, e.id, e.tier, e.state), err)
			if want != nil {
				return
			}
			if got.State != to {
				rt.Fatalf("%s effect %d: %s, want %s", name, e.id, got.State, to)
			}
			e.state, e.moved = to, true
			session := m.sessions[e.session]
			switch to {
			case sm.Pending: // a failure: an irreversible effect is asked again
				if e.tier == sm.Irreversible {
					e.approval = model.ApprovalPending
					if !accepts {
						e.approval = model.ApprovalClosed
					} else if session == sm.SessionActive {
						m.moveSession(e.session, sm.SessionAwaitingApproval)
					}
				}
			case sm.Approved:
				e.approval = model.ApprovalApproved
				if _, err := sm.ValidateSession(session, sm.SessionActive); err == nil && m.waiting(e.session) == 0 {
					m.moveSession(e.session, sm.SessionActive)
				}
			case sm.Rejected:
				e.approval = model.ApprovalRejected
				if _, err := sm.ValidateSession(session, sm.SessionHalted); err == nil {
					m.moveSession(e.session, sm.SessionHalted)
				}
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"intercept": func(rt *rapid.T) {
				session := rapid.SampledFrom(sessions).Draw(rt, "session")
				tier := rapid.SampledFrom(tiers).Draw(rt, "tier")
				n := rapid.IntRange(0, 2).Draw(rt, "args")
				start := rapid.Bool().Draw(rt, "start")
				call := fmt.Sprintf("%s/%s/%d", session, tier, n)
				res, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: session, Tool: string(tier), Tier: tier,
					Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), CreateSession: true, Start: start, Actor: "rapid"})
				state, known := m.sessions[session]
				if !known {
					state = sm.SessionActive
				}
				ownerID, repeat := m.owners[call]
				var want *expect
				outcome := model.OutcomeNew
				if repeat {
					switch owner := m.effects[ownerID]; {
					case owner.state == sm.Rejected && !state.AcceptsEffects():
						outcome = model.OutcomeRejected
					case owner.state == sm.Rejected:
						// Its session was resumed since: a new call that asks again.
					case !state.AcceptsEffects():
						want = &expect{err: model.ErrSessionNotActive}
					case owner.state == sm.Committed:
						outcome = model.OutcomeReplayed
					case owner.state == sm.Pending && tier == sm.Compensable && !owner.moved:
						outcome = model.OutcomePending
					case owner.state == sm.Pending && tier == sm.Compensable:
						outcome = model.OutcomeRetry
					case owner.state == sm.Pending, owner.state == sm.Executing, owner.state == sm.Approved:
						outcome = model.OutcomeInProgress
					default:
						want = &expect{err: model.ErrConflict}
					}
				} else if !state.AcceptsEffects() {
					want = &expect{err: model.ErrSessionNotActive}
				}
				want.check(rt, "intercept "+call, err)
				if want != nil {
					return
				}
				if res.Outcome != outcome {
					rt.Fatalf("intercept %s: %s, want %s", call, res.Outcome, outcome)
				}
				m.sessions[session] = state
				switch outcome {
				case model.OutcomeNew, model.OutcomeReplayed:
					if len(m.ids) > 0 && res.Effect.ID <= m.ids[len(m.ids)-1] {
						rt.Fatalf("intercept %s: new effect %d after %d", call, res.Effect.ID, m.ids[len(m.ids)-1])
					}
					e := &modelEffect{id: res.Effect.ID, session: session, tier: tier, state: sm.Pending}
					m.effects[e.id], m.ids = e, append(m.ids, e.id)
					if outcome == model.OutcomeReplayed {
						e.state = sm.Replayed
						break
					}
					m.owners[call] = e.id
					if tier == sm.Irreversible {
						e.approval = model.ApprovalPending
						if state == sm.SessionActive {
							m.moveSession(session, sm.SessionAwaitingApproval)
						}
						break
					}
					e.entry = sm.EntryPending
					if start {
						e.state, e.moved = sm.Executing, true
					}
				default:
					if res.Effect.ID != ownerID {
						rt.Fatalf("intercept %s: %s names effect %d, the owner is %d", call, outcome, res.Effect.ID, ownerID)
					}
					// A request its session closed, asked again once the
					// session takes calls again (it was resumed).
					if owner := m.effects[ownerID]; owner.tier == sm.Irreversible && owner.state == sm.Pending && owner.approval == model.ApprovalClosed {
						owner.approval = model.ApprovalPending
						if state == sm.SessionActive {
							m.moveSession(session, sm.SessionAwaitingApproval)
						}
					}
					if (outcome == model.OutcomeRetry || outcome == model.OutcomePending) && start {
						m.effects[ownerID].state, m.effects[ownerID].moved = sm.Executing, true
					}
				}
			},
			"start":   func(rt *rapid.T) { transition(rt, "start", sm.Executing, s.Start) },
			"commit":  func(rt *rapid.T) { transition(rt, "commit", sm.Committed, s.Commit) },
			"fail":    func(rt *rapid.T) { transition(rt, "fail", sm.Pending, s.Fail) },
			"approve": func(rt *rapid.T) { transition(rt, "approve", sm.Approved, s.Approve) },
			"reject":  func(rt *rapid.T) { transition(rt, "reject", sm.Rejected, s.Reject) },
			"session": func(rt *rapid.T) {
				session := rapid.SampledFrom(sessions).Draw(rt, "session")
				to := rapid.SampledFrom(sm.SessionStates).Draw(rt, "to")
				from, known := m.sessions[session]
				if !known {
					rt.Skip("no such session yet")
				}
				_, verr := sm.ValidateSession(from, to)
				var want *expect
				switch {
				case verr != nil:
					want = refusedBy(verr)
				case from == sm.SessionHalted && to == sm.SessionActive && m.haltedFrom[session] == sm.SessionCompensating:
					want = &expect{err: model.ErrConflict} // halted by its undo: finish that
				case from == sm.SessionAwaitingApproval && to == sm.SessionActive && m.waiting(session) > 0,
					from == sm.SessionActive && to == sm.SessionAwaitingApproval && m.waiting(session) == 0:
					want = &expect{err: model.ErrConflict} // it awaits approval while a call waits, and only then
				case to == sm.SessionCompleted && m.approvedNotRun(session) > 0:
					want = &expect{err: model.ErrConflict} // an approval would stand with nothing done
				}
				_, err := s.SetSessionState(t.Context(), session, to, model.Change{Actor: "rapid", Reason: "rapid"})
				want.check(rt, fmt.Sprintf("session %s %s -> %s", session, from, to), err)
				if want == nil {
					m.moveSession(session, to)
				}
			},
			"undo": func(rt *rapid.T) {
				e := pick(rt)
				to := rapid.SampledFrom(sm.EntryStates).Draw(rt, "to")
				var want *expect
				var effTo sm.State
				_, verr := sm.ValidateEntry(e.entry, to)
				switch {
				case e.entry == "":
					want = &expect{err: model.ErrNotFound}
				case e.entry == sm.EntryCompensating && to == sm.EntryCompensating:
					want = &expect{err: model.ErrInProgress} // a reclaim needs the owner judged gone
				case verr != nil:
					want = refusedBy(verr)
				case to == sm.EntrySkipped && e.state != sm.Pending:
					want = &expect{err: model.ErrConflict}
				case to == sm.EntryCompensating && e.state != sm.Committed:
					effTo = sm.Compensating
				case (to == sm.EntryCompensated || to == sm.EntryCompensationFailed) && e.state == sm.Compensating:
					effTo = map[sm.EntryState]sm.State{sm.EntryCompensated: sm.Compensated, sm.EntryCompensationFailed: sm.CompensationFailed}[to]
				}
				if effTo != "" {
					if _, err := sm.Validate(e.tier, e.state, effTo); err != nil {
						want = refusedBy(err)
					}
				}
				u, err := s.UndoStep(t.Context(), e.id, to, model.Change{Actor: "rapid"})
				want.check(rt, fmt.Sprintf("undo step effect %d (%s, entry %s) -> %s", e.id, e.state, e.entry, to), err)
				if want != nil {
					return
				}
				if u.State != to {
					rt.Fatalf("undo step effect %d: entry %s, want %s", e.id, u.State, to)
				}
				e.entry = to
				if effTo != "" {
					e.state, e.moved = effTo, true
				}
			},
			"": func(rt *rapid.T) { m.agrees(rt, s) },
		})
	})
}

// agrees checks the log against the model: every effect's state, undo entry
// and approval, every session's state and counts, and a clean verify.
func (m *logModel) agrees(t *rapid.T, s effectlog.Log) {
	t.Helper()
	list, _, err := s.ListEffects(context.Background(), effectlog.EffectFilter{Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, e := range list {
		ids = append(ids, e.ID)
		want := m.effects[e.ID]
		if want == nil || e.State != want.state || e.Session != want.session || e.Tier != want.tier {
			t.Fatalf("effect %+v, the model has %+v", e, want)
		}
		if want.tier == sm.Irreversible {
			d := must[model.EffectDetail](t)(s.GetEffect(context.Background(), e.ID))
			if (d.Approval == nil) != (want.approval == "") || d.Approval != nil && d.Approval.Outcome != want.approval {
				t.Fatalf("effect %d: approval %+v, the model says %q", e.ID, d.Approval, want.approval)
			}
		}
	}
	if !slices.Equal(ids, m.ids) {
		t.Fatalf("effects %v, the model has %v", ids, m.ids)
	}
	waiting := 0
	for id, state := range m.sessions {
		sess := must[model.Session](t)(s.GetSession(context.Background(), id))
		counts := map[sm.State]int{}
		effects, entries := 0, 0
		for _, e := range m.effects {
			if e.session == id {
				counts[e.state]++
				effects++
				entries += b2i(e.entry != "")
			}
		}
		for _, st := range sm.States {
			if sess.Counts[st] != counts[st] {
				t.Fatalf("session %s counts %v, the model has %v", id, sess.Counts, counts)
			}
		}
		if sess.State != state || sess.Effects != effects || sess.PendingApprovals != m.waiting(id) {
			t.Fatalf("session %+v, the model has %s with %d effects, %d waiting", sess, state, effects, m.waiting(id))
		}
		waiting += m.waiting(id)
		stack := undoStack(t, s, id)
		if len(stack) != entries {
			t.Fatalf("session %s: %d undo entries, the model has %d", id, len(stack), entries)
		}
		for _, u := range stack {
			if e := m.effects[u.EffectID]; e == nil || e.entry != u.State {
				t.Fatalf("undo entry %+v, the model has %+v", u, e)
			}
		}
	}
	if n := len(pending(t, s)); n != waiting {
		t.Fatalf("%d requests waiting, the model has %d", n, waiting)
	}
	verifyClean(t, s)
}
