package filesnap

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// hostile are file names a restore must handle as any other.
var hostile = []string{"a b.txt", "new\nline", "ünïcödé ✓.txt", "-leading-dash", "--", "sub dir/-x y"}

// project makes a project directory and a store root for it.
func project(t *testing.T) string {
	t.Helper()
	t.Setenv("UNDOLOG_FILES_DIR", t.TempDir())
	return t.TempDir()
}

func write(t *testing.T, dir, rel, content string, perm fs.FileMode) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Remove(p)
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}

// tree is what a directory holds, .git aside: each path's kind, mode and
// bytes (a link's target).
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Name() == ".git" && d.IsDir() {
			return filepath.SkipDir
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			got[rel] = "dir"
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			got[rel] = "link " + target
		default:
			data, _ := os.ReadFile(p)
			got[rel] = fmt.Sprintf("file %04o %q", info.Mode().Perm(), data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sameTree(t *testing.T, want, got map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("%q: %s, want %s", k, got[k], want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%q: %s, want it absent", k, got[k])
		}
	}
}

// after runs After for snapshot id and says what each changed path went
// through.
func after(t *testing.T, dir, id string) map[string]string {
	t.Helper()
	return whats(afterChanges(t, dir, id))
}

// afterChanges runs After for snapshot id and returns its changes.
func afterChanges(t *testing.T, dir, id string) []Change {
	t.Helper()
	if err := After(dir, id); err != nil {
		t.Fatal(err)
	}
	s, _ := Open(dir)
	changes, err := s.Changes(id)
	if err != nil {
		t.Fatal(err)
	}
	return changes
}

// whats says what each change did, a directory's path ending in "/".
func whats(changes []Change) map[string]string {
	m := map[string]string{}
	for _, c := range changes {
		if c.Before.Kind == directory || c.After.Kind == directory {
			m[c.Path+"/"] = c.What()
		} else {
			m[c.Path] = c.What()
		}
	}
	return m
}

// TestNamedFilesRestore: a Write or Edit's snapshot (named files) restores
// modified, created and deleted files byte for byte with their exact modes.
func TestNamedFilesRestore(t *testing.T) {
	dir := project(t)
	write(t, dir, "a b.txt", "one\r\ntwo\n", 0o600)
	write(t, dir, "ünïcödé ✓.txt", "", 0o755) // empty, executable
	write(t, dir, "-leading-dash", "dash", 0o640)
	if err := os.Symlink("a b.txt", filepath.Join(dir, "--")); err != nil {
		t.Fatal(err)
	}
	want := tree(t, dir)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.Before(append(slices.Clone(hostile), filepath.Join(dir, "a b.txt")))
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "a b.txt", "changed", 0o644)
	write(t, dir, "ünïcödé ✓.txt", "now not empty", 0o755)
	write(t, dir, "new\nline", "created", 0o600)
	write(t, dir, "sub dir/-x y", "created in a new dir", 0o600)
	os.Remove(filepath.Join(dir, "-leading-dash"))
	os.Remove(filepath.Join(dir, "--"))
	if err := os.WriteFile(filepath.Join(dir, "--"), []byte("a link replaced by a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.After(id); err != nil {
		t.Fatal(err)
	}
	changes, err := s.Changes(id)
	if err != nil {
		t.Fatal(err)
	}
	wantWhat := map[string]string{"a b.txt": "modified", "ünïcödé ✓.txt": "modified", "new\nline": "created", "sub dir/-x y": "created", "sub dir/": "created", "-leading-dash": "deleted", "--": "modified"}
	if got := whats(changes); !maps.Equal(got, wantWhat) {
		t.Errorf("changes %v, want %v", got, wantWhat)
	}
	if _, err := s.Restore(id); err != nil {
		t.Fatal(err)
	}
	sameTree(t, want, tree(t, dir))
	// Run again (an undo retried), it finds everything restored.
	if _, err := s.Restore(id); err != nil {
		t.Fatalf("a second restore: %v", err)
	}
	sameTree(t, want, tree(t, dir))
}

// TestNamedFileMode: a call that changes only a file's mode is undone.
func TestNamedFileMode(t *testing.T) {
	dir := project(t)
	write(t, dir, "f", "x", 0o600)
	want := tree(t, dir)
	id, err := Before(dir, []string{"f"})
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "f"), 0o644)
	if err := After(dir, id); err != nil {
		t.Fatal(err)
	}
	s, _ := Open(dir)
	if _, err := s.Restore(id); err != nil {
		t.Fatal(err)
	}
	sameTree(t, want, tree(t, dir))
}

// TestNamedFileOutside: a path outside the project is refused.
func TestNamedFileOutside(t *testing.T) {
	dir := project(t)
	for _, p := range []string{"../x", "/etc/passwd", "."} {
		if _, err := Before(dir, []string{p}); err == nil {
			t.Errorf("Before(%q) took a path outside the project", p)
		}
	}
}

// gitRepo makes dir a git repository of the user's, with a commit, and
// returns a hash of everything its .git holds.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// hashDir hashes every name, mode, mtime and byte under dir.
func hashDir(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%q %v %d\n", p, info.Mode(), info.ModTime().UnixNano())
		if info.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			h.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestProjectRestore: a shell command's snapshot (the whole project)
// restores what it created, modified and deleted, including a file
// replaced by a directory, a directory replaced by a file, modes, a
// symbolic link, empty directories, a repository's files inside the
// project and hostile names; the user's own repository is not touched;
// .gitignore'd files are restored too.
func TestProjectRestore(t *testing.T) {
	dir := project(t)
	write(t, dir, ".gitattributes", "* text=auto eol=lf\n", 0o644) // would convert line endings
	write(t, dir, "crlf.txt", "one\r\ntwo\r\n", 0o644)
	write(t, dir, "run.sh", "#!/bin/sh\n", 0o755)
	write(t, dir, "plain", "plain", 0o644)
	write(t, dir, "becomes-dir", "a file", 0o644)
	write(t, dir, "was-dir/inner", "inner", 0o644)
	write(t, dir, "deep/er/file", "deep", 0o755)
	write(t, dir, "empty", "", 0o644)
	write(t, dir, "secret", "mode 0600, deleted", 0o600)
	write(t, dir, "nested/inner.txt", "a repository inside the project", 0o644)
	gitRepo(t, filepath.Join(dir, "nested"))
	if err := os.MkdirAll(filepath.Join(dir, "empty-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "node_modules/big/x.js", "ignored dir", 0o644)
	write(t, dir, ".gitignore", "*.log\n/node_modules/\n", 0o644)
	for _, name := range hostile {
		write(t, dir, name, "hostile "+name, 0o644)
	}
	if err := os.Symlink("/nowhere/absolute", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	gitRepo(t, dir)
	write(t, dir, "old.log", "ignored", 0o644)
	userGit := hashDir(t, filepath.Join(dir, ".git"))
	id, err := Before(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := tree(t, dir)

	write(t, dir, "crlf.txt", "lf\n", 0o644)
	os.Chmod(filepath.Join(dir, "run.sh"), 0o644)
	os.Chmod(filepath.Join(dir, "plain"), 0o755)
	os.Remove(filepath.Join(dir, "becomes-dir"))
	write(t, dir, "becomes-dir/now-inside", "x", 0o644)
	os.RemoveAll(filepath.Join(dir, "was-dir"))
	write(t, dir, "was-dir", "now a file", 0o644)
	os.RemoveAll(filepath.Join(dir, "deep"))
	write(t, dir, "empty", "not empty", 0o644)
	write(t, dir, "new/dir/made", "made", 0o644)
	for _, name := range hostile {
		write(t, dir, name, "changed", 0o644)
	}
	write(t, dir, "-new\nhostile ✓", "", 0o644)
	os.Remove(filepath.Join(dir, "link"))
	os.Symlink("plain", filepath.Join(dir, "link"))
	write(t, dir, "new.log", "ignored, created", 0o644)
	os.Remove(filepath.Join(dir, "secret"))
	os.Remove(filepath.Join(dir, "empty-dir"))
	write(t, dir, "nested/inner.txt", "changed in the nested repository", 0o644)
	write(t, dir, "node_modules/big/x.js", "ignored, changed", 0o644)
	if err := os.MkdirAll(filepath.Join(dir, "new-empty-dir"), 0o755); err != nil {
		t.Fatal(err)
	}

	got := after(t, dir, id)
	for path, what := range map[string]string{"crlf.txt": "modified", "run.sh": "modified", "becomes-dir": "deleted", "becomes-dir/now-inside": "created",
		"was-dir/inner": "deleted", "was-dir": "created", "deep/er/file": "deleted", "new/dir/made": "created", "-new\nhostile ✓": "created", "link": "modified", "a b.txt": "modified", "secret": "deleted", "nested/inner.txt": "modified",
		"new.log": "created", "node_modules/big/x.js": "modified", "becomes-dir/": "created", "was-dir/": "deleted", "deep/": "deleted", "deep/er/": "deleted",
		"new/": "created", "new/dir/": "created", "empty-dir/": "deleted", "new-empty-dir/": "created"} {
		if got[path] != what {
			t.Errorf("%q: %q, want %q", path, got[path], what)
		}
	}
	s, _ := Open(dir)
	if _, err := s.Restore(id); err != nil {
		t.Fatal(err)
	}
	sameTree(t, want, tree(t, dir))
	if h := hashDir(t, filepath.Join(dir, ".git")); h != userGit {
		t.Errorf("the user's .git changed")
	}
}

// TestRestoreRefusesChangedSince: a file changed since the call by
// someone else is not overwritten: the restore names it and changes
// nothing.
func TestRestoreRefusesChangedSince(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprint("whole=", whole), func(t *testing.T) {
			dir := project(t)
			write(t, dir, "mine", "before", 0o644)
			write(t, dir, "other", "before", 0o644)
			var paths []string
			if !whole {
				paths = []string{"mine", "other", "gone"}
			}
			id, err := Before(dir, paths)
			if err != nil {
				t.Fatal(err)
			}
			write(t, dir, "mine", "the call", 0o644)
			write(t, dir, "other", "the call", 0o644)
			if err := After(dir, id); err != nil {
				t.Fatal(err)
			}
			write(t, dir, "other", "someone else", 0o644)
			want := tree(t, dir)
			s, _ := Open(dir)
			_, err = s.Restore(id)
			if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), `"other"`) {
				t.Fatalf("restore: %v, want ErrChanged naming other", err)
			}
			sameTree(t, want, tree(t, dir))
		})
	}
}

// TestStoreOutsideProject: the store is not in the project, and the
// restore's compensation names it.
func TestCompensation(t *testing.T) {
	dir := project(t)
	id, err := Before(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the project holds %v after a snapshot", entries)
	}
	c := Compensation(dir, id)
	store, got, ok := ParseRestore(c)
	if !ok || got != id || store != StoreDir(dir) || c.Dir != dir {
		t.Errorf("ParseRestore(%v) = %q %q %v", c, store, got, ok)
	}
	if _, _, ok := ParseRestore(CompensationFor("undolog", store, dir, "../../etc")); ok {
		t.Errorf("ParseRestore took an id that is a path")
	}
}

// TestProjectSnapshotsInARow: a later snapshot trusts the stat data of
// the last one, yet sees a change of the same size that put the mtime
// back, and a .gitignore that no longer ignores a file.
func TestProjectSnapshotsInARow(t *testing.T) {
	dir := project(t)
	write(t, dir, ".gitignore", "*.tmp\n", 0o644)
	write(t, dir, "a.tmp", "ignored at first", 0o644)
	write(t, dir, "same-size", "aaaa", 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(dir, "same-size"), old, old)
	call := func(change func()) map[string]string {
		t.Helper()
		id, err := Before(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		change()
		return after(t, dir, id)
	}
	if got := call(func() {}); len(got) != 0 {
		t.Fatalf("a call that changed nothing changed %v", got)
	}
	got := call(func() {
		write(t, dir, "same-size", "bbbb", 0o644)
		os.Chtimes(filepath.Join(dir, "same-size"), old, old)
	})
	if !maps.Equal(got, map[string]string{"same-size": "modified"}) {
		t.Errorf("same size, same mtime: %v", got)
	}
	write(t, dir, ".gitignore", "", 0o644)
	if got := call(func() { write(t, dir, "a.tmp", "no longer ignored", 0o644) }); !maps.Equal(got, map[string]string{"a.tmp": "modified"}) {
		t.Errorf("after .gitignore changed: %v", got)
	}
}

// git is asked whether a new path is ignored only where a .gitignore on
// its way (or the store's info/exclude) could say so: a project without
// one is scanned without running git, and one with a .gitignore in a
// directory (or a pattern in the store's info/exclude) still has git judge
// what is new under it.
func TestCheckIgnoreOnlyUnderAGitignore(t *testing.T) {
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	wrapper := "#!/bin/sh\necho \"$1\" >> '" + calls + "'\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	checkIgnores := func() int {
		data, _ := os.ReadFile(calls)
		return strings.Count(string(data), "check-ignore\n")
	}

	dir := project(t)
	write(t, dir, "a.txt", "a", 0o644)
	write(t, dir, "sub/b.txt", "b", 0o644)
	id, err := Before(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "new.txt", "new", 0o644)
	write(t, dir, "sub/deeper/new.log", "new", 0o644)
	got := after(t, dir, id)
	if n := checkIgnores(); n != 0 {
		t.Errorf("git check-ignore ran %d times in a project without a .gitignore", n)
	}
	if got["new.txt"] != "created" || got["sub/deeper/new.log"] != "created" {
		t.Errorf("without a .gitignore: %v", got)
	}

	// A pattern in the store's info/exclude applies everywhere.
	exclude := filepath.Join(StoreDir(dir), "git", "info", "exclude")
	if err := os.WriteFile(exclude, []byte("# comment\n*.tmp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if id, err = Before(dir, nil); err != nil {
		t.Fatal(err)
	}
	before := checkIgnores()
	write(t, dir, "scratch.tmp", "excluded", 0o644)
	// An ignored file is held as any other (ignored directories are held
	// up to a bound): git is asked which paths are ignored.
	if got = after(t, dir, id); got["scratch.tmp"] != "created" || checkIgnores() == before {
		t.Errorf("with a pattern in info/exclude: %v, git check-ignore ran %d times", got, checkIgnores()-before)
	}
	if err := os.WriteFile(exclude, []byte("# comment\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	write(t, dir, "sub/.gitignore", "*.log\n", 0o644)
	id, err = Before(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	before = checkIgnores()
	write(t, dir, "top.log", "not ignored: no .gitignore at the top", 0o644)
	write(t, dir, "sub/deeper/other.log", "ignored", 0o644)
	got = after(t, dir, id)
	if checkIgnores() == before {
		t.Errorf("git check-ignore did not run for a new path under a .gitignore")
	}
	if got["top.log"] != "created" || got["sub/deeper/other.log"] != "created" {
		t.Errorf("under a .gitignore: %v, want both created (ignored files are held too)", got)
	}
}
