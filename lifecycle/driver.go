package lifecycle

// The flow: the steps of this package in the one order every front door
// takes them. A door intercepts the call (Intercept, with what it does
// around it: a capture, a session choice), then Drive decides, waits for
// a decision, reclaims a call in doubt, starts it, has the door run it and
// records its end. A door that runs the call itself between two processes
// (a coding agent's hooks, before and after its own tool) takes Begin in
// the first and, through Adopt, Finish in the second. Either way the door
// only translates: how a call runs, and the End (with its Text) into its
// own answers (exit codes, JSON-RPC results).

import (
	"context"
	"fmt"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// Ask is what a front door asks of the flow for a call.
type Ask struct {
	// Door names the door in the flow's notes and texts.
	Door Door
	// Wait bounds a wait for a decision on an irreversible call (the
	// request stays open after it).
	Wait time.Duration
	// Reclaim, if set, is the reason recorded when a call in doubt is
	// reclaimed to run here (exec's --retry-in-doubt); unset, a call in
	// doubt ends the flow, for a person to resolve.
	Reclaim string
	// Note, if set, hears the flow's notes: that a wait for a decision
	// begins, that a call in doubt was reclaimed.
	Note func(text string)
}

// Ending is how the flow ended for a call.
type Ending int

// Endings of the flow.
const (
	Ran         Ending = iota // it started here and its door ran it
	Replay                    // committed before: its result is the answer, nothing ran
	Rejected                  // a person rejected it: the answer stands
	Expired                   // its approval request expired undecided: nothing ran; the same call asks again
	InProgress                // the same call is executing with a live owner (on another host: its lease holds)
	InDoubt                   // the same call is executing and its owner is gone; nobody reclaimed it
	Taken                     // another process moved it on first (started, reclaimed or decided it)
	Abandoned                 // its session stopped accepting calls and closed its approval request
	Undecided                 // no decision within the wait's bound: the request stays open
	Interrupted               // ctx ended while it waited for a decision, or before it started
)

var endingNames = [...]string{"ran", "replay", "rejected", "expired", "in_progress", "in_doubt", "taken", "abandoned", "undecided", "interrupted"}

func (e Ending) String() string {
	if int(e) < len(endingNames) {
		return endingNames[e]
	}
	return fmt.Sprintf("ending(%d)", int(e))
}

// End is how one call's flow ended, with what the log said that the texts
// name.
type End struct {
	Ending Ending
	Call   *Call
	// Detail is the effect as last read, its approval with it (Rejected,
	// Expired, Taken, Abandoned, Undecided).
	Detail model.EffectDetail
	// Session is the call's session as read for the text: a session a
	// rejection halted, one that closed the request (Abandoned).
	Session *model.Session
	// Waiting: Interrupted while it waited for a decision (else before it
	// started). Cause is why: the context's cause.
	Waiting bool
	Cause   error
	// Err is what the log said when another process moved it on (Taken).
	Err error
}

// Result is how a call's run ended, as its door saw it.
type Result struct {
	// Value is the result snapshot of a call that succeeded: Commit records it.
	Value []byte
	// Failed, if set, is why the call failed or did not run after all:
	// Fail records it, and the same call runs again.
	Failed string
	// Unsettled: its end is not known here now (a server that answered
	// nothing readable, a door that runs the call in another process). It
	// stays executing, its lease no longer renewed, so in doubt once that
	// lapses, until Finish records the end (here later, or after Adopt).
	Unsettled bool
	// Awaiting: a round of the call ended and its answer asks the client
	// for input (MCP's input_required); the call is not over. Its history
	// says it awaits the client's input (effectlog.InputRound), and it
	// stays executing, its lease renewed and the log let go, until a
	// later round (SendingInput) and its Finish. Should its owner die
	// meanwhile, the next intercept of the call fails it and runs it again
	// (Begin): the server had not acted.
	Awaiting bool
}

// Drive runs an intercepted call to its end: Begin, then, if it is to run
// here, run and Finish. An error is the log's (the call's end not recorded:
// a *NotRecorded).
func (l *Lifecycle) Drive(ctx context.Context, c *Call, ask Ask, run func(context.Context, *Call) Result) (End, error) {
	end, err := l.Begin(ctx, c, ask)
	if err != nil || end.Ending != Ran {
		return end, err
	}
	return end, l.Finish(ctx, c, run(ctx, c))
}

// Begin takes an intercepted call up to its run: it ends the flow for a
// call that does not run here (End.Ending is not Ran), reclaims a call in
// doubt if asked to, waits for a decision on an irreversible call, and
// starts the call. A call that Begin leaves Ran is started here, its lease
// renewed: the door runs it, then calls Finish.
func (l *Lifecycle) Begin(ctx context.Context, c *Call, ask Ask) (End, error) {
	end := End{Ending: Ran, Call: c}
	switch {
	case c.Outcome == model.OutcomeReplayed:
		end.Ending = Replay
		return end, nil
	case c.Outcome == model.OutcomeRejected:
		return l.refused(ctx, end)
	case c.Executing() && !c.InDoubt():
		end.Ending = InProgress
		return end, nil
	case c.InDoubt():
		gone := c.Effect.Owner.Gone(c.Liveness)
		abandoned, err := l.abandonedRound(ctx, c)
		if err != nil {
			return end, err
		}
		var note string
		switch {
		case abandoned != "":
			// Its server asked the client for input and had not acted:
			// nothing is in doubt, and it runs again as a retry.
			err = l.reclaim(ctx, c, abandoned, "")
			note = fmt.Sprintf("effect %d (%s) was %s; running it again", c.Effect.ID, c.Effect.Tool, abandoned)
		case ask.Reclaim == "":
			end.Ending = InDoubt
			return end, nil
		default:
			err = l.Reclaim(ctx, c, ask.Reclaim)
			note = fmt.Sprintf("effect %d was in doubt (%s); running it again", c.Effect.ID, gone)
		}
		if TakenMeanwhile(err) {
			end.Ending, end.Err = Taken, err
			return end, nil
		} else if err != nil {
			return end, err
		}
		if ask.Note != nil {
			ask.Note(note)
		}
	}
	if c.NeedsDecision() {
		w, err := l.Wait(ctx, c, ask.Wait, func(a Announce) {
			if ask.Note != nil {
				ask.Note(a.text(c.Effect, ask.Door))
			}
		})
		if err != nil {
			return end, err
		}
		end.Detail = w.Detail
		switch w.Ending {
		case Rejected:
			return l.refused(ctx, end)
		case Taken:
			end.Ending = Taken
			return end, nil
		case Abandoned:
			end.Ending = Abandoned
			if s, err := l.Log.GetSession(ctx, c.Effect.Session); err == nil {
				end.Session = &s
			}
			return end, nil
		case Undecided:
			end.Ending = Undecided
			return end, nil
		case Interrupted:
			end.Ending, end.Waiting, end.Cause = Interrupted, true, context.Cause(ctx)
			return end, nil
		}
	}
	if c.Started {
		return end, nil
	}
	if ctx.Err() != nil {
		// Interrupted before its start: the effect is left as it is (an
		// approval is for the run that has not happened), and a repeat runs it.
		end.Ending, end.Cause = Interrupted, context.Cause(ctx)
		return end, nil
	}
	if err := l.Start(ctx, c); TakenMeanwhile(err) {
		end.Ending, end.Err = Taken, err
		return end, nil
	} else if err != nil {
		return end, fmt.Errorf("effect %d could not start: %w", c.Effect.ID, err)
	}
	return end, nil
}

// refused ends the flow of a call a person rejected, or whose request
// expired: the approval says which, and the session whether it halted.
func (l *Lifecycle) refused(ctx context.Context, end End) (End, error) {
	d, err := l.Log.GetEffect(ctx, end.Call.Effect.ID)
	if err != nil {
		return end, err
	}
	end.Detail, end.Ending = d, Rejected
	if a := d.Approval; a != nil && a.Outcome == model.ApprovalTimedOut {
		end.Ending = Expired
		return end, nil
	}
	if s, err := l.Log.GetSession(ctx, d.Effect.Session); err == nil && s.State == sm.SessionHalted {
		end.Session = &s
	}
	return end, nil
}

// Finish records the end of a call that Begin started: committed with its
// result, failed, or left unsettled (its lease stopped); a round that
// awaits input ends nothing. It records also once ctx is cancelled: the
// call has run. A record that fails is a *NotRecorded.
func (l *Lifecycle) Finish(ctx context.Context, c *Call, r Result) error {
	id := c.Effect.ID
	switch {
	case r.Awaiting:
		defer c.letLogGo()
		return l.inputRound(ctx, c, true)
	case r.Unsettled:
		return c.StopRenewing()
	case r.Failed != "":
		if err := l.Fail(ctx, c, r.Failed); err != nil {
			return &NotRecorded{ID: id, Failed: r.Failed, Err: err}
		}
		return nil
	}
	err := l.Commit(ctx, c, r.Value)
	if err == nil {
		return nil
	}
	nr := &NotRecorded{ID: id, Err: err}
	if d, gerr := l.Log.GetEffect(context.WithoutCancel(ctx), id); gerr == nil && d.Effect.State != sm.Executing {
		// Another run took the call up meanwhile (a reclaim after this
		// one's lease ran out): it is not in doubt, but it ran twice.
		nr.Now = d.Effect.State
	}
	return nr
}

// NotRecorded is the end of a call that ran but that the log did not take:
// the call stays in doubt, unless another process took it up meanwhile
// (Now is its state then: both runs acted).
type NotRecorded struct {
	ID     uint64
	Failed string   // why it failed, when its failure was not recorded; "": its success
	Now    sm.State // the effect's state, when another process took it up meanwhile
	Err    error
}

func (e *NotRecorded) Error() string {
	switch {
	case e.Now != "":
		return fmt.Sprintf("the call succeeded, but another run took effect %d up meanwhile and it is %s now: "+
			"this run's call ran beside that one's: check what both did", e.ID, e.Now)
	case e.Failed != "":
		return fmt.Sprintf("effect %d ended (%s) but recording it failed; it is in doubt: %v", e.ID, e.Failed, e.Err)
	}
	return fmt.Sprintf("effect %d succeeded but its commit failed; it is in doubt: %v", e.ID, e.Err)
}

func (e *NotRecorded) Unwrap() error { return e.Err }

// Adopt takes up, in another process, a call that Begin started and left
// unsettled (Result.Unsettled), to Finish it: owner is the one Begin gave
// it (Call.Owner), which recording its end expects to still hold it.
func (l *Lifecycle) Adopt(ctx context.Context, id uint64, owner *model.Owner, actor string) (*Call, error) {
	d, err := l.Log.GetEffect(ctx, id)
	if err != nil {
		return nil, err
	}
	if d.Effect.State != sm.Executing || !d.Effect.Owner.Same(owner) {
		return nil, fmt.Errorf("%w: effect %d is %s, owned by %s: not the call started by %s", model.ErrInProgress, id, d.Effect.State, d.Effect.Owner, owner)
	}
	// No Outcome: this process did not intercept it.
	return &Call{Effect: d.Effect, Undo: d.Undo, Started: true, Owner: owner.Identity(), actor: actor}, nil
}
