package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// renewals is a log whose RenewLease answers with the errors given, in
// turn (then passes on to the log), and reports each call.
type renewals struct {
	effectlog.Log
	mu      sync.Mutex
	answers []error
	calls   chan time.Time
}

func (r *renewals) RenewLease(ctx context.Context, id uint64, owner *model.Owner, until time.Time) error {
	r.mu.Lock()
	var err error
	if len(r.answers) > 0 {
		err, r.answers = r.answers[0], r.answers[1:]
	} else if r.Log != nil {
		err = r.Log.RenewLease(ctx, id, owner, until)
	}
	r.mu.Unlock()
	r.calls <- until
	return err
}

func next(t *testing.T, calls chan time.Time) time.Time {
	t.Helper()
	select {
	case until := <-calls:
		return until
	case <-time.After(time.Minute): // a failure bound, not a speed target
		t.Fatal("no renewal")
		return time.Time{}
	}
}

// A started call's lease is renewed while it runs, without a history
// record, until it ends; the end is recorded with the owner's identity,
// whatever its lease became.
func TestLeaseIsRenewedWhileTheCallRuns(t *testing.T) {
	log := &renewals{Log: newLog(t, nil), calls: make(chan time.Time, 16)}
	l := &Lifecycle{Log: log, Lease: 30 * time.Millisecond}
	c, err := l.Intercept(t.Context(), request(sm.Compensable, `{}`))
	if err != nil || !c.Started {
		t.Fatalf("%+v %v", c, err)
	}
	first := c.Effect.Owner.LeaseUntil
	records := c.Effect.HistoryLen
	if first.IsZero() || !c.Owner.LeaseUntil.IsZero() {
		t.Fatalf("recorded lease %v, call's owner %+v: the log holds the lease, the call its identity", first, c.Owner)
	}
	next(t, log.calls)
	until := next(t, log.calls)
	d, err := l.Log.GetEffect(t.Context(), c.Effect.ID)
	if err != nil || !d.Effect.Owner.LeaseUntil.After(first) || len(d.History) != int(records) {
		t.Fatalf("after renewals: lease %v (was %v, last renewed to %v), %d records, %v", d.Effect.Owner.LeaseUntil, first, until, len(d.History), err)
	}
	if err := l.Commit(t.Context(), c, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	if c.Effect.State != sm.Committed || c.Effect.Owner != nil {
		t.Fatalf("%s %+v", c.Effect.State, c.Effect.Owner)
	}
	if c.renewal != nil {
		t.Fatal("renewals go on after the commit")
	}
}

// A renewal that fails is tried again at the next tick; one refused because
// the effect is no longer the owner's ends the renewals, and Stop says why.
func TestRenewalsOutliveFailuresAndEndWhenTaken(t *testing.T) {
	taken := errors.New("taken")
	log := &renewals{answers: []error{model.ErrBusy, context.DeadlineExceeded, nil, errors.Join(model.ErrInProgress, taken)}, calls: make(chan time.Time, 16)}
	r := KeepLease(log, 1, &model.Owner{PID: 1, Host: "h"}, 30*time.Millisecond, nil)
	for range 4 {
		next(t, log.calls)
	}
	if err := r.Stop(); !errors.Is(err, taken) {
		t.Fatalf("Stop after the effect was taken: %v", err)
	}
	select {
	case <-log.calls:
		t.Fatal("renewed after it was taken")
	default:
	}
	if err := (*Renewal)(nil).Stop(); err != nil {
		t.Fatal(err)
	}
}

// A call whose owner on another host let its lease run out is in doubt; one
// whose lease holds is in progress and cannot be reclaimed. Once reclaimed,
// the owner that was judged gone is told when it records its end.
func TestALapsedLeaseOnAnotherHostIsInDoubt(t *testing.T) {
	t.Setenv("UNDOLOG_HOST", "m2")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	log := newLog(t, nil)
	a := &Lifecycle{Log: log, Now: func() time.Time { return t0 }, Lease: time.Hour}
	req := request(sm.Compensable, `{}`)
	req.Owner = &model.Owner{PID: 4242, Host: "m1", StartedAt: t0}
	ca, err := a.Intercept(t.Context(), req)
	if err != nil || !ca.Started {
		t.Fatalf("%+v %v", ca, err)
	}
	defer ca.StopRenewing()

	holds := &Lifecycle{Log: log, Now: func() time.Time { return t0.Add(59 * time.Minute) }}
	c, err := holds.Intercept(t.Context(), request(sm.Compensable, `{}`))
	if err != nil || !c.Executing() || c.InDoubt() || c.Liveness != model.OwnerElsewhere {
		t.Fatalf("within the lease: %+v %v", c, err)
	}
	if err := holds.Reclaim(t.Context(), c, "retry"); !TakenMeanwhile(err) {
		t.Fatalf("reclaim within the lease: %v", err)
	}

	b := &Lifecycle{Log: log, Now: func() time.Time { return t0.Add(time.Hour) }}
	cb, err := b.Intercept(t.Context(), request(sm.Compensable, `{}`))
	if err != nil || !cb.InDoubt() || cb.Liveness != model.OwnerLapsed {
		t.Fatalf("past the lease: %+v %v", cb, err)
	}
	if err := b.Reclaim(t.Context(), cb, "retry"); err != nil {
		t.Fatal(err)
	}
	if want := "in doubt: lease expired at 2026-12-01T13:00:00Z (last renewed by pid 4242 on m1)"; cb.Effect.Error != want {
		t.Fatalf("reclaim recorded %q, want %q", cb.Effect.Error, want)
	}
	if err := b.Start(t.Context(), cb); err != nil {
		t.Fatal(err)
	}
	defer cb.StopRenewing()
	if err := a.Commit(t.Context(), ca, []byte(`1`)); !errors.Is(err, model.ErrInProgress) {
		t.Fatalf("commit by the owner judged gone: %v", err)
	}
	d, err := log.GetEffect(t.Context(), cb.Effect.ID)
	if err != nil || d.Effect.State != sm.Executing || !d.Effect.Owner.Same(cb.Owner) {
		t.Fatalf("%s by %s, want executing by the reclaimer (%v)", d.Effect.State, d.Effect.Owner, err)
	}
}

// flakyCommits is a log whose Commit fails with the errors given, in turn,
// before it reaches the log.
type flakyCommits struct {
	effectlog.Log
	answers []error
	tries   int
}

func (f *flakyCommits) Commit(ctx context.Context, id uint64, c model.Change) (model.Effect, error) {
	f.tries++
	if len(f.answers) > 0 {
		err := f.answers[0]
		f.answers = f.answers[1:]
		if errors.Is(err, model.ErrInDoubt) { // the write was made; its answer was lost
			if _, cerr := f.Log.Commit(ctx, id, c); cerr != nil {
				return model.Effect{}, cerr
			}
		}
		return model.Effect{}, err
	}
	return f.Log.Commit(ctx, id, c)
}

// A call that ran is recorded although the log failed for a moment (a
// server restarting): Commit tries again while the lease holds; a commit
// whose answer was lost is found made, not made twice; the rules' own
// answer (the call taken) is not tried again.
func TestCommitOutlastsAMomentsFault(t *testing.T) {
	down := errors.New("log postgres://db/undolog: dial tcp 127.0.0.1:5432: connect: connection refused")
	for _, c := range []struct {
		name    string
		answers []error
		tries   int
		ok      bool
	}{
		{"server down twice", []error{down, down}, 3, true},
		{"answer lost", []error{fmt.Errorf("%w: log x: conn closed", model.ErrInDoubt)}, 1, true},
		{"taken", []error{fmt.Errorf("%w: effect 1 was reclaimed", model.ErrInProgress)}, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := &flakyCommits{Log: newLog(t, nil), answers: c.answers}
			l := &Lifecycle{Log: log, Lease: time.Minute}
			call, err := l.Intercept(t.Context(), request(sm.Compensable, `{}`))
			if err != nil || !call.Started {
				t.Fatalf("%+v %v", call, err)
			}
			err = l.Commit(t.Context(), call, []byte(`{"ok":true}`))
			if (err == nil) != c.ok || log.tries != c.tries {
				t.Fatalf("commit: %v after %d tries", err, log.tries)
			}
			d, _ := log.GetEffect(t.Context(), call.Effect.ID)
			if want := map[bool]sm.State{true: sm.Committed, false: sm.Executing}[c.ok]; d.Effect.State != want || (c.ok && call.Effect.State != sm.Committed) {
				t.Fatalf("effect %s, call's %s", d.Effect.State, call.Effect.State)
			}
		})
	}
}
