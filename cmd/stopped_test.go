package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
