package filesnap

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// shell runs a shell command in dir, as a coding agent's Bash call does.
func shell(t *testing.T, dir, command string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@x", "GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@x")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
}

// TestShellCallsOnIgnoredFilesAndGit: what a shell command does to
// .gitignore'd files is undone like the rest; what it does to the
// repository's own state (.git) or to an ignored directory too large to
// hold is listed as not restorable, and the restore refuses the call's
// every change (ErrLost, naming it) rather than report it undone.
func TestShellCallsOnIgnoredFilesAndGit(t *testing.T) {
	defer func(dirs int, size int64) { ignoredDirLimit, ignoredFileLimit = dirs, size }(ignoredDirLimit, ignoredFileLimit)
	ignoredDirLimit, ignoredFileLimit = 20, 1<<20
	template := t.TempDir()
	write(t, template, ".gitignore", ".env\n/node_modules/\n/build/\n*.bin\n", 0o644)
	write(t, template, "tracked.txt", "tracked", 0o644)
	gitRepo(t, template)
	write(t, template, ".env", "SECRET=1\n", 0o600)
	write(t, template, "build/out/a.o", "built", 0o644)
	write(t, template, "new.txt", "untracked", 0o644)
	for i := range ignoredDirLimit + 1 {
		write(t, template, fmt.Sprintf("node_modules/m%d/f%d.js", i%5, i), "f", 0o644)
	}
	big, _ := os.Create(filepath.Join(template, "big.bin"))
	big.Truncate(ignoredFileLimit + 1)
	big.Close()
	for _, tc := range []struct {
		command string
		// lost is the path the restore must refuse at ("": it restores).
		lost string
	}{
		{"rm .env", ""},
		{"git clean -fdxq -e node_modules -e big.bin", ""},
		{"echo changed > tracked.txt && git commit -qam second", ".git"},
		{"git add new.txt", ".git"},
		// A refresh of the index's stat data (git status, git describe
		// --dirty) and a change of its format stage nothing.
		{"echo x > made.txt && touch tracked.txt && sleep 1 && git status --porcelain >/dev/null", ""},
		{"echo x > made.txt && git update-index --index-version 4", ""},
		{"git update-index --index-version 4 && git add new.txt", ".git"},
		{"echo changed > tracked.txt && rm -rf .git", ".git"},
		{"git checkout -qb other", ".git"},
		{"rm -rf node_modules", "node_modules"},
		{"touch node_modules/new.js", "node_modules"},
		{"rm -rf big.bin", "big.bin"},
	} {
		t.Run(tc.command, func(t *testing.T) {
			dir := project(t)
			shell(t, dir, "cp -a "+template+"/. .")
			// A first snapshot sees node_modules too large: the second is
			// the one a call's Before finds it so by.
			first, err := Before(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := After(dir, first); err != nil {
				t.Fatal(err)
			}
			id, err := Before(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			before := tree(t, dir)
			shell(t, dir, tc.command)
			changes := afterChanges(t, dir, id)
			s, _ := Open(dir)
			if len(changes) == 0 {
				t.Fatalf("no change listed")
			}
			left := tree(t, dir)
			_, err = s.Restore(id)
			if tc.lost == "" {
				if err != nil {
					t.Fatal(err)
				}
				sameTree(t, before, tree(t, dir))
				return
			}
			var lostPaths []string
			for _, c := range changes {
				if c.Lost != "" {
					lostPaths = append(lostPaths, c.Path)
				}
			}
			if fmt.Sprint(lostPaths) != fmt.Sprint([]string{tc.lost}) {
				t.Errorf("changes not restorable: %q, want %q", lostPaths, tc.lost)
			}
			if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), `"`+tc.lost+`"`) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("restore: %v, want one line of ErrLost naming %q", err, tc.lost)
			}
			sameTree(t, left, tree(t, dir))
		})
	}
}

// TestWriteThroughALinkOutside: a write through a project's symbolic link
// to a file outside the project is listed as not restorable, by a named
// and a whole-project snapshot: the restore refuses, writes nothing
// outside and leaves the link. A link made by the call to a file it did
// not write is a change of its own, restored.
func TestWriteThroughALinkOutside(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprint("whole=", whole), func(t *testing.T) {
			dir := project(t)
			outside := filepath.Join(t.TempDir(), "hosts")
			write(t, filepath.Dir(outside), "hosts", "outside", 0o644)
			if err := os.Symlink(outside, filepath.Join(dir, "hosts")); err != nil {
				t.Fatal(err)
			}
			var paths []string
			if !whole {
				paths = []string{"hosts"}
			}
			id, err := Before(dir, paths)
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Dir(outside), "hosts", "written through the link", 0o644)
			changes := afterChanges(t, dir, id)
			s, _ := Open(dir)
			if len(changes) != 1 || changes[0].Path != "hosts" || !strings.Contains(changes[0].Lost, outside) {
				t.Fatalf("changes %+v, want hosts not restorable, naming %s", changes, outside)
			}
			if _, err := s.Restore(id); !errors.Is(err, ErrLost) {
				t.Fatalf("restore: %v, want ErrLost", err)
			}
			if data, _ := os.ReadFile(outside); string(data) != "written through the link" {
				t.Errorf("outside file: %q", data)
			}
			if target, _ := os.Readlink(filepath.Join(dir, "hosts")); target != outside {
				t.Errorf("the link now leads to %q", target)
			}
		})
	}
	t.Run("link made", func(t *testing.T) {
		dir := project(t)
		outside := filepath.Join(t.TempDir(), "elsewhere")
		write(t, filepath.Dir(outside), "elsewhere", "outside", 0o644)
		id, err := Before(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		os.Symlink(outside, filepath.Join(dir, "link"))
		if got := after(t, dir, id); !maps.Equal(got, map[string]string{"link": "created"}) {
			t.Errorf("changes %v", got)
		}
		s, _ := Open(dir)
		if _, err := s.Restore(id); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "link")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the link is still there: %v", err)
		}
	})
}

// TestRestoreChangesNothingBeforeStopping: a call replaced a file by a
// directory of its own files, and someone else put a file in that
// directory since: the restore stops there (ErrChanged naming it) before
// it removes any of the call's files.
func TestRestoreChangesNothingBeforeStopping(t *testing.T) {
	dir := project(t)
	write(t, dir, "d", "a file", 0o644)
	id, err := Before(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "d"))
	write(t, dir, "d/the-calls", "the call's", 0o644)
	if err := After(dir, id); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "d/someone-elses", "someone else's", 0o644)
	want := tree(t, dir)
	s, _ := Open(dir)
	if _, err := s.Restore(id); !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), `"d/someone-elses"`) {
		t.Fatalf("restore: %v, want ErrChanged naming d/someone-elses", err)
	}
	sameTree(t, want, tree(t, dir))
}
