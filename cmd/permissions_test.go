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
	if code != 1 || !strings.Contains(out, logPath+"-journal: permission denied") {
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
	if info, err := os.Stat(logPath + "-journal"); err != nil || info.Size() == 0 {
		t.Fatalf("journal: %v %v", info, err)
	}
	before, _ := os.ReadFile(logPath)
	beforeJournal, _ := os.ReadFile(logPath + "-journal")
	out, code = run(true, "list", "-o", "ids")
	if ids := strings.Fields(out); code != 0 || len(ids) < 2 || ids[len(ids)-2] != "2" || ids[len(ids)-1] != "1" {
		t.Fatalf("read-only log, read: exit %d: %q", code, out)
	}
	out, code = run(true, "intercept", "--session", "s", "--tool", "t2", "--tier", "compensable")
	if code != 1 || !strings.Contains(out, logPath) || !strings.Contains(out, "permission denied") {
		t.Fatalf("read-only log, write: exit %d: %q", code, out)
	}
	after, _ := os.ReadFile(logPath)
	afterJournal, _ := os.ReadFile(logPath + "-journal")
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
test -s "$UNDOLOG_LOG-journal"
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
