package cmd

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/internal/pgtest"
)

// --lock-timeout bounds a wait for rows another transaction holds, as it
// bounds a wait for a log file's lock: past it the command is the log busy
// (exit 5), wrote nothing, and works once the rows are free.
func TestLockTimeoutBoundsAWaitForRowsOnPostgres(t *testing.T) {
	addr := pgtest.Server(t).NewDatabase(t)
	mustRun(t, addr, "session", "start", "held")
	conn, err := pgx.Connect(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM undolog_sessions WHERE id = 'held' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	before := pgSnapshot(t, addr)
	// Without the bound the command waits for as long as the rows are held:
	// the test's own limit turns that into a failure, not a hang.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := runWithLog(t, addr, "session", "complete", "held", "--lock-timeout", "300ms")
	held := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	held.Env = cmd.Env
	out, err := held.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatal("the command waited for the held rows past --lock-timeout")
	}
	if code := exitCodeOf(err); code != ExitBusy || !strings.Contains(string(out), "lock timeout") || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if after := pgSnapshot(t, addr); after != before {
		t.Fatal("the refused command wrote")
	}
	tx.Rollback(context.Background())
	if out := mustRun(t, addr, "session", "complete", "held"); !strings.Contains(out, "completed") {
		t.Fatalf("after the rows were let go: %s", out)
	}
}
