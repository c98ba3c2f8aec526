package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	sm "github.com/undolog/undolog/statemachine"
)

// On PostgreSQL a follow, and an exec waiting for a decision, see what
// another process writes when it commits: their slow poll is set to an
// hour here, so only a notification can wake them within the test.
func TestWaitsArePushedOnPostgres(t *testing.T) {
	server := pgtest.Server(t)
	bin := testbin.Undolog(t)
	for _, tc := range []struct {
		name  string
		args  []string
		write func(t *testing.T, log effectlog.Log)
		want  string
	}{
		{"list --follow", []string{"list", "--follow", "-o", "jsonl"}, func(t *testing.T, log effectlog.Log) {
			intercept(t, log, "pushed", sm.Compensable)
		}, `"session":"pushed"`},
		{"approvals --follow", []string{"approvals", "--follow", "-o", "jsonl"}, func(t *testing.T, log effectlog.Log) {
			intercept(t, log, "asks", sm.Irreversible)
		}, `"session":"asks"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := server.NewDatabase(t)
			log := logaddr.Open(url, logaddr.Options{})
			defer log.Close()
			intercept(t, log, "before", sm.Compensable) // the tables exist
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+url, "UNDOLOG_NOTIFY_FALLBACK=1h")
			lines := startLines(t, cmd)
			waitListening(t, url)
			tc.write(t, log)
			for deadline := time.After(10 * time.Second); ; {
				select {
				case line := <-lines:
					if strings.Contains(line, tc.want) {
						return
					}
				case <-deadline:
					t.Fatalf("%s printed no %s within 10s of the commit", tc.name, tc.want)
				}
			}
		})
	}
	t.Run("exec waiting for approval", func(t *testing.T) {
		url := server.NewDatabase(t)
		log := logaddr.Open(url, logaddr.Options{})
		defer log.Close()
		cmd := exec.Command(bin, "exec", "--session", "w", "--tool", "deploy", "--quiet", "--", "echo", "ran")
		cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+url, "UNDOLOG_NOTIFY_FALLBACK=1h", "UNDOLOG_ACTOR=t")
		lines := startLines(t, cmd)
		waitListening(t, url)
		list, _, err := log.PendingApprovals(t.Context(), "w", 0)
		if err != nil || len(list) != 1 {
			t.Fatalf("requests %v, %v", list, err)
		}
		approve := exec.Command(bin, "approve", strconv.FormatUint(list[0].EffectID, 10))
		approve.Env = cmd.Env
		if out, err := approve.CombinedOutput(); err != nil {
			t.Fatalf("approve: %v\n%s", err, out)
		}
		select {
		case line := <-lines:
			if line != "ran" {
				t.Fatalf("exec printed %q", line)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the approved command did not run within 10s")
		}
	})
}

func intercept(t *testing.T, log effectlog.Log, session string, tier sm.Tier) {
	t.Helper()
	if _, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: session, Tool: "w", Tier: tier,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatal(err)
	}
}

// startLines starts cmd and passes on the lines it prints; the test's end
// interrupts it.
func startLines(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	lines := make(chan string, 100)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		io.Copy(io.Discard, out)
	}()
	return lines
}

// waitListening waits until a process listens for the log's changes: its
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
			t.Fatal("nothing listens after 10s")
		}
	}
}

// A writer that keeps the change feed's lock (its own SQL) holds up the
// feed, but not the waiting list: approvals --follow reads the requests
// again every few seconds whether the feed moved or not, so a request is
// seen before it could expire unseen.
func TestApprovalsFollowSeesARequestWhileTheFeedIsHeld(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	log := logaddr.Open(url, logaddr.Options{})
	defer log.Close()
	intercept(t, log, "before", sm.Compensable) // the tables exist
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), `BEGIN; SELECT 1 FROM undolog_feed_floor FOR UPDATE`); err != nil { // undolog_publish's lock
		t.Fatal(err)
	}
	cmd := exec.Command(testbin.Undolog(t), "approvals", "--follow", "-o", "jsonl")
	cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+url, "UNDOLOG_NOTIFY_FALLBACK=1h")
	lines := startLines(t, cmd)
	waitListening(t, url)
	other := logaddr.Open(url, logaddr.Options{})
	defer other.Close() // its publisher waits for the lock: once let go (below)
	defer conn.Exec(context.Background(), `ROLLBACK`)
	intercept(t, other, "held", sm.Irreversible) // its change queued: the feed does not move
	for deadline := time.After(approvalsRelist + 10*time.Second); ; {
		select {
		case line := <-lines:
			if strings.Contains(line, `"session":"held"`) {
				return
			}
		case <-deadline:
			t.Fatalf("approvals --follow did not print the request while the feed was held")
		}
	}
}
