package cmd

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/filesnap"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// fileCall logs and commits a compensable call of session s whose file
// changes change() makes, snapshot before and after as the hook door does
// (paths nil: the whole project, a shell command).
func fileCall(t *testing.T, store effectlog.Log, project, tool string, paths []string, change func()) (uint64, string) {
	t.Helper()
	id, err := filesnap.Before(project, paths)
	if err != nil {
		t.Fatal(err)
	}
	comp := filesnap.CompensationFor(testbin.Undolog(t), filesnap.StoreDir(project), project, id)
	args, _ := json.Marshal(map[string]string{"snapshot": id})
	res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: tool, Tier: sm.Compensable,
		Args: args, Compensation: &comp, CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Start(t.Context(), res.Effect.ID, model.Change{}); err != nil {
		t.Fatal(err)
	}
	change()
	if err := filesnap.After(project, id); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(t.Context(), res.Effect.ID, model.Change{}); err != nil {
		t.Fatal(err)
	}
	return res.Effect.ID, id
}

func writeFile(t *testing.T, path, content string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

// Three calls that change the same file (a Write, a shell command, an
// Edit) are undone by the real undo, last in first out, back to the
// original bytes and mode; the shell command's created file is removed and
// its deleted file comes back. Undone in another order, a restore would
// find the file not as its call left it, and stop.
func TestUndoRestoresFilesLastInFirstOut(t *testing.T) {
	t.Setenv("UNDOLOG_FILES_DIR", t.TempDir())
	project := t.TempDir()
	f := filepath.Join(project, "-f \n✓.txt")
	writeFile(t, f, "original\n", 0o600)
	writeFile(t, filepath.Join(project, "gone.txt"), "deleted by the shell command", 0o644)
	db := filepath.Join(t.TempDir(), "u.db")
	store := logaddr.File(db, logaddr.Options{})
	fileCall(t, store, project, "Write", []string{f}, func() { writeFile(t, f, "one\n", 0o644) })
	fileCall(t, store, project, "Bash", nil, func() {
		writeFile(t, f, "two\n", 0o755)
		writeFile(t, filepath.Join(project, "made.txt"), "created by the shell command", 0o644)
		os.Remove(filepath.Join(project, "gone.txt"))
	})
	fileCall(t, store, project, "Edit", []string{f}, func() { writeFile(t, f, "three\n", 0o755) })

	code, stdout, stderr := undolog(t, db, "undo", "s", "--dry-run")
	if code != 0 {
		t.Fatalf("undo --dry-run: exit %d: %s", code, stderr)
	}
	want := []string{"effect 3 Edit", `restore "-f \n✓.txt" (modified by the call)`, "effect 2 Bash", `bring back "gone.txt" (deleted by the call)`, `remove "made.txt" (created by the call)`, "effect 1 Write"}
	at := 0
	for _, w := range want {
		i := strings.Index(stdout[at:], w)
		if i < 0 {
			t.Fatalf("undo --dry-run: no %q (in order) in:\n%s", w, stdout)
		}
		at += i
	}
	code, stdout, stderr = undolog(t, db, "undo", "s", "--yes")
	if code != 0 {
		t.Fatalf("undo: exit %d\n%s\n%s", code, stdout, stderr)
	}
	data, _ := os.ReadFile(f)
	info, _ := os.Stat(f)
	if string(data) != "original\n" || info.Mode().Perm() != 0o600 {
		t.Errorf("%s: %q mode %04o, want the original's bytes and mode 0600", f, data, info.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(project, "made.txt")); !os.IsNotExist(err) {
		t.Errorf("made.txt is still there: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(project, "gone.txt")); string(data) != "deleted by the shell command" {
		t.Errorf("gone.txt: %q", data)
	}
	// Done, the steps list no files left to restore.
	if _, stdout, _ = undolog(t, db, "undo", "s", "--dry-run"); !strings.Contains(stdout, "already") || strings.Contains(stdout, "by the call") {
		t.Errorf("undo --dry-run after the undo:\n%s", stdout)
	}
}

// A file changed since its call by someone else is not overwritten: the
// restore exits 12 naming it, and undo stops for a person (exit 9, the
// session halted) with the file as the other left it.
func TestUndoStopsAtAFileChangedSince(t *testing.T) {
	t.Setenv("UNDOLOG_FILES_DIR", t.TempDir())
	project := t.TempDir()
	f := filepath.Join(project, "notes.txt")
	writeFile(t, f, "original", 0o644)
	db := filepath.Join(t.TempDir(), "u.db")
	store := logaddr.File(db, logaddr.Options{})
	effect, snap := fileCall(t, store, project, "Write", []string{f}, func() { writeFile(t, f, "the agent's", 0o644) })
	writeFile(t, f, "a person's", 0o644)

	code, _, stderr := undolog(t, db, "files", "restore", "--store", filesnap.StoreDir(project), snap)
	if code != ExitFilesChanged || !strings.Contains(stderr, `"notes.txt"`) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("files restore: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := undolog(t, db, "undo", "s", "--yes")
	if code != ExitCompensation || !strings.Contains(stderr+stdout, `"notes.txt"`) {
		t.Fatalf("undo: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if data, _ := os.ReadFile(f); string(data) != "a person's" {
		t.Errorf("notes.txt: %q", data)
	}
	d, err := store.GetEffect(t.Context(), effect)
	if err != nil {
		t.Fatal(err)
	}
	if d.Undo.State != sm.EntryCompensationFailed {
		t.Errorf("undo entry %s", d.Undo.State)
	}
}

// files restore's bad input: a clear error and its code, nothing changed.
func TestFilesRestoreBadInput(t *testing.T) {
	db := filepath.Join(t.TempDir(), "u.db")
	store := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"files", "restore", "0123456789abcdef01234567"}, ExitUsage},
		{[]string{"files", "restore", "--store", store, "../../etc/passwd"}, ExitUsage},
		{[]string{"files", "restore", "--store", store, "0123456789abcdef01234567"}, ExitNotFound},
		{[]string{"files", "restore", "--store", store, "--dry-run", "0123456789abcdef01234567"}, ExitNotFound},
	} {
		code, stdout, stderr := undolog(t, db, c.args...)
		if code != c.code || stdout != "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || strings.Contains(stderr, "panic") {
			t.Errorf("%v: exit %d, want %d\n%s%s", c.args, code, c.code, stdout, stderr)
		}
	}
}

// A shell command that commits (the repository's own state, which a
// snapshot does not hold) is listed by undo --dry-run as not restorable,
// beside the directories an earlier call's restore removes and makes and
// the approval request undo closes; undo stops at it for a person (exit
// 9) and restores nothing of it, and files restore exits 12 naming .git.
func TestUndoStopsAtAChangeItCannotRestore(t *testing.T) {
	t.Setenv("UNDOLOG_FILES_DIR", t.TempDir())
	project := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = project
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@x", "GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@x")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	tracked := filepath.Join(project, "tracked.txt")
	writeFile(t, tracked, "original", 0o644)
	os.Mkdir(filepath.Join(project, "old"), 0o755)
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "first")
	db := filepath.Join(t.TempDir(), "u.db")
	store := logaddr.File(db, logaddr.Options{})
	fileCall(t, store, project, "Bash", nil, func() {
		os.Remove(filepath.Join(project, "old"))
		os.Mkdir(filepath.Join(project, "build"), 0o755)
		writeFile(t, filepath.Join(project, "build", "out"), "built", 0o644)
	})
	commit, snap := fileCall(t, store, project, "Bash", nil, func() {
		writeFile(t, tracked, "the agent's", 0o644)
		git("commit", "-qam", "second")
	})
	if _, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "deploy", Tier: sm.Irreversible, Args: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := undolog(t, db, "undo", "s", "--dry-run")
	if code != 0 {
		t.Fatalf("undo --dry-run: exit %d: %s", code, stderr)
	}
	for _, w := range []string{`CANNOT RESTORE ".git" (modified by the call): the git repository's own state`, `restore "tracked.txt"`,
		`remove directory "build" (created by the call)`, `bring back directory "old" (deleted by the call)`, "closes the approval request of effect 3 deploy"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("undo --dry-run: no %q in:\n%s", w, stdout)
		}
	}
	code, _, stderr = undolog(t, db, "files", "restore", "--store", filesnap.StoreDir(project), snap)
	if code != ExitFilesChanged || !strings.Contains(stderr, `".git"`) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("files restore: exit %d: %s", code, stderr)
	}
	code, stdout, stderr = undolog(t, db, "undo", "s", "--yes")
	if code != ExitCompensation || !strings.Contains(stderr+stdout, `".git"`) {
		t.Fatalf("undo: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if data, _ := os.ReadFile(tracked); string(data) != "the agent's" {
		t.Errorf("tracked.txt: %q, want the call's bytes left as they are", data)
	}
	if d, err := store.GetEffect(t.Context(), commit); err != nil || d.Undo.State != sm.EntryCompensationFailed {
		t.Errorf("undo entry of the commit: %v %v", d.Undo, err)
	}
}
