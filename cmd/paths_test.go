package cmd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO at <log>.undolog-journal is refused with one line, at once: opening it
// would wait for a writer for ever.
func TestJournalThatIsAFIFOIsRefused(t *testing.T) {
	for _, args := range [][]string{{"list"}, {"session", "start", "s"}} {
		t.Run(args[0], func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "u.db")
			if out, err := runWithLog(t, db, "session", "start", "a").CombinedOutput(); err != nil {
				t.Fatalf("%v %s", err, out)
			}
			if out, err := runWithLog(t, db, "compact").CombinedOutput(); err != nil {
				t.Fatalf("%v %s", err, out)
			}
			os.Remove(db + ".undolog-journal")
			if err := syscall.Mkfifo(db+".undolog-journal", 0o600); err != nil {
				t.Fatal(err)
			}
			code, stderr := oneLineEnd(t, runWithLog(t, db, args...))
			if code != 1 || !strings.Contains(stderr, "u.db.undolog-journal is a named pipe, not a regular file") {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
		})
	}
}

// A symbolic link at <log>.undolog-journal is refused, and what it names is left
// as it was: followed, it would get the journal's records and the log's
// mode (/dev/null made 0600, as root).
func TestJournalThatIsASymlinkIsRefused(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "u.db")
	if out, err := runWithLog(t, db, "session", "start", "a").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := runWithLog(t, db, "compact").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(db + ".undolog-journal")
	if err := os.Symlink(victim, db+".undolog-journal"); err != nil {
		t.Fatal(err)
	}
	out, err := runWithLog(t, db, "session", "start", "b").CombinedOutput()
	if code := exitCodeOf(err); code != 1 || !strings.Contains(string(out), "u.db.undolog-journal is a symbolic link, not a regular file") {
		t.Fatalf("session start beside a journal symlink: exit %d %s", code, out)
	}
	fi, _ := os.Stat(victim)
	b, _ := os.ReadFile(victim)
	if string(b) != "keep me\n" || fi.Mode().Perm() != 0o644 {
		t.Fatalf("the journal symlink's target was changed: mode %v, %d bytes %q", fi.Mode().Perm(), len(b), b[:min(len(b), 16)])
	}
}

// A log path that names a FIFO is refused as a directory is ("not a valid
// undolog log", exit 1), at once: opening it would wait for a writer.
func TestLogThatIsAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	if code, stderr := oneLineEnd(t, runWithLog(t, fifo, "list")); code != 1 || !strings.Contains(stderr, "is a named pipe, not a regular file") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// oneLineEnd runs cmd, which must end within 5 s with one line on stderr
// (else it is sent SIGTERM, then killed, and the test fails), and returns
// its exit code and that line.
func oneLineEnd(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if lines := strings.Count(strings.TrimSpace(stderr.String()), "\n") + 1; lines != 1 {
			t.Fatalf("%d lines on stderr: %q", lines, stderr.String())
		}
		return exitCodeOf(err), strings.TrimSpace(stderr.String())
	case <-time.After(5 * time.Second):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		t.Fatalf("%v hung for 5s (ended by SIGTERM: %q)", cmd.Args, stderr.String())
	case <-time.After(2 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v hung for 5s and SIGTERM did not end it", cmd.Args)
	}
	return 0, ""
}
