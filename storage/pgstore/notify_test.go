package pgstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/pgstore"
)

// waitUntil polls cond until it holds, failing the test after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10s", what)
		}
	}
}

// listening starts e's listener and waits until it listens.
func listening(t *testing.T, e *pgstore.Engine) {
	t.Helper()
	pgstore.RecordHeard(e)
	waitUntil(t, "listening connection", func() bool { ok, _ := pgstore.Listening(e); return ok })
}

func intercept(t *testing.T, log effectlog.Log, session string) error {
	t.Helper()
	_, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: session, Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true})
	return err
}

// writtenAndListening is a writer of the log at url that wrote a call of
// session, and an engine of it listening, with the feed's position after
// the write: its publish (and notification) is over before the listening
// began. Both are closed when t ends.
func writtenAndListening(t *testing.T, url, session string) (writer effectlog.Log, waiter *pgstore.Engine, before uint64) {
	t.Helper()
	writer = open(url)
	t.Cleanup(func() { writer.Close() })
	if err := intercept(t, writer, session); err != nil {
		t.Fatal(err)
	}
	before, err := writer.LastChange(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	waiter = pgstore.New(url)
	t.Cleanup(func() { waiter.Close() })
	listening(t, waiter)
	return writer, waiter, before
}

// waitChange runs e.WaitChange(after) in the background (bounded by 10 s:
// the test fails rather than hangs) and returns its outcome's channel.
func waitChange(t *testing.T, e *pgstore.Engine, after uint64) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		done <- e.WaitChange(ctx, after)
	}()
	return done
}

// A waiter is woken by a write another connection commits, and only by
// it: a write refused at its commit (here by a check deferred to it)
// queued nothing, and the publish that follows a committed one notifies
// in its own transaction, once the positions are given.
func TestWaitChangeIsWokenByACommitOnly(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	writer, waiter, before := writtenAndListening(t, url, "s")
	woken := waitChange(t, waiter, before)

	// A check deferred to the commit, so it fails after the positions (and
	// the notification) were given.
	exec(t, url, `CREATE FUNCTION refuse_rolled_back() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.session = 'rolled-back' THEN RAISE EXCEPTION 'refused at commit'; END IF;
			RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER refuse_rolled_back AFTER INSERT ON undolog_changes_pending
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_rolled_back()`)
	if err := intercept(t, writer, "rolled-back"); err == nil || !strings.Contains(err.Error(), "refused at commit") {
		t.Fatalf("a write refused at its commit: %v", err)
	}
	if err := intercept(t, writer, "committed"); err != nil {
		t.Fatal(err)
	}
	after, err := writer.LastChange(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := <-woken; err != nil {
		t.Fatalf("the waiter was not woken: %v", err)
	}
	waitUntil(t, "notification of the commit", func() bool { return slices.Contains(pgstore.Heard(waiter), after) })
	if heard := pgstore.Heard(waiter); !slices.Equal(heard, []uint64{after}) {
		t.Fatalf("heard %v; want only the commit's position %d", heard, after)
	}
	// Caught up, it waits for what comes next.
	next := waitChange(t, waiter, after)
	if err := intercept(t, writer, "next"); err != nil {
		t.Fatal(err)
	}
	if err := <-next; err != nil {
		t.Fatalf("the waiter was not woken: %v", err)
	}
}

// A change committed between a waiter's read of the position and its wait
// is not missed: the wait returns at once.
func TestWaitChangeAfterAStalePositionReturns(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	writer := open(url)
	defer writer.Close()
	if err := intercept(t, writer, "s"); err != nil {
		t.Fatal(err)
	}
	waiter := pgstore.New(url)
	defer waiter.Close()
	listening(t, waiter)
	read, err := writer.LastChange(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := intercept(t, writer, "t"); err != nil {
		t.Fatal(err)
	}
	if err := <-waitChange(t, waiter, read); err != nil {
		t.Fatalf("a change committed before the wait was missed: %v", err)
	}
	// A listener that starts after the change counts it too.
	late := pgstore.New(url)
	defer late.Close()
	if err := <-waitChange(t, late, read); err != nil {
		t.Fatalf("a new listener missed a change committed before it listened: %v", err)
	}
}

// When the listening connection is killed, the listener connects again
// and wakes its waiters, who look again (nothing told them what they may
// have missed); later notifications get through again.
func TestWaitChangeSurvivesTheListenerKilled(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	writer := open(url)
	defer writer.Close()
	if err := intercept(t, writer, "s"); err != nil {
		t.Fatal(err)
	}
	waiter := pgstore.New(url)
	defer waiter.Close()
	listening(t, waiter)
	pos, err := writer.LastChange(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	woken := waitChange(t, waiter, pos)
	if n := count(t, url, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = '`+pgstore.ListenName+`' AND datname = current_database()`); n != 1 {
		t.Fatalf("%d listening connections terminated; want 1", n)
	}
	if err := <-woken; err != nil {
		t.Fatalf("the waiter was not woken after the listener was killed: %v", err)
	}
	listening(t, waiter)
	again := waitChange(t, waiter, pos)
	if err := intercept(t, writer, "t"); err != nil {
		t.Fatal(err)
	}
	if err := <-again; err != nil {
		t.Fatalf("a change after the reconnection was not heard: %v", err)
	}
	last, _ := writer.LastChange(t.Context())
	waitUntil(t, "notification after the reconnection", func() bool { return slices.Contains(pgstore.Heard(waiter), last) })
}

// The waiters of one engine share one listening connection, and one
// commit wakes them all.
func TestWaitersShareOneListener(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	writer := open(url)
	defer writer.Close()
	if err := intercept(t, writer, "s"); err != nil {
		t.Fatal(err)
	}
	waiter := pgstore.New(url)
	defer waiter.Close()
	pos, err := writer.LastChange(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	listening(t, waiter)
	var woken []<-chan error
	for range 8 {
		woken = append(woken, waitChange(t, waiter, pos))
	}
	if n := count(t, url, `SELECT count(*) FROM pg_stat_activity WHERE application_name = '`+pgstore.ListenName+`' AND datname = current_database()`); n != 1 {
		t.Fatalf("%d listening connections for one engine's 8 waiters", n)
	}
	if err := intercept(t, writer, "t"); err != nil {
		t.Fatal(err)
	}
	for i, w := range woken {
		if err := <-w; err != nil {
			t.Fatalf("waiter %d was not woken: %v", i, err)
		}
	}
}

// Any role that can connect may notify on the channel, with any payload: a
// forged notification of a huge position makes no wait return, neither
// then nor after, and a real commit still wakes a waiter. (A WaitChange
// whose context is already cancelled tells, without waiting, whether the
// listener counts a change after the position.)
func TestAForgedNotificationWakesNobody(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	writer := open(url)
	defer writer.Close()
	if err := intercept(t, writer, "s"); err != nil {
		t.Fatal(err)
	}
	waiter := pgstore.New(url)
	defer waiter.Close()
	listening(t, waiter)
	pos, err := writer.LastChange(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	pending := func(after uint64) bool {
		return waiter.WaitChange(cancelled, after) != nil
	}
	if !pending(pos) {
		t.Fatal("a wait after the newest position returned at once")
	}
	woken := waitChange(t, waiter, pos)
	const huge = uint64(18446744073709551615)
	exec(t, url, `SELECT pg_notify('undolog_changes', current_schema() || ' 18446744073709551615')`)
	waitUntil(t, "the forged notification", func() bool { return slices.Contains(pgstore.Heard(waiter), huge) })
	if !pending(pos) {
		t.Fatal("after a forged notification, a wait returned without a change")
	}
	select {
	case err := <-woken:
		t.Fatalf("a forged notification ended a wait: %v", err)
	default:
	}
	if err := intercept(t, writer, "t"); err != nil {
		t.Fatal(err)
	}
	if err := <-woken; err != nil {
		t.Fatalf("the waiter was not woken by a commit: %v", err)
	}
	next, err := writer.LastChange(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !pending(next) {
		t.Fatal("after the commit, a wait for what comes next returned at once")
	}
}
