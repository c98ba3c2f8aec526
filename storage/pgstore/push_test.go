package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/pgstore"
)

// An approved call's start (approved -> executing) by a process of one
// call returns once its COMMIT is answered, without waiting for the
// publish of its changes: the command starts on the effect recorded
// executing while the publish follows (a publish held here by a lock on
// the feed's table; the start's publish used to go in its commit's round
// trip, and the start waited for it). Close waits for that publish: the
// changes end in the feed, none left queued.
func TestStartGoesOnBeforeItsPublish(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	setup := open(url)
	res, err := setup.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "deploy", Tier: sm.Irreversible,
		Args: json.RawMessage(`{}`), CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Approve(t.Context(), res.Effect.ID, model.Change{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := setup.Close(); err != nil {
		t.Fatal(err)
	}
	hold := holdFeedTable(t, url)

	log := effectlog.New(pgstore.New(url), effectlog.Options{})
	type started struct {
		e   model.Effect
		err error
	}
	start := make(chan started, 1)
	go func() {
		e, err := log.Start(context.Background(), res.Effect.ID, model.Change{Actor: "ci"})
		start <- started{e, err}
	}()
	var s started
	select {
	case s = <-start:
	case <-time.After(10 * time.Second):
		hold.Rollback(context.Background())
		<-start
		t.Fatal("the start waited for its publish (10 s, while the feed's table was locked)")
	}
	if s.err != nil || s.e.State != sm.Executing {
		t.Fatalf("start: %s, %v", s.e.State, s.err)
	}
	if n := count(t, url, `SELECT count(*) FROM undolog_changes_pending`); n == 0 {
		t.Fatal("nothing queued: the start's publish was not held")
	}
	if err := hold.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	if q := count(t, url, `SELECT count(*) FROM undolog_changes_pending`); q != 0 {
		t.Errorf("%d changes left queued", q)
	}
	if c := count(t, url, fmt.Sprintf(`SELECT count(*) FROM undolog_changes c JOIN undolog_history h
		ON h.effect_id = c.effect_id AND h.seq = c.seq WHERE c.kind = 'E' AND c.effect_id = %d AND h.to_state = 'executing'`, res.Effect.ID)); c != 1 {
		t.Errorf("the start's change is %d times in the feed, want once", c)
	}
}

// A decision wakes the processes waiting for changes as its commit is
// made, before its publish gives it a feed position (held here by a lock
// on the feed's table): an exec waiting for an approval reads it then,
// where it waited for the approve's publish (on a fresh connection, a
// compile of undolog_publish more).
func TestDecisionWakesWaitersAtItsCommit(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	setup := open(url)
	res, err := setup.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "deploy", Tier: sm.Irreversible,
		Args: json.RawMessage(`{}`), CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	position, err := setup.LastChange(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := setup.Close(); err != nil {
		t.Fatal(err)
	}
	waiter := pgstore.New(url)
	defer waiter.Close()
	// The first wait returns once the listener is connected.
	connect, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := waiter.WaitChange(connect, position); err != nil {
		t.Fatalf("listening: %v", err)
	}

	hold := holdFeedTable(t, url)
	woke := make(chan error, 1)
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	go func() { woke <- waiter.WaitChange(wait, position) }()
	approver := open(url)
	approved := make(chan error, 1)
	go func() {
		_, err := approver.Approve(context.Background(), res.Effect.ID, model.Change{Actor: "alice"})
		approved <- err
	}()
	if err := <-woke; err != nil {
		t.Errorf("the wait did not end at the decision's commit (its publish held): %v", err)
	}
	if n := count(t, url, `SELECT count(*) FROM undolog_changes_pending`); n == 0 {
		t.Error("nothing queued: the approve's publish was not held")
	}
	if err := hold.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-approved; err != nil {
		t.Fatal(err)
	}
	if err := approver.Close(); err != nil {
		t.Fatal(err)
	}
}

// holdFeedTable locks the feed's table from a transaction of its own, which
// the caller rolls back: a publish waits for it (its INSERT), a write's
// commit does not (its changes go to the queue).
func holdFeedTable(t *testing.T, url string) pgx.Tx {
	t.Helper()
	holder, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close(context.Background()) })
	hold, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Rollback(context.Background()) })
	if _, err := hold.Exec(t.Context(), `LOCK TABLE undolog_changes IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	return hold
}
