package cmd

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undolog/undolog/internal/pgtest"
)

// The waits outlive a restart of the log's server: `list --follow`,
// `approvals --follow` and an exec waiting for approval keep running while
// the server is down for seconds, say so on stderr, and go on where they
// were once it is back: the exec runs its command once approved, the
// follower prints the changes made after the restart, each once.
func TestWaitsOutliveAServerRestart(t *testing.T) {
	server := pgtest.Own(t)
	u, err := url.Parse(server.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	addr := server.TCPURL(strings.TrimPrefix(u.Path, "/"), pgtest.Login, pgtest.LoginPassword)
	mustRun(t, addr, "session", "start", "s")
	marker := filepath.Join(t.TempDir(), "ran")

	// start runs undolog in the background; done is closed once it exited,
	// with its error in *werr.
	start := func(args ...string) (out, errOut *lockedBuffer, done chan struct{}, werr *error) {
		cmd := runWithLog(t, addr, args...)
		out, errOut = &lockedBuffer{}, &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done, werr = make(chan struct{}), new(error)
		go func() { *werr = cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGINT)
			<-done
		})
		return out, errOut, done, werr
	}
	follow, followErr, followDone, followExit := start("list", "--follow", "-o", "jsonl")
	approvals, _, approvalsDone, approvalsExit := start("approvals", "--follow", "-o", "jsonl")
	_, execErr, execDone, execExit := start("exec", "--session", "s", "--tool", "deploy", "--tier", "irreversible",
		"--approval-timeout", "2m", "--", "sh", "-c", "echo ran > "+marker)
	waitForLine(t, approvals, `"effect_id":1`)

	server.Stop(t)
	time.Sleep(3 * time.Second) // down long enough for every wait to look and fail
	server.Start(t)
	mustRun(t, addr, "approve", "1", "--as", "alice")

	select {
	case <-execDone:
		if *execExit != nil {
			t.Fatalf("exec after the restart: %v\n%s", *execExit, execErr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("exec still waits a minute after the approval:\n%s", execErr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}
	if !strings.Contains(execErr.String(), "the wait for a decision goes on, trying again") || !strings.Contains(execErr.String(), "answers again") {
		t.Fatalf("exec did not say the server went and came back:\n%s", execErr)
	}
	waitForLine(t, follow, `"to":"committed"`)
	if n := strings.Count(follow.String(), `"to":"approved"`); n != 1 {
		t.Fatalf("the follower printed the approval %d times:\n%s", n, follow)
	}
	select {
	case <-followDone:
		t.Fatalf("list --follow ended with the server's restart: %v\n%s", *followExit, followErr)
	case <-approvalsDone:
		t.Fatalf("approvals --follow ended with the server's restart: %v", *approvalsExit)
	default:
	}
}
