package lifecycle

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// engineLogs opens a log on each engine; again opens the same log anew, as
// another process would.
var engineLogs = map[string]func(t *testing.T) (log effectlog.Log, again func() effectlog.Log){
	"file": func(t *testing.T) (effectlog.Log, func() effectlog.Log) {
		path := filepath.Join(t.TempDir(), "u.db")
		open := func() effectlog.Log {
			log := logaddr.File(path, logaddr.Options{})
			t.Cleanup(func() { log.Close() })
			return log
		}
		return open(), open
	},
	"postgres": func(t *testing.T) (effectlog.Log, func() effectlog.Log) {
		url := pgtest.Server(t).NewDatabase(t)
		open := func() effectlog.Log {
			log := logaddr.Open(url, logaddr.Options{})
			t.Cleanup(func() { log.Close() })
			return log
		}
		return open(), open
	},
}

// door is a front door's words for the texts.
var door = Door{CLI: "undolog", Bound: "1m", Reclaims: "rerun it reclaimed",
	Again: func(e model.Effect) string { return "call " + e.Tool + " again" }}

// runner is a door's run of a call: it counts its runs and ends each as
// told.
type runner struct {
	runs   int
	result Result
}

func (r *runner) run(ctx context.Context, c *Call) Result {
	r.runs++
	return r.result
}

// TestDriveEndsEachCallAsTheLogSays drives a call through the flow, as a
// front door does, for each thing the log can say of it, on each engine: it
// runs only when it is to run here, its end is recorded, and a call that
// does not run ends with the ending and text a door translates.
func TestDriveEndsEachCallAsTheLogSays(t *testing.T) {
	tests := []struct {
		name string
		// setup writes what the log says of the call before it comes.
		setup func(t *testing.T, lc *Lifecycle)
		tier  sm.Tier
		// expiry is how long the call's approval request lasts; 0: an hour.
		expiry time.Duration
		ask    func(lc *Lifecycle, cancel context.CancelFunc) Ask
		// result is how the run ends, when it runs.
		result Result
		ending Ending
		runs   int
		state  sm.State // the effect's state once the flow ended
		text   string   // what End.Text says, "" for a run
	}{
		{name: "new, committed", tier: sm.Compensable, result: Result{Value: []byte(`{"ok":1}`)},
			ending: Ran, runs: 1, state: sm.Committed},
		{name: "new, failed", tier: sm.Compensable, result: Result{Failed: "exit status 3"},
			ending: Ran, runs: 1, state: sm.Pending},
		{name: "failed before, retried", tier: sm.Compensable, setup: ran(Result{Failed: "exit status 1"}),
			result: Result{Value: []byte(`{}`)}, ending: Ran, runs: 1, state: sm.Committed},
		{name: "committed before, replayed", tier: sm.Compensable, setup: ran(Result{Value: []byte(`{"ok":1}`)}),
			ending: Replay, state: sm.Replayed, text: "replayed effect 2 (replay of 1): deploy did not run again"},
		{name: "unsettled: left executing", tier: sm.Compensable, result: Result{Unsettled: true},
			ending: Ran, runs: 1, state: sm.Executing},
		{name: "executing, live owner", tier: sm.Compensable, setup: startedBy(model.NewOwner(time.Now())),
			ending: InProgress, state: sm.Executing, text: "effect 1 is executing (pid"},
		{name: "in doubt", tier: sm.Compensable, setup: func(t *testing.T, lc *Lifecycle) { startedBy(deadOwner(t))(t, lc) },
			ending: InDoubt, state: sm.Executing, text: "effect 1 is in doubt: its owner (pid"},
		{name: "in doubt, reclaimed", tier: sm.Compensable, setup: func(t *testing.T, lc *Lifecycle) { startedBy(deadOwner(t))(t, lc) },
			ask: func(*Lifecycle, context.CancelFunc) Ask {
				return Ask{Door: door, Wait: time.Minute, Reclaim: "checked"}
			},
			result: Result{Value: []byte(`{}`)}, ending: Ran, runs: 1, state: sm.Committed},
		{name: "irreversible, approved while it waits", tier: sm.Irreversible, ask: whenWaiting(func(lc *Lifecycle, id uint64) error {
			_, err := lc.Log.Approve(context.Background(), id, model.Change{Actor: "alice"})
			return err
		}), result: Result{Value: []byte(`{}`)}, ending: Ran, runs: 1, state: sm.Committed},
		{name: "irreversible, rejected while it waits", tier: sm.Irreversible, ask: whenWaiting(func(lc *Lifecycle, id uint64) error {
			_, err := lc.Log.Reject(context.Background(), id, model.Change{Actor: "bob", Reason: "not now"})
			return err
		}), ending: Rejected, state: sm.Rejected,
			text: "effect 1 (deploy) was rejected by bob (not now); it did not run, and session s is halted until a person resumes it"},
		{name: "rejected before", tier: sm.Irreversible, setup: func(t *testing.T, lc *Lifecycle) {
			c, err := lc.Intercept(t.Context(), request(sm.Irreversible, `{}`))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lc.Log.Reject(t.Context(), c.Effect.ID, model.Change{Actor: "bob"}); err != nil {
				t.Fatal(err)
			}
		}, ending: Rejected, state: sm.Rejected, text: "effect 1 (deploy) was rejected by bob; it did not run"},
		{name: "irreversible, its request expires", tier: sm.Irreversible, expiry: 50 * time.Millisecond, ending: Expired, state: sm.Pending, text: "effect 1 (deploy): its approval request expired; it did not run: run the same call again to ask again"},
		{name: "irreversible, no decision within the wait", tier: sm.Irreversible,
			ask: func(*Lifecycle, context.CancelFunc) Ask {
				return Ask{Door: door, Wait: 50 * time.Millisecond}
			}, ending: Undecided, state: sm.Pending,
			text: "effect 1 (deploy) awaits a person's approval, and no decision came within 1m: it did not run. Its request stays open (`undolog approve 1`, or `undolog reject 1`): once approved, call deploy again"},
		{name: "irreversible, interrupted while it waits", tier: sm.Irreversible,
			ask: func(_ *Lifecycle, cancel context.CancelFunc) Ask {
				return Ask{Door: door, Wait: time.Minute, Note: func(string) { cancel() }}
			}, ending: Interrupted, state: sm.Pending,
			text: "effect 1 (deploy) was not run: interrupted while it waited for approval; its request stands (`undolog approve 1`, or `undolog reject 1`): once approved, call deploy again"},
		{name: "irreversible, its session closes while it waits", tier: sm.Irreversible, ask: whenWaiting(func(lc *Lifecycle, id uint64) error {
			_, err := lc.Log.SetSessionState(context.Background(), "s", sm.SessionCompleted, model.Change{Actor: "alice"})
			return err
		}), ending: Abandoned, state: sm.Pending,
			text: `effect 1 (deploy): session "s" is completed and its approval request was closed; it did not run`},
		{name: "irreversible, taken up by another process while it waits", tier: sm.Irreversible, ask: whenWaiting(func(lc *Lifecycle, id uint64) error {
			if _, err := lc.Log.Approve(context.Background(), id, model.Change{Actor: "alice"}); err != nil {
				return err
			}
			_, err := lc.Log.Start(context.Background(), id, model.Change{Actor: "other", Owner: model.NewOwner(time.Now()).WithLease(time.Now().Add(time.Minute))})
			return err
		}), ending: Taken, state: sm.Executing, text: "effect 1 (deploy) was taken up by another process first (it is executing); retry it later"},
	}
	for engine, open := range engineLogs {
		for _, tt := range tests {
			t.Run(engine+"/"+tt.name, func(t *testing.T) {
				log, _ := open(t)
				lc := &Lifecycle{Log: log}
				if tt.setup != nil {
					tt.setup(t, lc)
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				ask := Ask{Door: door, Wait: time.Minute}
				if tt.ask != nil {
					ask = tt.ask(lc, cancel)
				}
				req := request(tt.tier, `{}`)
				if tt.expiry > 0 {
					req.ApprovalTimeout = tt.expiry
				}
				c, err := lc.Intercept(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				r := &runner{result: tt.result}
				end, err := lc.Drive(ctx, c, ask, r.run)
				if err != nil {
					t.Fatal(err)
				}
				if end.Ending != tt.ending || r.runs != tt.runs {
					t.Fatalf("ended %s after %d runs, want %s after %d", end.Ending, r.runs, tt.ending, tt.runs)
				}
				if text := end.Text(door); !strings.HasPrefix(text, tt.text) || (tt.text == "") != (text == "") {
					t.Fatalf("text %q, want %q", text, tt.text)
				}
				d, err := log.GetEffect(t.Context(), c.Effect.ID)
				if err != nil || d.Effect.State != tt.state {
					t.Fatalf("effect %d is %s (%v), want %s", c.Effect.ID, d.Effect.State, err, tt.state)
				}
				if tt.ending == Ran && tt.state == sm.Committed && string(d.Effect.Result) != string(tt.result.Value) {
					t.Fatalf("committed with %s, want %s", d.Effect.Result, tt.result.Value)
				}
				if tt.state == sm.Pending && tt.ending == Ran && d.Effect.Error != tt.result.Failed {
					t.Fatalf("failed with %q, want %q", d.Effect.Error, tt.result.Failed)
				}
			})
		}
	}
}

// ran leaves the call run once, ended as r says.
func ran(r Result) func(t *testing.T, lc *Lifecycle) {
	return func(t *testing.T, lc *Lifecycle) {
		c, err := lc.Intercept(t.Context(), request(sm.Compensable, `{}`))
		if err != nil {
			t.Fatal(err)
		}
		if end, err := lc.Drive(t.Context(), c, Ask{Door: door}, (&runner{result: r}).run); err != nil || end.Ending != Ran {
			t.Fatalf("setup: %s %v", end.Ending, err)
		}
	}
}

// whenWaiting asks the flow to tell, once the call waits for a decision,
// another process (here: the same log, written directly) what to do.
func whenWaiting(other func(lc *Lifecycle, id uint64) error) func(*Lifecycle, context.CancelFunc) Ask {
	return func(lc *Lifecycle, _ context.CancelFunc) Ask {
		return Ask{Door: door, Wait: time.Minute, Note: func(text string) {
			if !strings.Contains(text, "awaits approval") {
				return
			}
			if err := other(lc, 1); err != nil {
				panic(err)
			}
		}}
	}
}

// A door that runs the call itself between two processes (a coding agent's
// hooks) begins it in one and records its end in another: the end is
// recorded only by an adopter that names the owner that began it.
func TestBeginHereFinishInAnotherProcess(t *testing.T) {
	for engine, open := range engineLogs {
		t.Run(engine, func(t *testing.T) {
			log, again := open(t)
			before := &Lifecycle{Log: log}
			c, err := before.Intercept(t.Context(), request(sm.Compensable, `{}`))
			if err != nil {
				t.Fatal(err)
			}
			end, err := before.Begin(t.Context(), c, Ask{Door: door, Wait: time.Minute})
			if err != nil || end.Ending != Ran {
				t.Fatalf("begin: %s %v", end.Ending, err)
			}
			if err := before.Finish(t.Context(), c, Result{Unsettled: true}); err != nil {
				t.Fatal(err)
			}
			id, owner := c.Effect.ID, c.Owner

			after := &Lifecycle{Log: again()}
			if _, err := after.Adopt(t.Context(), id, model.NewOwner(time.Now()), "agent"); !errors.Is(err, model.ErrInProgress) {
				t.Fatalf("adopted by an owner that did not begin it: %v", err)
			}
			adopted, err := after.Adopt(t.Context(), id, owner, "agent")
			if err != nil {
				t.Fatal(err)
			}
			if err := after.Finish(t.Context(), adopted, Result{Value: []byte(`{"done":true}`)}); err != nil {
				t.Fatal(err)
			}
			d, err := log.GetEffect(t.Context(), id)
			if err != nil || d.Effect.State != sm.Committed || string(d.Effect.Result) != `{"done":true}` {
				t.Fatalf("effect %d: %s %s %v, want committed with its result", id, d.Effect.State, d.Effect.Result, err)
			}
			if _, err := after.Adopt(t.Context(), id, owner, "agent"); !errors.Is(err, model.ErrInProgress) {
				t.Fatalf("adopted once recorded: %v", err)
			}
		})
	}
}

// A round that awaits input (Result.Awaiting) ends nothing: the call stays
// executing, its lease renewed, and a later Finish records its end.
func TestFinishAwaitingKeepsTheCallRunning(t *testing.T) {
	for engine, open := range engineLogs {
		t.Run(engine, func(t *testing.T) {
			log, _ := open(t)
			lc := &Lifecycle{Log: log, Lease: 300 * time.Millisecond}
			c, err := lc.Intercept(t.Context(), request(sm.Compensable, `{}`))
			if err != nil {
				t.Fatal(err)
			}
			if end, err := lc.Begin(t.Context(), c, Ask{Door: door}); err != nil || end.Ending != Ran {
				t.Fatalf("begin: %s %v", end.Ending, err)
			}
			if err := lc.Finish(t.Context(), c, Result{Awaiting: true}); err != nil {
				t.Fatal(err)
			}
			lease := func() time.Time {
				d, err := log.GetEffect(t.Context(), c.Effect.ID)
				if err != nil || d.Effect.State != sm.Executing {
					t.Fatalf("between rounds: %s %v, want executing", d.Effect.State, err)
				}
				return d.Effect.Owner.LeaseUntil
			}
			first := lease()
			time.Sleep(400 * time.Millisecond)
			if renewed := lease(); !renewed.After(first) {
				t.Fatalf("the lease was not renewed between rounds: %s, then %s", first, renewed)
			}
			if err := lc.Finish(t.Context(), c, Result{Value: []byte(`{"done":true}`)}); err != nil {
				t.Fatal(err)
			}
			if d, err := log.GetEffect(t.Context(), c.Effect.ID); err != nil || d.Effect.State != sm.Committed {
				t.Fatalf("after the last round: %s %v, want committed", d.Effect.State, err)
			}
		})
	}
}

// A call whose owner died while it awaited the client's input is failed by
// the next intercept of it, and runs again as the same effect: its server
// had not acted. One whose next round was sent is in doubt.
func TestAbandonedRoundRunsAgainNotInDoubt(t *testing.T) {
	for engine, open := range engineLogs {
		t.Run(engine, func(t *testing.T) {
			log, again := open(t)
			// A round ends, awaiting input, in a proxy that dies (its owner dead).
			awaiting := func(args string, sent bool) uint64 {
				req := request(sm.Compensable, args)
				req.Owner = deadOwner(t)
				dead := &Lifecycle{Log: log}
				c, err := dead.Intercept(t.Context(), req)
				if err != nil || !c.Started {
					t.Fatalf("setup: %+v %v", c, err)
				}
				if err := dead.Finish(t.Context(), c, Result{Awaiting: true}); err != nil {
					t.Fatal(err)
				}
				if sent {
					if err := dead.SendingInput(t.Context(), c); err != nil {
						t.Fatal(err)
					}
				}
				c.StopRenewing()
				return c.Effect.ID
			}
			lc := &Lifecycle{Log: again()}

			id := awaiting(`{"n":1}`, false)
			d, err := lc.Log.GetEffect(t.Context(), id)
			if since, ok := effectlog.AwaitingInput(d.History); err != nil || !ok || since.IsZero() {
				t.Fatalf("between rounds: awaiting %v since %s (%v): %+v", ok, since, err, d.History)
			}
			c, err := lc.Intercept(t.Context(), request(sm.Compensable, `{"n":1}`))
			if err != nil || !c.InDoubt() {
				t.Fatalf("intercept: %+v %v", c, err)
			}
			var notes []string
			end, err := lc.Begin(t.Context(), c, Ask{Door: door, Note: func(s string) { notes = append(notes, s) }})
			if err != nil || end.Ending != Ran || c.Effect.ID != id || c.Outcome != model.OutcomeRetry || !c.Started {
				t.Fatalf("begin: %s %v, effect %d %s", end.Ending, err, c.Effect.ID, c.Outcome)
			}
			if len(notes) != 1 || !strings.Contains(notes[0], "abandoned between input rounds") {
				t.Fatalf("notes %q", notes)
			}
			if err := lc.Finish(t.Context(), c, Result{Value: []byte(`{"done":true}`)}); err != nil {
				t.Fatal(err)
			}
			d, _ = lc.Log.GetEffect(t.Context(), id)
			failed := 0
			for _, r := range d.History {
				if r.To == string(sm.Pending) && strings.HasPrefix(r.Error, "abandoned between input rounds: it awaited the client's input since ") {
					failed++
				}
			}
			if d.Effect.State != sm.Committed || failed != 1 {
				t.Fatalf("effect %d %s, %d abandoned records: %+v", id, d.Effect.State, failed, d.History)
			}

			id = awaiting(`{"n":2}`, true)
			c, err = lc.Intercept(t.Context(), request(sm.Compensable, `{"n":2}`))
			if err != nil {
				t.Fatal(err)
			}
			if end, err := lc.Begin(t.Context(), c, Ask{Door: door}); err != nil || end.Ending != InDoubt {
				t.Fatalf("a call whose next round was sent: %s %v, want in doubt", end.Ending, err)
			}
			if d, _ := lc.Log.GetEffect(t.Context(), id); d.Effect.State != sm.Executing {
				t.Fatalf("effect %d %s, want executing", id, d.Effect.State)
			}
		})
	}
}
