package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	sm "github.com/undolog/undolog/statemachine"
)

// An exec stopped while its command runs (Ctrl-Z, SIGSTOP: it can do
// nothing, not even notice a waiter) keeps no other process out of the log
// file: reads, a new session and a decision go through while it is stopped,
// and once continued it commits its call.
func TestStoppedExecKeepsNobodyOut(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "u.db")
	started := filepath.Join(dir, "started")
	mustRun(t, log, "intercept", "--session", "other", "--tool", "deploy", "--tier", "irreversible", "--args", `{}`)
	cmd := runWithLog(t, log, "exec", "--session", "s", "--undo", "true", "--", "sh", "-c", "touch "+started+"; sleep 3")
	errOut := &lockedBuffer{}
	cmd.Stderr = errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start:\n%s", errOut)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Signal(syscall.SIGCONT)
	for _, args := range [][]string{{"list"}, {"session", "start", "x"}, {"approve", "1"}} {
		out, err := runWithLog(t, log, append([]string{"--lock-timeout", "2s"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v while an exec is stopped: %v\n%s", args, err, out)
		}
	}
	cmd.Process.Signal(syscall.SIGCONT)
	if err := <-done; err != nil {
		t.Fatalf("exec once continued: %v\n%s", err, errOut)
	}
	if out := mustRun(t, log, "list", "--session", "s"); !strings.Contains(out, "committed") {
		t.Fatalf("the call was not committed:\n%s", out)
	}
}

// A reader or a compaction stopped with Ctrl-Z (SIGTSTP) at any moment,
// inside one of its reads too, keeps no writer out: it lets the log go
// first (a read under way ends), and once continued it finishes as if it
// had not stopped.
func TestStoppedReaderKeepsNobodyOut(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see a process stopped")
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "u.db")
	store := logaddr.File(log, logaddr.Options{})
	// Big enough (some 20 MB) that most of the stops below come while the
	// command still runs, on a fast machine too.
	args := json.RawMessage(`{"pad":"` + strings.Repeat("x", 4000) + `"}`)
	for s := 0; s < 50; s++ {
		reqs := make([]effectlog.InterceptRequest, 100)
		for i := range reqs {
			reqs[i] = effectlog.InterceptRequest{Session: fmt.Sprintf("s%d", s), Tool: "w", Tier: sm.Compensable, CreateSession: true,
				Args: args, Key: strconv.Itoa(i), Start: true}
		}
		if _, err := store.InterceptMany(t.Context(), reqs); err != nil {
			t.Fatal(err)
		}
	}
	store.Close()
	stopped := func(pid int) bool {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		_, rest, _ := strings.Cut(string(data), ") ")
		return err == nil && strings.HasPrefix(rest, "T")
	}
	// export and list read a page at a time, and stop between two; verify
	// and compact finish the one read they are in, and then often their
	// work, before a stop can come.
	writes, paged := 0, map[string]bool{"export": true, "list": true}
	for _, argv := range [][]string{{"export"}, {"list", "--limit", "0"}, {"verify"}, {"compact"}} {
		for round := 0; round < 3; round++ {
			cmd := runWithLog(t, log, argv...)
			errOut := &lockedBuffer{}
			cmd.Stdout, cmd.Stderr = io.Discard, errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// Into the command's reads, at a different moment each round.
			time.Sleep(time.Duration(40+round*20) * time.Millisecond)
			if err := cmd.Process.Signal(syscall.SIGTSTP); err != nil && !errors.Is(err, os.ErrProcessDone) {
				t.Fatal(err) // done: it ended before it could stop
			}
			for deadline := time.Now().Add(20 * time.Second); !stopped(cmd.Process.Pid); time.Sleep(time.Millisecond) {
				select {
				case err := <-done: // it ended before it could stop
					done <- err
					deadline = time.Time{}
				default:
				}
				if time.Now().After(deadline) {
					break
				}
			}
			if !stopped(cmd.Process.Pid) {
				t.Logf("%v round %d ended before its stop", argv, round)
			}
			if stopped(cmd.Process.Pid) {
				if paged[argv[0]] {
					writes++
				}
				out, err := runWithLog(t, log, "--lock-timeout", "2s", "session", "start", fmt.Sprintf("w-%s-%d", argv[0], round)).CombinedOutput()
				if err != nil {
					cmd.Process.Signal(syscall.SIGCONT)
					t.Fatalf("a write while %v is stopped (round %d): %v\n%s", argv, round, err, out)
				}
				cmd.Process.Signal(syscall.SIGCONT)
			}
			if err := <-done; err != nil {
				t.Fatalf("%v once continued: %v\n%s", argv, err, errOut)
			}
		}
	}
	t.Logf("%d of export's and list's 6 stops caught the command before it ended", writes)
	if writes < 4 {
		t.Fatalf("only %d of export's and list's 6 stops caught the command before it ended: the log is too small to test", writes)
	}
	mustRun(t, log, "verify")
}

// The commands undolog starts (exec's, undo's compensations) can be stopped
// with Ctrl-Z: undolog catches SIGTSTP and never ignores it (a command
// inherits an ignored signal, and could not be stopped).
func TestStartedCommandsDoNotIgnoreCtrlZ(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc to read a process's ignored signals")
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "u.db")
	report := func(name string) string {
		return "grep SigIgn /proc/self/status > " + filepath.Join(dir, name)
	}
	undo, _ := json.Marshal([]string{"sh", "-c", report("undo")})
	mustRun(t, log, "exec", "--session", "s", "--undo", string(undo), "--", "sh", "-c", report("exec"))
	mustRun(t, log, "undo", "s", "--yes")
	for _, name := range []string{"exec", "undo"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s's command did not run: %v", name, err)
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(string(data), "SigIgn:")), 16, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", name, data, err)
		}
		if mask&(1<<(syscall.SIGTSTP-1)) != 0 {
			t.Errorf("%s's command started with Ctrl-Z ignored (SigIgn %016x)", name, mask)
		}
	}
}
