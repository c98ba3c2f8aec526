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
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
	"github.com/undolog/undolog/storage/pgstore"
)

// execWire is what one call as its own process (`undolog exec` of a
// command that succeeds at once) sends the server: one connection; its
// sign-in; the intercept that starts the call, in two round trips (its
// reads with the schema version's, then its writes with the COMMIT and the
// publish of its changes); the call's end, with its publish.
const (
	execConns      = 1
	execRoundTrips = 4
)

// TestCallAsItsOwnProcessRoundTrips counts the connections and round trips
// of a call driven as exec drives it (Intercept, which starts it; Drive,
// which commits it; Close), by a fresh engine on a migrated log, as each
// exec process is: one more fails the test, so that a process of one call
// stays as cheap as a connection allows.
func TestCallAsItsOwnProcessRoundTrips(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	if _, _, err := pgstore.New(url).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	for n, what := range []string{"a new session", "a session that has calls"} {
		conns, trips := callAsItsOwnProcess(t, url, n)
		t.Logf("%s: %d connections, %d round trips", what, conns, trips)
		if conns != execConns || trips != execRoundTrips {
			t.Errorf("%s: %d connections and %d round trips, want %d and %d", what, conns, trips, execConns, execRoundTrips)
		}
	}
}

// callAsItsOwnProcess runs call n of session "s" as exec would, and
// checks that it ended committed with its changes in the feed.
func callAsItsOwnProcess(t *testing.T, url string, n int) (conns, roundTrips int) {
	engine := pgstore.New(url)
	wire := pgstore.CountWire(engine)
	log := effectlog.New(engine, effectlog.Options{})
	lc := &lifecycle.Lifecycle{Log: log}
	ctx := context.Background()
	call, err := lc.Intercept(ctx, effectlog.InterceptRequest{Session: "s", Tool: "true", Tier: sm.Compensable,
		Args: json.RawMessage(fmt.Sprintf(`{"argv":["true","%d"]}`, n)), CreateSession: true, Actor: "ci",
		Compensation: &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	end, err := lc.Drive(ctx, call, lifecycle.Ask{}, func(context.Context, *lifecycle.Call) lifecycle.Result {
		return lifecycle.Result{Value: []byte(`{"exit":0}`)}
	})
	if err != nil || end.Ending != lifecycle.Ran {
		t.Fatalf("call %d: %v, %v", n, end.Ending, err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	conns, roundTrips = wire.Counts()
	check := effectlog.New(pgstore.New(url), effectlog.Options{})
	d, err := check.GetEffect(ctx, call.Effect.ID)
	check.Close()
	if err != nil || d.Effect.State != sm.Committed {
		t.Fatalf("call %d: %v, %v", n, d.Effect.State, err)
	}
	// Its changes are in the feed, none left queued: the publish went
	// with the round trips counted.
	if q := count(t, url, `SELECT count(*) FROM undolog_changes_pending`); q != 0 {
		t.Errorf("call %d: %d changes left queued", n, q)
	}
	if c := count(t, url, fmt.Sprintf(`SELECT count(*) FROM undolog_changes WHERE kind = 'E' AND effect_id = %d`, call.Effect.ID)); c != 3 {
		t.Errorf("call %d: %d of its 3 changes in the feed", n, c)
	}
	return conns, roundTrips
}

// A backend plans the publish's move once and keeps the plan, for the
// publishes after (a process that lives on, a backend a pooler keeps warm):
// left to the plan cache's choice, the move, which takes arguments, was
// planned anew at every publish and its plan dropped after it.
func TestPublishKeepsItsPlan(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	if _, _, err := pgstore.New(url).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// One transaction: one backend, through a transaction pooler too.
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `SELECT undolog_publish(true, NULL, NULL, NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	var kept int
	if err := tx.QueryRow(t.Context(), `SELECT count(*) FROM pg_backend_memory_contexts
		WHERE name = 'CachedPlan' AND strpos(ident, $1) > 0`, "DELETE FROM undolog_changes_pending").Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if kept != 1 {
		t.Errorf("the backend kept %d plans of the publish's move after it, want 1", kept)
	}
}

// TestReadRoundTrips counts the round trips of a read (a wait's look at
// the feed's position) by a fresh engine: its sign-in, then BEGIN with the
// schema version's read, the position's read, COMMIT. BEGIN, the version
// table's existence and the version took a round trip each before.
func TestReadRoundTrips(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	if _, _, err := pgstore.New(url).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	engine := pgstore.New(url)
	wire := pgstore.CountWire(engine)
	var position uint64
	err := engine.View(t.Context(), func(tx storage.ReadTx) error {
		var err error
		position, err = tx.LastChange()
		return err
	})
	engine.Close()
	if err != nil || position != 0 {
		t.Fatalf("position %d, %v", position, err)
	}
	if conns, trips := wire.Counts(); conns != 1 || trips != 4 {
		t.Errorf("%d connections and %d round trips, want 1 and 4", conns, trips)
	}
	// A database without undolog's tables reads as empty: its sign-in, the
	// version's read that fails, the ROLLBACK.
	engine = pgstore.New(pgtest.Server(t).NewDatabase(t))
	wire = pgstore.CountWire(engine)
	err = engine.View(t.Context(), func(tx storage.ReadTx) error {
		t.Error("a database without undolog's tables was read")
		return nil
	})
	engine.Close()
	if err != nil {
		t.Fatal(err)
	}
	if conns, trips := wire.Counts(); conns != 1 || trips != 3 {
		t.Errorf("empty database: %d connections and %d round trips, want 1 and 3", conns, trips)
	}
}

// A process that waits for a decision looks at the log again and again
// (a read each), then starts and ends its call: it does it all on its one
// connection. The reads counted towards the switch to a connection that
// prepares its statements, made for the look and the start after the
// decision: a sign-in, a round trip to prepare each batch, and a server
// process whose caches were cold, between the decision and the command.
func TestWaitingProcessKeepsItsConnection(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	if _, _, err := pgstore.New(url).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	engine := pgstore.New(url)
	wire := pgstore.CountWire(engine)
	log := effectlog.New(engine, effectlog.Options{})
	ctx := context.Background()
	res, err := log.Intercept(ctx, effectlog.InterceptRequest{Session: "s", Tool: "deploy", Tier: sm.Irreversible,
		Args: json.RawMessage(`{}`), CreateSession: true, Actor: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, _, err := log.GetEffectAndPosition(ctx, res.Effect.ID); err != nil {
			t.Fatal(err)
		}
	}
	approver := effectlog.New(pgstore.New(url), effectlog.Options{})
	if _, err := approver.Approve(ctx, res.Effect.ID, model.Change{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	approver.Close()
	if _, err := log.Start(ctx, res.Effect.ID, model.Change{Actor: "ci", Owner: model.NewOwner(time.Now())}); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Commit(ctx, res.Effect.ID, model.Change{Actor: "ci", Result: json.RawMessage(`{"exit":0}`)}); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	if conns, _ := wire.Counts(); conns != 1 {
		t.Errorf("%d connections, want 1", conns)
	}
}
