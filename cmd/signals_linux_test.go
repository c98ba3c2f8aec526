package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A quick command signalled as soon as its code runs (the moment it first
// opens its log, seen with inotify) ends as an interrupt: exit 130, or its
// own exit code when it finished first; never killed by the signal. Twice
// over: while it waits for a log another process holds (it must end with
// 130, at once, having written nothing), and on a free log.
func TestSignalsAreCaughtFromTheStart(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "u.db")
	if out, err := runWithLog(t, db, "session", "start", "s").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	quick := [][]string{
		{"--lock-timeout", "10s", "intercept", "--session", "s", "--tool", "w", "--tier", "compensable", "--args", `{}`},
		{"--lock-timeout", "10s", "list"},
	}
	for _, busy := range []bool{true, false} {
		var held *os.File // another process's lock on the log, as holdLog takes it
		if busy {
			var err error
			if held, err = os.OpenFile(db, os.O_RDWR, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}
		}
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			for _, argv := range quick {
				for round := 0; round < 3; round++ {
					code, stderr := signalOnOpen(t, db, sig, argv)
					what := fmt.Sprintf("%v sent to undolog %s as it opened its log (busy %v, round %d)", sig, strings.Join(argv, " "), busy, round)
					switch {
					case code < 0:
						t.Fatalf("%s: killed by the signal (%s)", what, stderr)
					case busy && (code != ExitInterrupted || !strings.Contains(stderr, "interrupted by a signal")):
						t.Fatalf("%s: exit %d, %q; want 130, interrupted by a signal", what, code, stderr)
					case !busy && code != ExitInterrupted && code != ExitOK:
						t.Fatalf("%s: exit %d, %q; want 130, or 0 when it finished first", what, code, stderr)
					}
				}
			}
		}
		if held != nil {
			held.Close()
		}
	}
	// An interrupted intercept wrote nothing when it waited; on a free log
	// each either wrote its one effect (the same call, replayed) or none.
	if out, _ := runWithLog(t, db, "list", "-o", "ids").Output(); len(bytes.Fields(out)) > 1 {
		t.Fatalf("the intercepts of one call left effects %s", out)
	}
}

// signalOnOpen starts undolog argv on the log db, sends it sig the moment
// it first opens db, and returns its exit code (-1 when the signal killed
// it) and stderr.
func signalOnOpen(t *testing.T, db string, sig syscall.Signal, argv []string) (int, string) {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	events := os.NewFile(uintptr(fd), "inotify") // non-blocking: read deadlines work
	defer events.Close()
	if _, err := syscall.InotifyAddWatch(fd, db, syscall.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	cmd := runWithLog(t, db, argv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	events.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 4096)
	n, err := events.Read(buf)
	if err != nil || n < syscall.SizeofInotifyEvent {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("undolog %v never opened its log: %v (%d bytes)", argv, err, n)
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
		return -1, stderr.String()
	}
	return exitCodeOf(err), stderr.String()
}
