package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// started intercepts and starts a call in session s of log.
func started(t *testing.T, log effectlog.Log, s string, n int) uint64 {
	t.Helper()
	res, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: s, Tool: "write_file", Tier: sm.Compensable,
		Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), CreateSession: true, Start: true})
	if err != nil {
		t.Fatal(err)
	}
	return res.Effect.ID
}

// dial is a connection of the test's own to the database at url, closed
// when the test ends.
func dial(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// A process decides a commit on the rows it wrote last, with no read. Rows
// another process changed since are not trusted: the commit is decided again
// on a read, and says what a process that read them says.
func TestACommitOnRowsAnotherChangedDecidesAgain(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	a, b, c := open(url), open(url), open(url)
	defer a.Close()
	defer b.Close()
	defer c.Close()
	ok := model.Change{Result: json.RawMessage(`{"ok":true}`)}

	// The session changed: b's intercepts in it moved its counts.
	first := started(t, a, "s", 1)
	started(t, b, "s", 2)
	started(t, b, "s", 3)
	if _, err := a.Commit(t.Context(), first, ok); err != nil {
		t.Fatal(err)
	}
	sess, err := c.GetSession(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if sess.Effects != 3 || sess.Counts[sm.Committed] != 1 || sess.Counts[sm.Executing] != 2 {
		t.Fatalf("session s after b's two intercepts and a's commit: %d effects, counts %v; want 3, 1 committed and 2 executing",
			sess.Effects, sess.Counts)
	}

	// The effect changed: b failed it, then started it again and
	// committed it. a's commit is refused as c's is.
	second := started(t, a, "s", 4)
	for _, step := range []func() (model.Effect, error){
		func() (model.Effect, error) { return b.Fail(t.Context(), second, model.Change{Error: "lost"}) },
		func() (model.Effect, error) {
			return b.Start(t.Context(), second, model.Change{})
		},
		func() (model.Effect, error) { return b.Commit(t.Context(), second, ok) },
	} {
		if _, err := step(); err != nil {
			t.Fatal(err)
		}
	}
	_, want := c.Commit(t.Context(), second, model.Change{Result: json.RawMessage(`{"again":true}`)})
	_, got := a.Commit(t.Context(), second, model.Change{Result: json.RawMessage(`{"again":true}`)})
	if want == nil || got == nil || got.Error() != want.Error() {
		t.Fatalf("a's commit of an effect b committed: %v; a process that read it: %v", got, want)
	}
	d, err := c.GetEffect(t.Context(), second)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.History) != 5 || string(d.Effect.Result) != `{"ok":true}` { // intercept, start, fail, start, commit
		t.Fatalf("effect %d has %d history records, want 5, and result %s: %+v", second, len(d.History), d.Effect.Result, d.History)
	}
	report, err := c.Verify(t.Context())
	if err != nil || len(report.Problems) != 0 {
		t.Fatalf("verify: %v %+v", err, report.Problems)
	}
}

// A row changed behind the log's back after this process wrote it is read,
// and its damage found, not written over from what the process remembers.
func TestARowDamagedSinceTheProcessWroteItIsRead(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	a := open(url)
	defer a.Close()
	id := started(t, a, "s", 1)
	conn := dial(t, url)
	if _, err := conn.Exec(t.Context(), `UPDATE undolog_effects SET rec = '\x00ff'::bytea WHERE id = $1`, int64(id)); err != nil {
		t.Fatal(err)
	}
	_, err := a.Commit(t.Context(), id, model.Change{Result: json.RawMessage(`{"ok":true}`)})
	if !errors.Is(err, model.ErrCorrupt) {
		t.Fatalf("commit of an effect whose record was damaged: %v, want %v", err, model.ErrCorrupt)
	}
	var rec []byte
	if err := conn.QueryRow(t.Context(), `SELECT rec FROM undolog_effects WHERE id = $1`, int64(id)).Scan(&rec); err != nil {
		t.Fatal(err)
	}
	if string(rec) != "\x00\xff" {
		t.Fatalf("the damaged record was written over: %q", rec)
	}
}

// A publish reads the queue only above its floor. A row queued by a
// transaction that was under way while other writes were published, and
// committed after, is published all the same, and the queue ends empty.
func TestAChangeCommittedAfterLaterOnesIsPublished(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	log := open(url)
	defer log.Close()
	first := started(t, log, "s", 0)

	conn := dial(t, url)
	late, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// As a write queues its changes: after a write of its own (which
	// gives the transaction its id), in the same order.
	if _, err := late.Exec(t.Context(), `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	// A record of its own, which the feed has not named (it names none
	// twice, nor one that is not there).
	if _, err := late.Exec(t.Context(), `INSERT INTO undolog_history (effect_id, seq, rec) VALUES ($1, 1000, '\x0348')`, int64(first)); err != nil {
		t.Fatal(err)
	}
	if _, err := late.Exec(t.Context(), `INSERT INTO undolog_changes_pending (kind, effect_id, session, seq) VALUES ('E', $1, 's', 1000)`,
		int64(first)); err != nil {
		t.Fatal(err)
	}
	// Many publishes while it is under way, each a while apart.
	for i := 1; i <= 20; i++ {
		started(t, log, "s", i)
		if _, err := log.LastChange(t.Context()); err != nil { // waits for the publish
			t.Fatal(err)
		}
		time.Sleep(15 * time.Millisecond)
	}
	if err := late.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	started(t, log, "s", 21)
	if _, err := log.LastChange(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, url, `SELECT count(*) FROM undolog_changes WHERE kind = 'E' AND seq = 1000`); n != 1 {
		t.Fatalf("the change committed late is in the feed %d times, want once", n)
	}
	if n := count(t, url, `SELECT count(*) FROM undolog_changes_pending`); n != 0 {
		t.Fatalf("%d changes left queued", n)
	}
	// Positions stay gap-free, one per change.
	if n := count(t, url, `SELECT (max(pos) - count(*))::int FROM undolog_changes`); n != 0 {
		t.Fatalf("the feed's positions have %d gaps", n)
	}
}

// The floor waits for a writer whose transaction id is the newest of all,
// none above it ended yet (a snapshot's xmax, one past the newest ended,
// is below it): publishes while it is under way leave its row above the
// floor, and the one after its commit publishes it.
func TestAFloorWaitsForTheNewestWriter(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	log := open(url)
	first := started(t, log, "s", 0)
	if _, err := log.LastChange(t.Context()); err != nil {
		t.Fatal(err)
	}
	log.Close() // no other writer from here
	late := dial(t, url)
	publisher := dial(t, url)
	publish := func() {
		t.Helper()
		if _, err := publisher.Exec(t.Context(), `SELECT undolog_publish(true, NULL, NULL, NULL, NULL)`); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := late.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	// A record of its own, which the feed has not named (it names none
	// twice, nor one that is not there).
	if _, err := tx.Exec(t.Context(), `INSERT INTO undolog_history (effect_id, seq, rec) VALUES ($1, 1000, '\x0348')`, int64(first)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `INSERT INTO undolog_changes_pending (kind, effect_id, session, seq) VALUES ('E', $1, 's', 1000)`,
		int64(first)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		publish()
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	publish()
	if n := count(t, url, `SELECT count(*) FROM undolog_changes WHERE kind = 'E' AND seq = 1000`); n != 1 {
		t.Fatalf("the newest writer's change is in the feed %d times, want once", n)
	}
	if n := count(t, url, `SELECT count(*) FROM undolog_changes_pending`); n != 0 {
		t.Fatalf("%d changes left queued", n)
	}
}
