package tui

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	sm "github.com/undolog/undolog/statemachine"
)

func TestMain(m *testing.M) {
	testbin.QuickRaceExit() // the memory probe runs this binary again
	pgtest.Main(m)
}

// On PostgreSQL the view shows what another process commits when it
// commits: its poll and the log's slow poll are an hour here, so only a
// notification can bring the change within the test. Behind PgBouncer in
// transaction pooling mode the view listens on a direct connection.
func TestViewIsPushedOnPostgres(t *testing.T) {
	t.Run("direct", func(t *testing.T) { viewIsPushed(t, pgtest.Server(t).NewDatabase(t)) })
	t.Run("pooled", func(t *testing.T) { viewIsPushed(t, pgtest.Server(t).NewPooledDatabase(t, true)) })
}

func viewIsPushed(t *testing.T, url string) {
	other := logaddr.Open(url, logaddr.Options{})
	defer other.Close()
	add := func(session, tool string) {
		if _, err := other.Intercept(t.Context(), effectlog.InterceptRequest{Session: session, Tool: tool, Tier: sm.Compensable,
			Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
			t.Fatal(err)
		}
	}
	add("watched", "first_tool")
	store := logaddr.Open(url, logaddr.Options{Fallback: time.Hour})
	m := New(t.Context(), Options{Log: store, Session: "watched", Actor: "tester", Refresh: time.Hour})
	tm := startModel(t, m, store)
	waitFor(t, tm, "first_tool")
	waitListening(t, url)
	add("watched", "pushed_tool")
	waitFor(t, tm, "pushed_tool")
}

// waitListening waits until the view listens for the log's changes: its
// listener has read the feed's position after LISTEN (its last query) and
// waits, so what commits from now on can reach it only by a notification.
func waitListening(t *testing.T, url string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'undolog listen' AND datname = current_database()
			AND state = 'idle' AND query LIKE 'SELECT coalesce(max(pos), 0) FROM undolog_changes%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the view does not listen after 10s")
		}
	}
}
