package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
)

// pgFaultCommands are commands of every kind (reads, writes, exec, verify,
// export) run against a log that fails; exec's command writes a marker,
// which must never appear.
func pgFaultCommands(marker string) [][]string {
	return [][]string{
		{"list"},
		{"show", "1"},
		{"session", "list"},
		{"approvals"},
		{"verify"},
		{"export"},
		{"session", "start", "new-one"},
		{"intercept", "--session", "s", "--tool", "other", "--tier", "compensable", "--args", `{"n":2}`},
		{"commit", "1"},
		{"exec", "--session", "s", "--undo", "true", "--", "sh", "-c", "echo ran > " + marker},
		{"undo", "s", "--yes"},
	}
}

// oneFailingLine runs undolog args on addr and checks that it ends with one
// line on stderr, exit code want (exec: 125, its own error), without the
// password, naming the log; it returns the line.
func oneFailingLine(t *testing.T, addr string, want int, args ...string) string {
	t.Helper()
	if args[0] == "exec" {
		want = 125
	}
	code, line := oneLineEnd(t, runWithLog(t, addr, args...))
	if code != want || strings.Contains(line, pgtest.LoginPassword) || strings.Contains(line, "wrong-pw") ||
		!strings.HasPrefix(line, "undolog: ") || !strings.Contains(line, pgtest.Login+":xxxxx@127.0.0.1") {
		t.Fatalf("%v: exit %d (want %d), stderr %q", args, code, want, line)
	}
	return line
}

// pgSnapshot is what the log holds, through the command line: its export
// (the effects, their history, hashes).
func pgSnapshot(t *testing.T, addr string) string {
	t.Helper()
	out, err := runWithLog(t, addr, "export").Output()
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	return string(out)
}

func mustRun(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, err := runWithLog(t, addr, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return string(out)
}

// A PostgreSQL log that fails (a server that is down, a wrong password, a
// database that is not there, a connection dropped mid-transaction, a
// statement timeout) fails every command with one line on stderr and its
// exit code (1; a statement timeout is the log busy, 5), never with the
// password; nothing is half-written (verify is clean, the export is what
// it was, exec did not run its command), and the next command works once
// the fault is gone.
func TestPostgresFaultsAreOneLineAndWriteNothing(t *testing.T) {
	server := pgtest.Own(t)
	u, err := url.Parse(server.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	database := strings.TrimPrefix(u.Path, "/")
	addr := server.TCPURL(database, pgtest.Login, pgtest.LoginPassword)
	mustRun(t, addr, "intercept", "--session", "s", "--tool", "deploy", "--tier", "compensable", "--args", `{"n":1}`)
	mustRun(t, addr, "start", "1")
	before := pgSnapshot(t, addr)
	marker := filepath.Join(t.TempDir(), "ran")

	t.Run("server down", func(t *testing.T) {
		server.Stop(t)
		defer func() {
			if t.Failed() {
				server.Start(t) // for the tests after this one
			}
		}()
		for _, args := range pgFaultCommands(marker) {
			if line := oneFailingLine(t, addr, ExitError, args...); !strings.Contains(line, "connection refused") {
				t.Fatalf("%v: %q does not say the server refused the connection", args, line)
			}
		}
		server.Start(t)
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("exec ran its command with the log's server down")
		}
		if after := pgSnapshot(t, addr); after != before {
			t.Fatalf("the log changed:\n%s\nwas\n%s", after, before)
		}
		mustRun(t, addr, "verify")
	})

	t.Run("wrong password", func(t *testing.T) {
		wrong := server.TCPURL(database, pgtest.Login, "wrong-pw")
		for _, args := range pgFaultCommands(marker) {
			if line := oneFailingLine(t, wrong, ExitError, args...); !strings.Contains(line, `password authentication failed for user "agent"`) {
				t.Fatalf("%v: %q", args, line)
			}
		}
	})

	t.Run("missing database", func(t *testing.T) {
		missing := server.TCPURL("no_such_db", pgtest.Login, pgtest.LoginPassword)
		for _, args := range pgFaultCommands(marker) {
			if line := oneFailingLine(t, missing, ExitError, args...); !strings.Contains(line, `database "no_such_db" does not exist`) {
				t.Fatalf("%v: %q", args, line)
			}
		}
	})
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("exec ran its command on a log it could not reach")
	}
	if after := pgSnapshot(t, addr); after != before {
		t.Fatalf("the log changed:\n%s\nwas\n%s", after, before)
	}

	// Writes that wait, mid-transaction, for the lock the test holds.
	writes := [][]string{
		{"intercept", "--session", "s", "--tool", "other", "--tier", "compensable", "--args", `{"n":2}`},
		{"commit", "1", "--result", `{"ok":true}`},
		{"session", "start", "new-one"},
	}

	t.Run("dropped connection", func(t *testing.T) {
		for _, args := range writes {
			release := holdQueueLock(t, server.AdminURL(), database)
			cmd := runWithLog(t, addr, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid, waited := waitForBlockedWriter(t, server.AdminURL(), database)
			if !waited {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("%v: no writer waited for the lock with its rows written within 20s (stderr %q)", args, stderr.String())
			}
			adminExec(t, server.AdminURL(), "SELECT pg_terminate_backend($1)", pid)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("%v did not end within 10s of its connection being dropped", args)
			}
			release()
			code, line := exitCodeOf(err), strings.TrimSpace(stderr.String())
			if strings.Contains(line, "\n") {
				t.Fatalf("%v: more than one line on stderr: %q", args, line)
			}
			if code != ExitError || strings.Contains(line, pgtest.LoginPassword) || !strings.Contains(line, pgtest.Login+":xxxxx@127.0.0.1") ||
				!strings.Contains(line, "terminating connection due to administrator command") {
				t.Fatalf("%v: exit %d, stderr %q", args, code, line)
			}
			if after := pgSnapshot(t, addr); after != before {
				t.Fatalf("%v left the log changed:\n%s\nwas\n%s", args, after, before)
			}
			mustRun(t, addr, "verify")
		}
	})

	// A backend killed (the server then ends every session and recovers): the
	// connection just ends, with no word from the server.
	t.Run("backend killed", func(t *testing.T) {
		args := writes[0]
		release := holdQueueLock(t, server.AdminURL(), database)
		defer release()
		cmd := runWithLog(t, addr, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid, waited := waitForBlockedWriter(t, server.AdminURL(), database)
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%v: no writer waited for the lock with its rows written within 20s (stderr %q)", args, stderr.String())
		}
		checkpointer := checkpointerPid(t, server.AdminURL())
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		release()
		line := strings.TrimSpace(stderr.String())
		// The write's last statements go with its COMMIT in one batch, whose
		// answers the server sends at its end: a connection that ends with
		// none of them may have lost a commit's, so the write is in doubt
		// (here it was not made, as the snapshot shows).
		if code := exitCodeOf(err); code != ExitError || strings.Contains(line, "\n") || strings.Contains(line, pgtest.LoginPassword) ||
			!strings.HasPrefix(line, "undolog: write in doubt: log postgres://"+pgtest.Login+":xxxxx@127.0.0.1") {
			waitForRestart(t, server.AdminURL(), checkpointer)
			t.Fatalf("%v: exit %d, stderr %q", args, code, line)
		}
		waitForRestart(t, server.AdminURL(), checkpointer)
		if after := pgSnapshot(t, addr); after != before {
			t.Fatalf("%v left the log changed:\n%s\nwas\n%s", args, after, before)
		}
		mustRun(t, addr, "verify")
	})

	t.Run("statement timeout", func(t *testing.T) {
		timeout := addr + "&options=-c%20statement_timeout%3D50"
		for _, args := range writes {
			release := holdQueueLock(t, server.AdminURL(), database)
			code, line := oneLineEnd(t, runWithLog(t, timeout, args...))
			release()
			if code != ExitBusy || strings.Contains(line, pgtest.LoginPassword) || !strings.Contains(line, "canceling statement due to statement timeout") {
				t.Fatalf("%v: exit %d, stderr %q", args, code, line)
			}
			if after := pgSnapshot(t, addr); after != before {
				t.Fatalf("%v left the log changed:\n%s\nwas\n%s", args, after, before)
			}
		}
		// Nothing waits now: the same URL works.
		for _, args := range writes {
			mustRun(t, timeout, args...)
		}
	})

	// After every fault the log is sound and goes on where it was.
	mustRun(t, addr, "verify")
	var e struct {
		Effect model.Effect `json:"effect"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, addr, "show", "1", "-o", "json")), &e); err != nil || e.Effect.State != "committed" {
		t.Fatalf("effect 1 after the faults: %+v %v", e.Effect, err)
	}
}

// holdQueueLock holds, in a transaction of the test's own, a lock that every
// write takes last, as it queues its records for the change feed (its
// insert into undolog_changes_pending): a write then waits with all its
// other rows written but not committed. The returned func lets it go.
func holdQueueLock(t *testing.T, admin, database string) func() {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), withDB(t, admin, database))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(t.Context())
	if err == nil {
		_, err = tx.Exec(t.Context(), "LOCK TABLE undolog_changes_pending IN EXCLUSIVE MODE")
	}
	if err != nil {
		conn.Close(context.Background())
		t.Fatal(err)
	}
	return func() {
		tx.Rollback(context.Background())
		conn.Close(context.Background())
	}
}

// waitForBlockedWriter is the pid of the backend that waits for a lock in
// database with a transaction that has written (it has a transaction id),
// if one does within 20 s.
func waitForBlockedWriter(t *testing.T, admin, database string) (int, bool) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var pid int
		err := conn.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity WHERE datname = $1
			AND wait_event_type = 'Lock' AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()`, database).Scan(&pid)
		if err == nil {
			return pid, true
		}
	}
	return 0, false
}

func adminExec(t *testing.T, admin, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// withDB is the URL u with its database replaced.
func withDB(t *testing.T, u, database string) string {
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p.Path = "/" + database
	return p.String()
}

// checkpointerPid is the pid of the server's checkpointer, which a crash
// restart replaces.
func checkpointerPid(t *testing.T, admin string) int {
	t.Helper()
	var pid int
	if err := adminConn(t, admin).QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitForRestart waits up to 30 s for the server to take connections again
// after a crash (it ends every session and recovers first): until its
// checkpointer is another than before.
func waitForRestart(t *testing.T, admin string, checkpointer int) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var conn *pgx.Conn
		if conn, err = pgx.Connect(t.Context(), admin); err == nil {
			var pid int
			err = conn.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'`).Scan(&pid)
			conn.Close(context.Background())
			if err == nil && pid != checkpointer {
				return
			}
		}
	}
	t.Fatalf("the server did not restart within 30s: %v", err)
}

// A write whose commit was asked for but whose answer never came (the
// connection ended while the server waited to confirm it) is reported in
// doubt, in one line: it may have been made, and here it was. A server
// made to wait for a synchronous standby that is not there holds the
// commit until the test ends the session.
func TestPostgresCommitWithoutAnAnswerIsInDoubt(t *testing.T) {
	server := pgtest.Own(t)
	u, err := url.Parse(server.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	database := strings.TrimPrefix(u.Path, "/")
	addr := server.TCPURL(database, pgtest.Login, pgtest.LoginPassword)
	mustRun(t, addr, "session", "start", "a")
	adminExec(t, server.AdminURL(), "ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
	adminExec(t, server.AdminURL(), "SELECT pg_reload_conf()")
	reset := func() {
		adminExec(t, server.AdminURL(), "ALTER SYSTEM RESET synchronous_standby_names")
		adminExec(t, server.AdminURL(), "SELECT pg_reload_conf()")
	}

	cmd := runWithLog(t, addr, "session", "start", "b")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	conn := adminConn(t, server.AdminURL())
	var pid int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := conn.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event = 'SyncRep'`, database).Scan(&pid)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			reset()
			t.Fatalf("no commit waited for the standby within 20s: %v (stderr %q)", err, stderr.String())
		}
	}
	adminExec(t, server.AdminURL(), "SELECT pg_terminate_backend($1)", pid)
	err = cmd.Wait()
	reset()
	line := strings.TrimSpace(stderr.String())
	if code := exitCodeOf(err); code != ExitError || strings.Contains(line, "\n") || strings.Contains(line, pgtest.LoginPassword) ||
		!strings.HasPrefix(line, "undolog: write in doubt: log postgres://"+pgtest.Login+":xxxxx@") || !strings.Contains(line, "may or may not have been made") {
		t.Fatalf("exit %d, stderr %q", code, line)
	}
	// Made, as the server had it committed before it waited.
	mustRun(t, addr, "session", "show", "b")
	mustRun(t, addr, "verify")
}
