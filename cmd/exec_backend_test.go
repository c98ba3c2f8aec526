package cmd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/internal/pgtest"
)

// TestExecOnPostgresOpensOneConnection counts what `undolog exec` of a
// quick command, as its own process, costs the server: one connection (its
// Finish reuses Begin's, none is opened while a publish holds the first),
// and one undolog_publish for each of its two writes, sent with its commit
// on that connection, as the server's own statistics count them.
func TestExecOnPostgresOpensOneConnection(t *testing.T) {
	if pgtest.Pooled() {
		t.Skip("through a pooler the server's connections are the pooler's")
	}
	addr := pgtest.Server(t).NewDatabase(t)
	mustRun(t, addr, "migrate")
	conn, err := pgx.Connect(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var db string
	if err := conn.QueryRow(t.Context(), `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	// Counted for the backends that start after it: the exec's.
	if _, err := conn.Exec(t.Context(), `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` SET track_functions = 'pl'`); err != nil {
		t.Fatal(err)
	}
	before := backendCounts(t, conn, db)
	const execs = 3
	for i := range execs {
		mustRun(t, addr, "exec", "--session", "s", "--tier", "compensable", "--undo", "true", "--", "true", fmt.Sprint(i))
	}
	// A backend's statistics reach the server as it exits, a moment after
	// its client went.
	want := backendCount{sessions: before.sessions + execs, publishes: before.publishes + 2*execs}
	got := backendCounts(t, conn, db)
	for deadline := time.Now().Add(10 * time.Second); got != want && time.Now().Before(deadline); {
		if got.sessions > want.sessions || got.publishes > want.publishes {
			break
		}
		time.Sleep(50 * time.Millisecond)
		got = backendCounts(t, conn, db)
	}
	if got != want {
		t.Fatalf("%d execs: %d connections and %d publishes, want %d and %d",
			execs, got.sessions-before.sessions, got.publishes-before.publishes, execs, 2*execs)
	}
}

type backendCount struct{ sessions, publishes int64 }

// backendCounts reads the connections made to db so far and the calls of
// undolog_publish the exited backends counted.
func backendCounts(t *testing.T, conn *pgx.Conn, db string) backendCount {
	t.Helper()
	var c backendCount
	if err := conn.QueryRow(t.Context(), `SELECT
		(SELECT sessions FROM pg_stat_database WHERE datname = $1),
		coalesce((SELECT sum(calls) FROM pg_stat_user_functions WHERE funcname = 'undolog_publish'), 0)::bigint`, db).
		Scan(&c.sessions, &c.publishes); err != nil {
		t.Fatal(err)
	}
	return c
}
