package cmd

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A FIFO at <log>-journal is refused with one line, at once: opening it
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
			os.Remove(db + "-journal")
			if err := syscall.Mkfifo(db+"-journal", 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := runWithLog(t, db, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if code := exitCodeOf(err); code == 0 || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
					t.Fatalf("exit %d, stderr %q: want one error line", code, stderr.String())
				}
			case <-time.After(5 * time.Second):
				cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-done:
					t.Fatalf("undolog %v hung on a FIFO journal (ended by SIGTERM)", args)
				case <-time.After(2 * time.Second):
					cmd.Process.Kill()
					<-done
					t.Fatalf("undolog %v hung on a FIFO journal and ignored SIGTERM", args)
				}
			}
		})
	}
}

// A symbolic link at <log>-journal is refused, and what it names is left
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
	os.Remove(db + "-journal")
	if err := os.Symlink(victim, db+"-journal"); err != nil {
		t.Fatal(err)
	}
	out, err := runWithLog(t, db, "session", "start", "b").CombinedOutput()
	if code := exitCodeOf(err); code != 1 || !strings.Contains(string(out), "u.db-journal is a symbolic link, not a regular file") {
		t.Fatalf("session start beside a journal symlink: exit %d %s", code, out)
	}
	fi, _ := os.Stat(victim)
	b, _ := os.ReadFile(victim)
	if string(b) != "keep me\n" || fi.Mode().Perm() != 0o644 {
		t.Fatalf("the journal symlink's target was changed: mode %v, %d bytes %q", fi.Mode().Perm(), len(b), b[:min(len(b), 16)])
	}
}

// An interrupt that comes just before the command starts is not lost: it
// stops exec before the command, or reaches the command (it once did
// neither in about one run in six, three runs side by side: the command ran
// to its end, committed, exit 0).
func TestInterruptJustBeforeTheCommandIsNotLost(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "u.db")
	if out, err := runWithLog(t, db, "session", "start", "s").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	var mu sync.Mutex
	var lost []string
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				mu.Lock()
				n := len(lost)
				mu.Unlock()
				if n > 0 {
					return
				}
				cmd := runWithLog(t, db, "exec", "--session", "s", "--key", fmt.Sprintf("w%d-%d", w, i), "--undo", "true", "--", "sh", "-c", "sleep 0.3; echo done")
				var stdout bytes.Buffer
				cmd.Stdout = &stdout
				if err := cmd.Start(); err != nil {
					t.Error(err)
					return
				}
				d := time.Duration(rand.IntN(6000)) * time.Microsecond
				time.Sleep(d)
				cmd.Process.Signal(syscall.SIGINT)
				if err := cmd.Wait(); exitCodeOf(err) == 0 {
					mu.Lock()
					lost = append(lost, fmt.Sprintf("SIGINT %v after start: exit 0, stdout %q", d, stdout.String()))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(lost) > 0 {
		t.Fatalf("an interrupt was lost: the command ran to its end and was committed: %v", lost)
	}
}
