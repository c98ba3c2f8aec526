package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/internal/testbin"
)

// A log that the user may not write, or not read at all, gets a clear
// one-line error naming the file, exit 1, and stays as it was. Root reads
// and writes anything, so the commands run as nobody (setpriv).
func TestPermissionDeniedAndReadOnlyLog(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run commands as another user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv not installed")
	}
	bin := testbin.Undolog(t)
	os.Chmod(filepath.Dir(bin), 0o755)
	dir, err := os.MkdirTemp("", "undolog-perm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	logPath := filepath.Join(dir, "undolog.db")
	run := func(asNobody bool, args ...string) (string, int) {
		argv := append([]string{bin}, args...)
		if asNobody {
			argv = append([]string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}, argv...)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+logPath, "HOME=/nonexistent")
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := run(false, "intercept", "--session", "s", "--tool", "t", "--tier", "compensable"); code != 0 {
		t.Fatalf("setup: %s", out)
	}
	// 0600, owned by root: nobody may not read it.
	out, code := run(true, "list")
	if code != 1 || !strings.Contains(out, logPath) || !strings.Contains(out, "permission denied") || strings.Count(out, "\n") != 1 {
		t.Fatalf("unreadable log: exit %d: %q", code, out)
	}
	// 0644: nobody may read it but not write it, so nobody cannot apply the
	// write still in its journal, and says so.
	os.Chmod(logPath, 0o644)
	out, code = run(true, "list", "-o", "ids")
	if code != 1 || !strings.Contains(out, logPath+".undolog-journal: permission denied") {
		t.Fatalf("read-only log with a journal: exit %d: %q", code, out)
	}
	// Once its owner has read it (which gives the journal the log's mode,
	// and writes nothing else), nobody can too: the write still only in the
	// journal included, laid over the log in memory.
	if out, code := run(false, "list"); code != 0 {
		t.Fatalf("owner's read: %s", out)
	}
	if out, code := run(false, "intercept", "--session", "s", "--tool", "t1", "--tier", "compensable"); code != 0 {
		t.Fatalf("owner's write: %s", out)
	}
	if info, err := os.Stat(logPath + ".undolog-journal"); err != nil || info.Size() == 0 {
		t.Fatalf("journal: %v %v", info, err)
	}
	before, _ := os.ReadFile(logPath)
	beforeJournal, _ := os.ReadFile(logPath + ".undolog-journal")
	out, code = run(true, "list", "-o", "ids")
	if ids := strings.Fields(out); code != 0 || len(ids) < 2 || ids[len(ids)-2] != "2" || ids[len(ids)-1] != "1" {
		t.Fatalf("read-only log, read: exit %d: %q", code, out)
	}
	out, code = run(true, "intercept", "--session", "s", "--tool", "t2", "--tier", "compensable")
	if code != 1 || !strings.Contains(out, logPath) || !strings.Contains(out, "permission denied") {
		t.Fatalf("read-only log, write: exit %d: %q", code, out)
	}
	after, _ := os.ReadFile(logPath)
	afterJournal, _ := os.ReadFile(logPath + ".undolog-journal")
	if string(before) != string(after) || string(beforeJournal) != string(afterJournal) {
		t.Fatal("the log changed")
	}
}

// On a read-only file system, with writes still in the journal, reads work
// and see them, laid over the log in memory; a write fails with one line.
func TestReadOnlyFileSystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a file system")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare not installed")
	}
	bin := testbin.Undolog(t)
	dir := t.TempDir()
	script := `set -e
mount -t tmpfs tmpfs "$D" || exit 99
export UNDOLOG_LOG="$D/undolog.db"
"$UNDOLOG" intercept --session s --tool one --tier compensable >/dev/null
"$UNDOLOG" intercept --session s --tool two --tier compensable >/dev/null
test -s "$UNDOLOG_LOG.undolog-journal"
mount -o remount,ro "$D"
"$UNDOLOG" list -o ids
"$UNDOLOG" show 2 -o json | grep '"tool": "two"'
"$UNDOLOG" export >/dev/null
set +e
"$UNDOLOG" intercept --session s --tool three --tier compensable 2>&1
echo "write exit $?"
`
	cmd := exec.Command(unshare, "-m", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "D="+dir, "UNDOLOG="+bin)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 99 {
		t.Skipf("cannot mount here: %s", out)
	} else if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 5 || lines[0] != "2" || lines[1] != "1" || !strings.Contains(lines[len(lines)-2], "read-only file system") || lines[len(lines)-1] != "write exit 1" {
		t.Fatalf("%s", out)
	}
}

// In a directory others may write (mode 1777), a journal or a log that
// another user made first is refused to every writer, with one line naming
// the file, exit 1 (exec: 125), nothing run and nothing written: its owner
// would read every call's arguments and results there. Reading another
// user's log works as before (issue 28, item 7).
func TestFilesOfAnotherUserAreRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run commands as another user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv not installed")
	}
	bin := testbin.Undolog(t)
	os.Chmod(filepath.Dir(bin), 0o755)
	dir, err := os.MkdirTemp("", "undolog-shared-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777|os.ModeSticky)
	logPath := filepath.Join(dir, "undolog.db")
	journalPath := logPath + ".undolog-journal"
	run := func(asNobody bool, args ...string) (string, int) {
		argv := append([]string{bin}, args...)
		if asNobody {
			argv = append([]string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}, argv...)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+logPath, "HOME=/nonexistent", "UNDOLOG_SESSION=s")
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	// nobodysJournal is a journal nobody makes, open to anyone's writes.
	nobodysJournal := func() {
		t.Helper()
		if out, code := run(true, "--version"); code != 0 {
			t.Fatalf("nobody cannot run undolog: %s", out)
		}
		cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", `umask 0 && : > "$0"`, journalPath)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nobody's journal: %v %s", err, out)
		}
	}
	refused := func(file string, wantCode int, args ...string) {
		t.Helper()
		out, code := run(false, args...)
		var errs []string // what is not a warning (a log others may read gets one)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(line, "undolog: warning: ") {
				errs = append(errs, line)
			}
		}
		if code != wantCode || len(errs) != 1 || !strings.Contains(errs[0], file+" belongs to user 65534") || !strings.HasSuffix(errs[0], "permission denied") {
			t.Fatalf("%v: exit %d: %q", args, code, out)
		}
	}
	writes := func(file string) {
		t.Helper()
		refused(file, 1, "intercept", "--tool", "t2", "--tier", "compensable")
		refused(file, 1, "session", "start", "other")
		refused(file, 125, "exec", "--", "touch", "ran")
		if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
			t.Fatal("exec ran its command")
		}
	}

	// Before the log exists: no log is made, nothing goes in the journal.
	nobodysJournal()
	writes(journalPath)
	if _, err := os.Stat(logPath); !os.IsNotExist(err) {
		t.Fatalf("a log was made: %v", err)
	}
	if info, err := os.Stat(journalPath); err != nil || info.Size() != 0 {
		t.Fatalf("journal: %v %v", info, err)
	}
	os.Remove(journalPath)

	// After: a log of root's whose journal was taken away (a copy, a restore).
	if out, code := run(false, "intercept", "--tool", "t1", "--tier", "compensable"); code != 0 {
		t.Fatalf("setup: %s", out)
	}
	os.Remove(journalPath)
	nobodysJournal()
	before, _ := os.ReadFile(logPath)
	writes(journalPath)
	if after, _ := os.ReadFile(logPath); string(after) != string(before) {
		t.Fatal("the log changed")
	}
	if info, err := os.Stat(journalPath); err != nil || info.Size() != 0 {
		t.Fatalf("journal: %v %v", info, err)
	}
	os.Remove(logPath)
	os.Remove(journalPath)

	// A log nobody made first, open to anyone's writes.
	if out, code := run(true, "intercept", "--tool", "t1", "--tier", "compensable"); code != 0 {
		t.Fatalf("nobody's log: %s", out)
	}
	os.Chmod(logPath, 0o666)
	os.Chmod(journalPath, 0o666)
	before, _ = os.ReadFile(logPath)
	beforeJournal, _ := os.ReadFile(journalPath)
	writes(logPath)
	if after, _ := os.ReadFile(logPath); string(after) != string(before) {
		t.Fatal("the log changed")
	}
	if after, _ := os.ReadFile(journalPath); string(after) != string(beforeJournal) {
		t.Fatal("the journal changed")
	}
	// Read, it is read as before.
	os.Chmod(logPath, 0o644)
	os.Chmod(journalPath, 0o644)
	if out, code := run(false, "list", "-o", "ids"); code != 0 || !strings.HasSuffix(out, "\n1\n") { // after the warning that others may read it
		t.Fatalf("another user's log, read: exit %d: %q", code, out)
	}
}
