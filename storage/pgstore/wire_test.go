package pgstore_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/pgstore"
)

// execWire is what one call as its own process (`undolog exec` of a
// command that succeeds at once) sends the server: one connection, its
// sign-in, the intercept that starts the call, the commit, and the
// publish of their changes in the commit's round trip.
const (
	execConns      = 1
	execRoundTrips = 5
)

// TestCallAsItsOwnProcessRoundTrips counts the connections and round trips
// of a call driven as exec drives it (Intercept, which starts it; Drive,
// which commits it; Close), by a fresh engine on a migrated log, as each
// exec process is: a new one fails the test, so that a process of one call
// stays as cheap as a connection allows.
func TestCallAsItsOwnProcessRoundTrips(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	if _, _, err := pgstore.New(url).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, session := range []string{"new", "new"} { // a new session, then one that has calls
		engine := pgstore.New(url)
		wire := pgstore.CountWire(engine)
		log := effectlog.New(engine, effectlog.Options{})
		lc := &lifecycle.Lifecycle{Log: log}
		ctx := context.Background()
		call, err := lc.Intercept(ctx, effectlog.InterceptRequest{Session: session, Tool: "true", Tier: sm.Compensable,
			Args: json.RawMessage(`{"argv":["true","` + string(rune('0'+i)) + `"]}`), CreateSession: true, Actor: "ci",
			Compensation: &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"true"}}})
		if err != nil {
			t.Fatal(err)
		}
		end, err := lc.Drive(ctx, call, lifecycle.Ask{}, func(context.Context, *lifecycle.Call) lifecycle.Result {
			return lifecycle.Result{Value: []byte(`{"exit":0}`)}
		})
		if err != nil || end.Ending != lifecycle.Ran {
			t.Fatalf("call %d: %v, %v", i, end.Ending, err)
		}
		if err := log.Close(); err != nil {
			t.Fatal(err)
		}
		conns, trips := wire.Counts()
		t.Logf("call %d: %d connections, %d round trips", i, conns, trips)
		if conns != execConns || trips != execRoundTrips {
			t.Errorf("call %d: %d connections and %d round trips, want %d and %d", i, conns, trips, execConns, execRoundTrips)
		}
		d, err := effectlog.New(pgstore.New(url), effectlog.Options{}).GetEffect(ctx, call.Effect.ID)
		if err != nil || d.Effect.State != sm.Committed {
			t.Fatalf("call %d: %v, %v", i, d.Effect.State, err)
		}
	}
}
