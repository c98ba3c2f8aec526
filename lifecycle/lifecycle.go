// Package lifecycle runs one call through the effect log, for exec and the
// proxy alike: intercept it, classify what the log says about it, wait for
// a decision on an irreversible call without holding the log, start it,
// record its end, and reclaim a call left in doubt by a dead owner. The
// callers keep only what is theirs: how a call runs and what the user reads.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// Poll is how often a waiting call looks at a log that cannot tell of
// changes (a file); it opens the log only for each look, so decisions from
// other processes always get through. On a log that can (PostgreSQL), the
// wait looks when told, and after the log's slow poll at most.
const Poll = 50 * time.Millisecond

// Lifecycle runs calls through one log.
type Lifecycle struct {
	Log effectlog.Log
	// Now is the clock of owners, decisions and wait bounds; nil: time.Now.
	Now func() time.Time
}

func (l *Lifecycle) now() time.Time {
	if l.Now == nil {
		return time.Now()
	}
	return l.Now()
}

// Announce says, when a wait begins, when the request expires (Expires is
// false when it has no expiry) and how long the wait lasts at most.
type Announce struct {
	ExpiresIn time.Duration
	Expires   bool
	WaitsFor  time.Duration
}

// Verdict is what the log says about an intercepted call.
type Verdict int

// Verdicts of an intercept.
const (
	New        Verdict = iota // a new effect: run it (once approved if irreversible)
	Retry                     // an effect that failed, pending again: run it again
	Replayed                  // committed before: its result is the answer, nothing runs
	Rejected                  // rejected (by a person or by expiry): the answer stands
	Pending                   // the same call awaits a decision elsewhere: wait for it too
	InProgress                // the same call is executing with a live owner (or on another host)
	InDoubt                   // the same call is executing and its owner died (or none is recorded)
	Closed                    // the session accepts no new effects: nothing runs
	Safe                      // safe tier: nothing written, run directly
)

var verdictNames = [...]string{"new", "retry", "replayed", "rejected", "pending", "in_progress", "in_doubt", "closed", "safe"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Call is one call in its lifecycle.
type Call struct {
	Verdict Verdict
	// Effect is the call's effect (for a replay, the replay record).
	Effect model.Effect
	// Started: the intercept moved it to executing, owned by Owner.
	Started bool
	// Owner is this process as the call's owner, once it starts.
	Owner *model.Owner
	// Liveness is how the executing owner was judged (InProgress, InDoubt).
	Liveness model.Liveness
	actor    string
}

// NeedsDecision tells whether the call must wait for a decision before it
// starts: an irreversible call that is to run and that the intercept did not
// start (new, retried, reclaimed, or awaiting a decision elsewhere).
func (c *Call) NeedsDecision() bool {
	switch c.Verdict {
	case New, Retry, Pending:
		return !c.Started && c.Effect.Tier == sm.Irreversible
	}
	return false
}

// Intercept registers the call and classifies it. A call that may run now
// starts in its intercept (one transaction fewer), owned by req.Owner, or by
// this process from now when the caller passes none. A session that accepts
// no new effects is the Closed verdict with the log's error.
func (l *Lifecycle) Intercept(ctx context.Context, req effectlog.InterceptRequest) (*Call, error) {
	if req.Owner == nil {
		req.Owner = model.NewOwner(l.now())
	}
	req.Start = true
	c := &Call{Owner: req.Owner, actor: req.Actor}
	res, err := l.Log.Intercept(ctx, req)
	if err != nil {
		if errors.Is(err, model.ErrSessionNotActive) {
			c.Verdict = Closed
			return c, err
		}
		return nil, err
	}
	c.Effect = res.Effect
	c.Verdict = classify(res)
	c.Started = (c.Verdict == New || c.Verdict == Retry) && c.Effect.State == sm.Executing
	if c.Verdict == InProgress || c.Verdict == InDoubt {
		c.Liveness = c.Effect.Owner.Liveness()
		if c.Liveness == model.OwnerNone || c.Liveness == model.OwnerDead {
			c.Verdict = InDoubt
		} else {
			c.Verdict = InProgress
		}
	}
	return c, nil
}

func classify(res effectlog.InterceptResult) Verdict {
	switch res.Outcome {
	case model.OutcomeReplayed:
		return Replayed
	case model.OutcomeRejected:
		return Rejected
	case model.OutcomeRetry:
		return Retry
	case model.OutcomeSafe:
		return Safe
	case model.OutcomeInProgress:
		if res.Effect.State == sm.Executing {
			return InProgress // judged live or in doubt by the caller
		}
		return Pending
	}
	return New
}

// WaitOutcome is how a wait for a decision ended.
type WaitOutcome int

// Wait outcomes.
const (
	Approved    WaitOutcome = iota // go ahead: Start it
	Refused                        // rejected, by a person or by expiry
	Taken                          // another caller moved the effect on
	Abandoned                      // the session closed the request: nobody will decide
	TimedOut                       // no decision within the wait's bound; the request stays open
	Interrupted                    // the context ended; the request stays open
)

// Waited is the end of a wait and the effect as last read.
type Waited struct {
	Outcome WaitOutcome
	Detail  model.EffectDetail
}

// Wait looks at the log until the call's effect is decided, the bound has
// passed (even on a request opened earlier that expires later), or ctx
// ends: each time the log's change feed moves (Log.WaitChange), every Poll
// on a log that cannot tell. Once the first look finds it undecided,
// announce (if given) is called with when the request expires and how
// long this wait lasts.
func (l *Lifecycle) Wait(ctx context.Context, c *Call, bound time.Duration, announce func(Announce)) (Waited, error) {
	giveUp := l.now().Add(bound)
	for {
		// The feed's position first: a decision recorded after it wakes the wait.
		position, err := l.Log.LastChange(ctx)
		var d model.EffectDetail
		if err == nil {
			d, err = l.Log.GetEffect(ctx, c.Effect.ID)
		}
		if err != nil && ctx.Err() != nil {
			return Waited{Interrupted, model.EffectDetail{Effect: c.Effect}}, nil // the look was cut short: the request stands
		} else if err != nil {
			return Waited{}, err
		}
		switch d.Decision(l.now()) {
		case model.DecisionApproved:
			return Waited{Approved, d}, nil
		case model.DecisionRejected:
			return Waited{Refused, d}, nil
		case model.DecisionTaken:
			return Waited{Taken, d}, nil
		case model.DecisionClosed:
			return Waited{Abandoned, d}, nil
		case model.DecisionExpired:
			if _, err := l.Log.ExpireApprovals(ctx, c.Effect.Session); err != nil {
				return Waited{}, err
			}
			continue
		}
		now := l.now()
		if !now.Before(giveUp) {
			return Waited{TimedOut, d}, nil
		}
		if announce != nil {
			var expiresIn time.Duration
			expires := false
			if a := d.Approval; a != nil && a.ExpiresAt != nil {
				expiresIn, expires = a.ExpiresAt.Sub(now), true
			}
			announce(Announce{ExpiresIn: expiresIn, Expires: expires, WaitsFor: giveUp.Sub(now)})
			announce = nil
		}
		// Look again at the bound or the request's expiry, if sooner than a change.
		next := giveUp.Sub(now)
		if a := d.Approval; a != nil && a.ExpiresAt != nil {
			next = min(next, a.ExpiresAt.Sub(now))
		}
		wait, cancel := context.WithTimeout(ctx, max(next, 0))
		l.Log.WaitChange(wait, position, Poll)
		cancel()
		if ctx.Err() != nil {
			return Waited{Interrupted, d}, nil
		}
	}
}

// Start moves an approved (or compensable) call to executing, owned by its
// Owner from now. An effect another caller started meanwhile is
// sm.ErrInvalidStateTransition.
func (l *Lifecycle) Start(ctx context.Context, c *Call) error {
	if c.Started {
		return nil
	}
	c.Owner.StartedAt = l.now().UTC()
	e, err := l.Log.Start(ctx, c.Effect.ID, model.Change{Actor: c.actor, Owner: c.Owner})
	if err != nil {
		return err
	}
	c.Effect, c.Started = e, true
	return nil
}

// Commit records the call's success with its result snapshot. The call has
// run: an interrupt (ctx cancelled) does not stop its recording.
func (l *Lifecycle) Commit(ctx context.Context, c *Call, result []byte) error {
	e, err := l.Log.Commit(context.WithoutCancel(ctx), c.Effect.ID, model.Change{Actor: c.actor, Result: result})
	if err == nil {
		c.Effect = e
	}
	return err
}

// Fail records that the call failed, with what went wrong: a repeat runs it
// again. Like Commit, it records what happened even once ctx is cancelled.
func (l *Lifecycle) Fail(ctx context.Context, c *Call, why string) error {
	e, err := l.Log.Fail(context.WithoutCancel(ctx), c.Effect.ID, model.Change{Actor: c.actor, Error: why})
	if err == nil {
		c.Effect = e
	}
	return err
}

// Reclaim fails an in-doubt call back to pending so that this caller can
// run it, only while the owner judged dead still owns it: another process
// may have reclaimed it since the intercept looked (then an error that
// TakenMeanwhile recognises). An irreversible call needs a decision again:
// the run in doubt used its approval.
func (l *Lifecycle) Reclaim(ctx context.Context, c *Call, reason string) error {
	if c.Verdict != InDoubt {
		return fmt.Errorf("%w: effect %d is %s, not in doubt", model.ErrInProgress, c.Effect.ID, c.Verdict)
	}
	expect, gone := c.Effect.Owner, "no owner recorded"
	if expect == nil {
		expect = &model.Owner{}
	} else {
		gone = fmt.Sprintf("owner pid %d on %s gone", expect.PID, expect.Host)
	}
	e, err := l.Log.Fail(ctx, c.Effect.ID, model.Change{Actor: c.actor, Error: "in doubt: " + gone, Reason: reason, ExpectOwner: expect})
	if err != nil {
		return err
	}
	c.Effect, c.Verdict = e, Retry
	return nil
}

// TakenMeanwhile tells whether a Start or Reclaim was refused because
// another process moved the effect on first.
func TakenMeanwhile(err error) bool {
	return errors.Is(err, model.ErrInProgress) || errors.Is(err, sm.ErrInvalidStateTransition)
}
