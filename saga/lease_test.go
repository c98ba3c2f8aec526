package saga

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// A compensation running on another host under a lease that holds is in
// progress, never overtaken (not even with RetryInDoubt); once its lease
// ran out it is in doubt, named so, and RetryInDoubt runs it again.
func TestACompensationWhoseLeaseLapsedIsInDoubt(t *testing.T) {
	dir := t.TempDir()
	store := logaddr.File(filepath.Join(dir, "u.db"), logaddr.Options{})
	ran := filepath.Join(dir, "ran")
	id := committed(t, store, "s", &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"touch", ran}}, `1`)
	far := &model.Owner{PID: 4242, Host: model.HostName() + "-elsewhere", StartedAt: time.Now()}
	if _, err := store.UndoStep(t.Context(), id, sm.EntryCompensating, model.Change{Owner: far.WithLease(time.Now().Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	plan, err := MakePlan(t.Context(), store, "s")
	if err != nil || plan.Steps[0].Action != ActionInProgress {
		t.Fatalf("under a lease that holds: %+v %v", plan, err)
	}
	for _, retry := range []bool{false, true} {
		if _, err := (&Runner{Log: store, Actor: "test", RetryInDoubt: retry}).Run(t.Context(), "s"); !errors.Is(err, model.ErrInProgress) {
			t.Fatalf("retry %v under a lease that holds: %v", retry, err)
		}
	}

	// Its runner last renewed it to a moment now past.
	lapsed := time.Now().Add(-time.Second)
	if err := store.RenewLease(t.Context(), id, far, lapsed); err != nil {
		t.Fatal(err)
	}
	if plan, err = MakePlan(t.Context(), store, "s"); err != nil || plan.Steps[0].Action != ActionInDoubt {
		t.Fatalf("past its lease: %+v %v", plan, err)
	}
	_, err = (&Runner{Log: store, Actor: "test"}).Run(t.Context(), "s")
	if !errors.Is(err, ErrInDoubt) || !strings.Contains(err.Error(), "its undo's lease expired at "+lapsed.UTC().Format(time.RFC3339Nano)+" (last renewed by pid 4242 on ") {
		t.Fatalf("undo past the lease: %v", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("ran a compensation in doubt")
	}
	res, err := (&Runner{Log: store, Actor: "test", RetryInDoubt: true}).Run(t.Context(), "s")
	if err != nil || len(res.Compensated) != 1 {
		t.Fatalf("retry in doubt: %+v %v", res, err)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Fatal("the compensation in doubt did not run again")
	}
}

// renewedLog lets the compensation it runs end (the file it waits for
// appears) only once its lease was renewed.
type renewedLog struct {
	effectlog.Log
	once    sync.Once
	release string
}

func (r *renewedLog) RenewLease(ctx context.Context, id uint64, owner *model.Owner, until time.Time) error {
	err := r.Log.RenewLease(ctx, id, owner, until)
	if err == nil {
		r.once.Do(func() { os.WriteFile(r.release, nil, 0o644) })
	}
	return err
}

// A compensation's lease is renewed while it runs, and the runner records
// its end as the owner it is, whatever the lease became.
func TestACompensationRenewsItsLease(t *testing.T) {
	dir := t.TempDir()
	store := logaddr.File(filepath.Join(dir, "u.db"), logaddr.Options{})
	release := filepath.Join(dir, "renewed")
	id := committed(t, store, "s", &model.Compensation{Kind: model.CompensationCommand,
		Argv: []string{"sh", "-c", `while [ ! -e "$0" ]; do sleep 0.01; done`, release}}, `1`)
	log := &renewedLog{Log: store, release: release}
	res, err := (&Runner{Log: log, Actor: "test", Lease: 30 * time.Millisecond}).Run(t.Context(), "s")
	if err != nil || len(res.Compensated) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	d, err := store.GetEffect(t.Context(), id)
	if err != nil || d.Undo.State != sm.EntryCompensated || d.Undo.Owner != nil {
		t.Fatalf("%+v %v", d.Undo, err)
	}
}
