package lifecycle

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// fakeClock moves on by step at every reading, so that a wait's bound and a
// request's expiry come after a few looks instead of minutes.
type fakeClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.t
	c.t = c.t.Add(c.step)
	return now
}

func newLog(t *testing.T, now func() time.Time) effectlog.Log {
	return logaddr.File(filepath.Join(t.TempDir(), "undolog.db"), logaddr.Options{Now: now})
}

func request(tier sm.Tier, args string) effectlog.InterceptRequest {
	return effectlog.InterceptRequest{Session: "s", Tool: "deploy", Tier: tier, Args: []byte(args), CreateSession: true,
		Actor: "test", ApprovalTimeout: time.Hour}
}

// deadOwner is an owner on this host whose process has exited.
func deadOwner(t *testing.T) *model.Owner {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	o := model.NewOwner(time.Now())
	o.PID, o.ProcessStart = gone.Process.Pid, 0
	return o
}

// startedBy leaves a compensable call executing, owned by owner.
func startedBy(owner *model.Owner) func(t *testing.T, l *Lifecycle) {
	return func(t *testing.T, l *Lifecycle) {
		req := request(sm.Compensable, `{}`)
		req.Owner = owner
		c, err := l.Intercept(t.Context(), req)
		if err != nil || !c.Started {
			t.Fatalf("setup: %+v %v", c, err)
		}
		c.StopRenewing() // left executing: its owner renews nothing
	}
}

func TestInterceptClassifies(t *testing.T) {
	alive := model.NewOwner(time.Now())
	elsewhere := *alive
	elsewhere.Host += "-elsewhere"
	tests := []struct {
		name     string
		setup    func(t *testing.T, l *Lifecycle)
		tier     sm.Tier
		outcome  model.Outcome
		inDoubt  bool
		started  bool
		decide   bool
		liveness model.Liveness
		err      error
	}{
		{name: "new compensable starts", tier: sm.Compensable, outcome: model.OutcomeNew, started: true},
		{name: "new irreversible waits", tier: sm.Irreversible, outcome: model.OutcomeNew, decide: true},
		{name: "failed is retried", tier: sm.Compensable, outcome: model.OutcomeRetry, started: true, setup: func(t *testing.T, l *Lifecycle) {
			c, _ := l.Intercept(t.Context(), request(sm.Compensable, `{}`))
			if err := l.Fail(t.Context(), c, "exit status 1"); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "committed is replayed", tier: sm.Compensable, outcome: model.OutcomeReplayed, setup: func(t *testing.T, l *Lifecycle) {
			c, _ := l.Intercept(t.Context(), request(sm.Compensable, `{}`))
			if err := l.Commit(t.Context(), c, []byte(`{"ok":true}`)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "awaiting a decision elsewhere", tier: sm.Irreversible, outcome: model.OutcomeInProgress, decide: true, setup: func(t *testing.T, l *Lifecycle) {
			l.Intercept(t.Context(), request(sm.Irreversible, `{}`))
		}},
		{name: "executing, live owner", tier: sm.Compensable, outcome: model.OutcomeInProgress, liveness: model.OwnerAlive, setup: startedBy(alive)},
		{name: "executing on another host", tier: sm.Compensable, outcome: model.OutcomeInProgress, liveness: model.OwnerElsewhere, setup: startedBy(&elsewhere)},
		{name: "executing, owner dead", tier: sm.Compensable, outcome: model.OutcomeInProgress, inDoubt: true, liveness: model.OwnerDead, setup: func(t *testing.T, l *Lifecycle) {
			startedBy(deadOwner(t))(t, l)
		}},
		{name: "rejected stands", tier: sm.Irreversible, outcome: model.OutcomeRejected, setup: func(t *testing.T, l *Lifecycle) {
			c, _ := l.Intercept(t.Context(), request(sm.Irreversible, `{}`))
			if _, err := l.Log.Reject(t.Context(), c.Effect.ID, model.Change{Actor: "bob"}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "closed session", tier: sm.Compensable, err: model.ErrSessionNotActive, setup: func(t *testing.T, l *Lifecycle) {
			l.Intercept(t.Context(), request(sm.Compensable, `{"other":1}`))
			if _, err := l.Log.SetSessionState(t.Context(), "s", sm.SessionCompleted, model.Change{Actor: "test"}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "safe is not logged", tier: sm.Safe, outcome: model.OutcomeSafe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &Lifecycle{Log: newLog(t, nil)}
			if tt.setup != nil {
				tt.setup(t, l)
			}
			c, err := l.Intercept(t.Context(), request(tt.tier, `{}`))
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if tt.err != nil {
				return
			}
			if c.Outcome != tt.outcome || c.InDoubt() != tt.inDoubt || c.Started != tt.started || c.NeedsDecision() != tt.decide || c.Liveness != tt.liveness {
				t.Fatalf("got %s in doubt=%v started=%v decide=%v liveness=%v, want %s in doubt=%v started=%v decide=%v liveness=%v",
					c.Outcome, c.InDoubt(), c.Started, c.NeedsDecision(), c.Liveness, tt.outcome, tt.inDoubt, tt.started, tt.decide, tt.liveness)
			}
			if c.Started && (c.Effect.State != sm.Executing || !c.Effect.Owner.Same(c.Owner)) {
				t.Fatalf("started but %s, owned by %s", c.Effect.State, c.Effect.Owner)
			}
		})
	}
}

// waiting intercepts an irreversible call on a log and lifecycle sharing clock.
func waiting(t *testing.T, clock *fakeClock, timeout time.Duration) (*Lifecycle, *Call) {
	l := &Lifecycle{Log: newLog(t, clock.Now), Now: clock.Now}
	req := request(sm.Irreversible, `{}`)
	req.ApprovalTimeout = timeout
	c, err := l.Intercept(t.Context(), req)
	if err != nil || !c.NeedsDecision() {
		t.Fatalf("%+v %v", c, err)
	}
	return l, c
}

func TestWaitEndsAtItsBoundAndLeavesTheRequestOpen(t *testing.T) {
	clock := &fakeClock{t: time.Now(), step: time.Minute}
	l, c := waiting(t, clock, time.Hour)
	announced := 0
	var left time.Duration
	w, err := l.Wait(context.Background(), c, 5*time.Minute, func(a Announce) {
		announced++
		if !a.Expires || a.ExpiresIn <= 5*time.Minute {
			t.Errorf("the request expires in an hour: %+v", a)
		}
		left = a.WaitsFor
	})
	if err != nil || w.Ending != Undecided {
		t.Fatalf("%v %v", w.Ending, err)
	}
	if announced != 1 || left <= 0 || left > 5*time.Minute {
		t.Fatalf("announced %d times, %s left: the bound comes before the expiry", announced, left)
	}
	if d, _ := l.Log.GetEffect(t.Context(), c.Effect.ID); d.Effect.State != sm.Pending || d.Approval.Outcome != model.ApprovalPending {
		t.Fatalf("%s %s: the request must stay open", d.Effect.State, d.Approval.Outcome)
	}
}

func TestWaitRecordsAnExpiredRequest(t *testing.T) {
	clock := &fakeClock{t: time.Now(), step: time.Minute}
	l, c := waiting(t, clock, 3*time.Minute)
	w, err := l.Wait(context.Background(), c, time.Hour, nil)
	if err != nil || w.Ending != Rejected {
		t.Fatalf("%v %v", w.Ending, err)
	}
	if d, _ := l.Log.GetEffect(t.Context(), c.Effect.ID); d.Effect.State != sm.Pending || d.Approval.Outcome != model.ApprovalTimedOut {
		t.Fatalf("%s %s", d.Effect.State, d.Approval.Outcome)
	}
}

func TestWaitSeesWhatOthersDecide(t *testing.T) {
	tests := []struct {
		name   string
		decide func(l *Lifecycle, id uint64) error
		want   Ending
	}{
		{"approved", func(l *Lifecycle, id uint64) error {
			_, err := l.Log.Approve(t.Context(), id, model.Change{Actor: "alice"})
			return err
		}, Ran},
		{"rejected", func(l *Lifecycle, id uint64) error {
			_, err := l.Log.Reject(t.Context(), id, model.Change{Actor: "bob"})
			return err
		}, Rejected},
		{"taken", func(l *Lifecycle, id uint64) error {
			if _, err := l.Log.Approve(t.Context(), id, model.Change{Actor: "alice"}); err != nil {
				return err
			}
			_, err := l.Log.Start(t.Context(), id, model.Change{Actor: "other", Owner: model.NewOwner(time.Now())})
			return err
		}, Taken},
		{"session closed", func(l *Lifecycle, id uint64) error {
			_, err := l.Log.SetSessionState(t.Context(), "s", sm.SessionFailed, model.Change{Actor: "ci"})
			return err
		}, Abandoned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Now(), step: time.Millisecond}
			l, c := waiting(t, clock, time.Hour)
			w, err := l.Wait(context.Background(), c, time.Hour, func(Announce) {
				if err := tt.decide(l, c.Effect.ID); err != nil {
					t.Fatal(err)
				}
			})
			if err != nil || w.Ending != tt.want {
				t.Fatalf("%v %v, want %v", w.Ending, err, tt.want)
			}
			if tt.want == Ran {
				if err := l.Start(t.Context(), c); err != nil || c.Effect.State != sm.Executing || !c.Effect.Owner.Same(c.Owner) {
					t.Fatalf("start after approval: %v %s", err, c.Effect.State)
				}
			}
		})
	}
}

func TestWaitStopsWhenInterrupted(t *testing.T) {
	clock := &fakeClock{t: time.Now(), step: time.Millisecond}
	l, c := waiting(t, clock, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := l.Wait(ctx, c, time.Hour, func(Announce) { cancel() })
	if err != nil || w.Ending != Interrupted {
		t.Fatalf("%v %v", w.Ending, err)
	}
	if d, _ := l.Log.GetEffect(t.Context(), c.Effect.ID); d.Effect.State != sm.Pending {
		t.Fatalf("%s: an interrupted wait leaves the request open", d.Effect.State)
	}
}

func TestReclaimFailsTheDeadOwnersRunOnce(t *testing.T) {
	l := &Lifecycle{Log: newLog(t, nil)}
	dead := deadOwner(t)
	startedBy(dead)(t, l)
	first, _ := l.Intercept(t.Context(), request(sm.Compensable, `{}`))
	second, _ := l.Intercept(t.Context(), request(sm.Compensable, `{}`))
	if !first.InDoubt() || !second.InDoubt() {
		t.Fatalf("%s %s", first.Outcome, second.Outcome)
	}
	// The second reclaims it and runs it: its owner is now alive.
	if err := l.Reclaim(t.Context(), second, "reclaimed"); err != nil {
		t.Fatal(err)
	}
	if second.Outcome != model.OutcomeRetry || second.InDoubt() || second.Effect.State != sm.Pending {
		t.Fatalf("after reclaim: %s %s", second.Outcome, second.Effect.State)
	}
	if err := l.Start(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	// The first judged the dead owner, who owns it no more: refused.
	err := l.Reclaim(t.Context(), first, "reclaimed")
	if !TakenMeanwhile(err) || !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("reclaim of an effect taken meanwhile: %v", err)
	}
	d, _ := l.Log.GetEffect(t.Context(), first.Effect.ID)
	if d.Effect.State != sm.Executing || !d.Effect.Owner.Same(second.Owner) {
		t.Fatalf("%s owned by %s, want executing by the second", d.Effect.State, d.Effect.Owner)
	}
	fails := 0
	for _, h := range d.History {
		if h.To == string(sm.Pending) && h.Reason == "reclaimed" {
			fails++
		}
	}
	if fails != 1 {
		t.Fatalf("%d reclaims recorded, want 1: %+v", fails, d.History)
	}
}

func TestReclaimRefusesALiveOwner(t *testing.T) {
	l := &Lifecycle{Log: newLog(t, nil)}
	startedBy(model.NewOwner(time.Now()))(t, l)
	c, _ := l.Intercept(t.Context(), request(sm.Compensable, `{}`))
	if err := l.Reclaim(t.Context(), c, "reclaimed"); !TakenMeanwhile(err) {
		t.Fatalf("reclaim of a live owner's call: %v", err)
	}
	if d, _ := l.Log.GetEffect(t.Context(), c.Effect.ID); d.Effect.State != sm.Executing {
		t.Fatalf("%s", d.Effect.State)
	}
}

// lookCounter counts a wait's reads of the log.
type lookCounter struct {
	effectlog.Log
	reads []string
}

func (c *lookCounter) GetEffect(ctx context.Context, id uint64) (model.EffectDetail, error) {
	c.reads = append(c.reads, "GetEffect")
	return c.Log.GetEffect(ctx, id)
}

func (c *lookCounter) LastChange(ctx context.Context) (uint64, error) {
	c.reads = append(c.reads, "LastChange")
	return c.Log.LastChange(ctx)
}

func (c *lookCounter) GetEffectAndPosition(ctx context.Context, id uint64) (model.EffectDetail, uint64, error) {
	c.reads = append(c.reads, "GetEffectAndPosition")
	return c.Log.GetEffectAndPosition(ctx, id)
}

// A wait looks at the effect and the feed's position in one read (one
// transaction, a round trip less each for a server's log): a look of a
// waiting exec woken by a decision comes before its start.
func TestWaitLooksInOneRead(t *testing.T) {
	clock := &fakeClock{t: time.Now(), step: time.Minute}
	l, c := waiting(t, clock, time.Hour)
	counter := &lookCounter{Log: l.Log}
	l.Log = counter
	w, err := l.Wait(context.Background(), c, time.Minute, nil)
	if err != nil || w.Ending != Undecided {
		t.Fatalf("%v %v", w.Ending, err)
	}
	if !slices.Equal(counter.reads, []string{"GetEffectAndPosition"}) {
		t.Fatalf("a look read %v, want one read of the effect with the position", counter.reads)
	}
}
