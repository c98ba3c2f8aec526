// Package lifecycle owns the call flow every front door takes (exec, the
// proxy, and the doors to come): intercept a call, say what the log decided,
// wait for a decision on an irreversible call without holding the log,
// reclaim a call left in doubt, start it, renew its owner's lease while it
// runs, record its end, and the texts of each end of a call that did not
// run. Its steps are here, and their order in Drive (driver.go). The doors
// keep only what is theirs: how a call runs, and how an end is answered.
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
	// Now is the clock of owners, decisions, leases and wait bounds; nil: time.Now.
	Now func() time.Time
	// Lease is how long the lease of a call's owner lasts unless renewed;
	// a started call renews it every third of that until it ends. Zero:
	// model.DefaultLease.
	Lease time.Duration
	// Hold keeps a file log open from a call's start to its end while
	// nobody waits for it: the proxy's tools answer in milliseconds, and the
	// commit then reopens nothing. exec leaves it unset: its commands run for
	// longer than a reopen takes, and a process stopped mid-command (Ctrl-Z,
	// SIGSTOP) must not keep every other process out of the log.
	Hold bool
	// Unavailable, if set, hears of a wait's look that could not reach the
	// log's server (err), after which the wait tries again until its bound,
	// and of the server answering again (nil).
	Unavailable func(err error)
}

func (l *Lifecycle) lease() time.Duration {
	if l.Lease <= 0 {
		return model.DefaultLease
	}
	return l.Lease
}

// keepLease starts renewing the lease of a call that has started.
func (l *Lifecycle) keepLease(c *Call) {
	if c.Started && c.renewal == nil {
		c.renewal = KeepLease(l.Log, c.Effect.ID, c.Owner, l.lease(), l.Now)
	}
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

// Call is one call in its lifecycle.
type Call struct {
	// Outcome is what the intercept decided (a reclaim makes it a retry).
	Outcome model.Outcome
	// Effect is the call's effect (for a replay, the replay record).
	Effect model.Effect
	// Started: the intercept moved it to executing, owned by Owner.
	Started bool
	// Owner is this process as the call's owner, once it starts (without
	// its lease, which the log holds and renewals move).
	Owner *model.Owner
	// Liveness is how the owner of the same call executing was judged
	// (Executing).
	Liveness model.Liveness
	// Undo is the call's undo entry as Adopt read it (nil: none), for a
	// door that finishes it in another process: no second read of the log.
	Undo    *model.UndoEntry
	actor   string
	renewal *Renewal
	// kept ends the log's keeping for this call's next write (keepLog).
	kept func()
}

// keepLog asks the log to hold itself open, if its engine can
// (storage.Holder), for the call's next write: the end of a call that runs
// now, its intercept or start just written. The call's end (or
// StopRenewing) lets it go.
func (l *Lifecycle) keepLog(c *Call) {
	if c.kept != nil || !l.Hold {
		return
	}
	c.kept = l.Log.ExpectWrite()
}

// letLogGo ends what keepLog asked.
func (c *Call) letLogGo() {
	if c.kept != nil {
		c.kept()
		c.kept = nil
	}
}

// StopRenewing ends the renewals of the call's lease without recording an
// end: a call left executing (its outcome unknown) then lapses into doubt
// for other hosts once its lease runs out. Commit and Fail do it first.
func (c *Call) StopRenewing() error {
	c.letLogGo()
	return c.stopRenewal()
}

func (c *Call) stopRenewal() error {
	err := c.renewal.Stop()
	c.renewal = nil
	return err
}

// NeedsDecision tells whether the call must wait for a decision before it
// starts: an irreversible call that is to run and that the intercept did not
// start (new, retried, reclaimed, or awaiting a decision elsewhere).
func (c *Call) NeedsDecision() bool {
	if c.Started || c.Effect.Tier != sm.Irreversible {
		return false
	}
	switch c.Outcome {
	case model.OutcomeNew, model.OutcomePending, model.OutcomeRetry:
		return true
	case model.OutcomeInProgress:
		return c.Effect.State != sm.Executing
	}
	return false
}

// Executing tells whether the same call is executing under another owner,
// whose Liveness the intercept judged: still holding it, or InDoubt.
func (c *Call) Executing() bool {
	return c.Outcome == model.OutcomeInProgress && c.Effect.State == sm.Executing
}

// InDoubt tells whether the same call is executing and its owner is gone
// (died, its lease lapsed, or none recorded): it may or may not have taken
// effect.
func (c *Call) InDoubt() bool {
	switch c.Liveness {
	case model.OwnerNone, model.OwnerDead, model.OwnerLapsed:
		return c.Executing()
	}
	return false
}

// Intercept registers the call and says what the log decided. A call that
// may run now starts in its intercept (one transaction fewer), owned by
// req.Owner, or by this process from now when the caller passes none. The
// owner of the same call executing is judged (Liveness).
func (l *Lifecycle) Intercept(ctx context.Context, req effectlog.InterceptRequest) (*Call, error) {
	if req.Owner == nil {
		req.Owner = model.NewOwner(l.now())
	}
	req.Start = true
	c := &Call{Owner: req.Owner.Identity(), actor: req.Actor}
	req.Owner = c.Owner.WithLease(l.now().Add(l.lease()))
	l.keepLog(c) // from its write: a call that starts in it ends soon after
	res, err := l.Log.Intercept(ctx, req)
	if err != nil {
		c.letLogGo()
		return nil, err
	}
	c.Effect, c.Outcome = res.Effect, res.Outcome
	switch c.Outcome {
	case model.OutcomeNew, model.OutcomePending, model.OutcomeRetry:
		c.Started = c.Effect.State == sm.Executing
	}
	if !c.Started {
		c.letLogGo() // nothing runs now: a decision or another caller comes first
	}
	l.keepLease(c)
	if c.Executing() {
		c.Liveness = c.Effect.Owner.LivenessAt(l.now())
	}
	return c, nil
}

// Waited is how a wait for a decision ended, in the flow's endings (Ran:
// approved, go ahead; Rejected: rejected or its request expired; Taken,
// Abandoned, Undecided, Interrupted), and the effect as last read.
type Waited struct {
	Ending Ending
	Detail model.EffectDetail
}

// Wait looks at the log until the call's effect is decided, the bound has
// passed (even on a request opened earlier that expires later), or ctx
// ends: each time the log's change feed moves (Log.WaitChange), every Poll
// on a log that cannot tell. Once the first look finds it undecided,
// announce (if given) is called with when the request expires and how
// long this wait lasts.
func (l *Lifecycle) Wait(ctx context.Context, c *Call, bound time.Duration, announce func(Announce)) (Waited, error) {
	giveUp := l.now().Add(bound)
	fails := 0 // looks in a row that did not reach the log's server
	for {
		// The feed's position with the effect: a decision recorded after
		// the read wakes the wait.
		d, position, err := l.Log.GetEffectAndPosition(ctx, c.Effect.ID)
		if err != nil && ctx.Err() != nil {
			return Waited{Interrupted, model.EffectDetail{Effect: c.Effect}}, nil // the look was cut short: the request stands
		} else if errors.Is(err, model.ErrUnavailable) && l.now().Before(giveUp) {
			// A server restarting: the request stands, and the wait goes on.
			if fails++; l.Unavailable != nil && fails == 1 {
				l.Unavailable(err)
			}
			if effectlog.AfterUnavailable(ctx, fails-1) != nil {
				return Waited{Interrupted, model.EffectDetail{Effect: c.Effect}}, nil
			}
			continue
		} else if err != nil {
			return Waited{}, err
		}
		if fails > 0 && l.Unavailable != nil {
			l.Unavailable(nil)
		}
		fails = 0
		switch d.Decision(l.now()) {
		case model.DecisionApproved:
			return Waited{Ran, d}, nil
		case model.DecisionRejected:
			return Waited{Rejected, d}, nil
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
			return Waited{Undecided, d}, nil
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
// Owner from now under a lease that it renews until the call ends. An
// effect another caller started meanwhile is sm.ErrInvalidStateTransition.
func (l *Lifecycle) Start(ctx context.Context, c *Call) error {
	if c.Started {
		return nil
	}
	now := l.now().UTC()
	c.Owner.StartedAt = now
	l.keepLog(c)
	e, err := l.Log.Start(ctx, c.Effect.ID, model.Change{Actor: c.actor, Owner: c.Owner.WithLease(now.Add(l.lease()))})
	if err != nil {
		c.letLogGo()
		return err
	}
	c.Effect, c.Started = e, true
	l.keepLease(c)
	return nil
}

// Commit records the call's success with its result snapshot. The call has
// run: an interrupt (ctx cancelled) does not stop its recording. It is
// recorded only while the call's owner still holds the effect: one another
// host reclaimed (this owner's lease lapsed) is model.ErrInProgress.
func (l *Lifecycle) Commit(ctx context.Context, c *Call, result []byte) error {
	c.stopRenewal()
	defer c.letLogGo() // once written: the log lingers as after any write
	return l.settle(ctx, c, sm.Committed, func(ctx context.Context) (model.Effect, error) {
		return l.Log.Commit(ctx, c.Effect.ID, model.Change{Actor: c.actor, Result: result, ExpectOwner: c.expectSelf()})
	})
}

// Fail records that the call failed, with what went wrong: a repeat runs it
// again. Like Commit, it records what happened even once ctx is cancelled.
func (l *Lifecycle) Fail(ctx context.Context, c *Call, why string) error {
	c.stopRenewal()
	defer c.letLogGo() // once written: the log lingers as after any write
	return l.settle(ctx, c, sm.Pending, func(ctx context.Context) (model.Effect, error) {
		return l.Log.Fail(ctx, c.Effect.ID, model.Change{Actor: c.actor, Error: why, ExpectOwner: c.expectSelf()})
	})
}

// settleRetryMax is the longest pause between two tries of recording a
// call's end.
const settleRetryMax = 2 * time.Second

// settle records a call's end (write moves it to `to`), also once ctx is
// cancelled, trying again while the log fails for what is not the call's
// doing (a server down for a moment, the log busy): a call that ran is not
// left in doubt for that while its lease holds, and its owner still holds
// it (the write checks). A write whose answer was lost (in doubt) may have
// been made: the effect is looked at before it is made again.
func (l *Lifecycle) settle(ctx context.Context, c *Call, to sm.State, write func(context.Context) (model.Effect, error)) error {
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(l.lease())
	if c.Owner != nil && !c.Owner.LeaseUntil.IsZero() {
		deadline = c.Owner.LeaseUntil
	}
	pause := 50 * time.Millisecond
	for {
		e, err := write(ctx)
		if err == nil {
			c.Effect = e
			return nil
		}
		if errors.Is(err, model.ErrInDoubt) {
			if d, gerr := l.Log.GetEffect(ctx, c.Effect.ID); gerr == nil && d.Effect.State == to && d.Effect.HistoryLen > c.Effect.HistoryLen {
				c.Effect = d.Effect
				return nil
			}
		}
		if !logFault(err) || time.Now().Add(pause).After(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, settleRetryMax)
	}
}

// logFault tells an error of the log's (its server, its disk, its lock)
// from the rules' answer about the call, which another try would not change.
func logFault(err error) bool {
	for _, answer := range []error{model.ErrNotFound, model.ErrInProgress, model.ErrConflict, model.ErrInvalidInput,
		model.ErrDenied, model.ErrCorrupt, model.ErrNewerSchema, model.ErrSessionNotActive, sm.ErrInvalidStateTransition} {
		if errors.Is(err, answer) {
			return false
		}
	}
	return true
}

// Reclaim fails an in-doubt call back to pending so that this caller can
// run it, only while the owner judged gone still owns it, its lease not
// renewed since: another process may have reclaimed it since the intercept
// looked, or its owner may have renewed a lease that had lapsed (then an
// error that TakenMeanwhile recognises). An irreversible call needs a
// decision again: the run in doubt used its approval.
func (l *Lifecycle) Reclaim(ctx context.Context, c *Call, reason string) error {
	if !c.InDoubt() {
		return fmt.Errorf("%w: effect %d is %s, not in doubt", model.ErrInProgress, c.Effect.ID, c.Effect.State)
	}
	return l.reclaim(ctx, c, "in doubt: "+c.Effect.Owner.Gone(c.Liveness), reason)
}

// reclaim fails a call whose owner is gone back to pending, recording why,
// while that owner still holds it as judged (Reclaim).
func (l *Lifecycle) reclaim(ctx context.Context, c *Call, why, reason string) error {
	expect := c.Effect.Owner
	if expect == nil {
		expect = &model.Owner{}
	}
	e, err := l.Log.Fail(ctx, c.Effect.ID, model.Change{Actor: c.actor, Error: why, Reason: reason, ExpectOwner: expect})
	if err != nil {
		return err
	}
	c.Effect, c.Outcome = e, model.OutcomeRetry
	return nil
}

// abandonedRound says why a call whose owner is gone was abandoned between
// its input rounds (its history says it awaited the client's input, so its
// server had not acted on it), or "" if it was not.
func (l *Lifecycle) abandonedRound(ctx context.Context, c *Call) (string, error) {
	if c.Effect.HistoryLen < 3 { // intercepted, started, and an input round at least
		return "", nil
	}
	d, err := l.Log.GetEffect(ctx, c.Effect.ID)
	if err != nil || !d.Effect.Owner.Same(c.Effect.Owner) {
		return "", err
	}
	return effectlog.AbandonedRound(d, l.now()), nil
}

// FailAbandonedRounds fails the calls abandoned between their input rounds
// (effectlog.AbandonedRound) in the whole log: a door that starts does, so
// that a call whose client never came back, or came back into another
// session (an unpinned one), is not left executing for good. Each runs
// again when called again. It returns the ids failed, with why. It reads
// the executing effects (the state index), and the history only of those
// whose owner is gone.
func (l *Lifecycle) FailAbandonedRounds(ctx context.Context, actor string) (map[uint64]string, error) {
	executing, _, err := l.Log.ListEffects(ctx, effectlog.EffectFilter{State: sm.Executing})
	if err != nil {
		return nil, err
	}
	failed := map[uint64]string{}
	now := l.now()
	for _, e := range executing {
		switch e.Owner.LivenessAt(now) {
		case model.OwnerAlive, model.OwnerElsewhere:
			continue
		}
		if e.HistoryLen < 3 { // intercepted, started, and an input round at least
			continue
		}
		d, err := l.Log.GetEffect(ctx, e.ID)
		if err != nil {
			return failed, err
		}
		why := effectlog.AbandonedRound(d, l.now())
		if why == "" {
			continue
		}
		c := &Call{Effect: d.Effect, actor: actor}
		if err := l.reclaim(ctx, c, why, ""); TakenMeanwhile(err) {
			continue // its owner, or another door, moved it on
		} else if err != nil {
			return failed, err
		}
		failed[e.ID] = why
	}
	return failed, nil
}

// SendingInput records that a call awaiting the client's input (Finish
// with Result.Awaiting) goes on: its next round is about to reach the
// server, which may act on it. Send the round only once it is recorded:
// a call whose owner dies after is in doubt, not abandoned.
func (l *Lifecycle) SendingInput(ctx context.Context, c *Call) error {
	l.keepLog(c)
	if err := l.inputRound(ctx, c, false); err != nil {
		c.letLogGo()
		return err
	}
	return nil
}

// inputRound records an input round of the call (effectlog.InputRound),
// its owner's lease moved on.
func (l *Lifecycle) inputRound(ctx context.Context, c *Call, awaiting bool) error {
	e, err := l.Log.InputRound(context.WithoutCancel(ctx), c.Effect.ID, awaiting,
		model.Change{Actor: c.actor, Owner: c.Owner.WithLease(l.now().Add(l.lease()))})
	if err != nil {
		return fmt.Errorf("effect %d: its input round was not recorded: %w", c.Effect.ID, err)
	}
	c.Effect = e
	return nil
}

// expectSelf is what recording the call's end expects: this owner, whatever
// its lease now says; none for a call that never started here.
func (c *Call) expectSelf() *model.Owner {
	if !c.Started || c.Owner == nil {
		return nil
	}
	return c.Owner.Identity()
}

// TakenMeanwhile tells whether a Start or Reclaim was refused because
// another process moved the effect on first.
func TakenMeanwhile(err error) bool {
	return errors.Is(err, model.ErrInProgress) || errors.Is(err, sm.ErrInvalidStateTransition)
}
