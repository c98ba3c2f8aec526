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
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/pgstore"
)

// A process suspended (about to stop: SIGTSTP) holds no row: its writes
// under way end first and no new one begins, so another writer of the same
// session gets in at once, as with a log file.
func TestSuspendedEngineHoldsNoRows(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	engine := pgstore.New(url)
	defer engine.Close()
	busy := effectlog.New(engine, effectlog.Options{})
	call := func(log effectlog.Log, key string) error {
		_, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
			Args: json.RawMessage(`{}`), Key: key, CreateSession: true, Start: true})
		return err
	}
	if err := call(busy, "first"); err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := call(busy, fmt.Sprint("busy-", i)); err != nil {
				done <- err
				return
			}
		}
	}()
	otherEngine := pgstore.New(url)
	otherEngine.LockTimeout = 500 * time.Millisecond
	defer otherEngine.Close()
	other := effectlog.New(otherEngine, effectlog.Options{})
	watch, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())
	for i := 0; i < 20; i++ {
		time.Sleep(time.Duration(i%5) * time.Millisecond)
		// The other's changes are in the feed: its publisher is not in a
		// transaction either.
		if _, err := other.LastChange(t.Context()); err != nil {
			t.Fatal(err)
		}
		resume := engine.Suspend()
		// What a stopped process would leave open: a transaction of its
		// (a client's: the server's own workers, autovacuum's, are not).
		var open int
		var which string
		err := watch.QueryRow(t.Context(), `SELECT count(*), coalesce(string_agg(state || ': ' || left(query, 80), '; '), '')
			FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
			AND backend_type = 'client backend' AND xact_start IS NOT NULL`).Scan(&open, &which)
		if err == nil && open > 0 {
			err = fmt.Errorf("%d transactions open (%s)", open, which)
		}
		if err == nil {
			err = call(other, fmt.Sprint("other-", i))
		}
		resume()
		if err != nil {
			close(stop)
			t.Fatalf("while the busy process was suspended: %v", err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
