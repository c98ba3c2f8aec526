package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/internal/testbin"
)

// `undolog man` writes the pages beside the binary, PREFIX/share/man/man1 for
// PREFIX/bin/undolog (where go install puts it), where man finds them for a
// command on the PATH, and says where.
func TestManPagesBesideTheBinary(t *testing.T) {
	prefix := t.TempDir()
	bin := filepath.Join(prefix, "bin", "undolog")
	data, err := os.ReadFile(testbin.Undolog(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "man")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_DATA_HOME=")
	out, err := cmd.CombinedOutput()
	dir := filepath.Join(prefix, "share", "man", "man1")
	if err != nil || !strings.Contains(string(out), dir) {
		t.Fatalf("undolog man: %v\n%s\nwant the pages in %s", err, out, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "undolog-exec.1")); err != nil {
		t.Fatal(err)
	}
	// Run through a link in another bin folder (~/.local/bin/undolog to a
	// build elsewhere), the pages go beside the link, where man looks for
	// the command found on the PATH.
	linked := t.TempDir()
	if err := os.MkdirAll(filepath.Join(linked, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(linked, "bin", "undolog")); err != nil {
		t.Fatal(err)
	}
	viaLink := exec.Command(filepath.Join(linked, "bin", "undolog"), "man")
	viaLink.Env = cmd.Env
	if out, err := viaLink.CombinedOutput(); err != nil || !strings.Contains(string(out), filepath.Join(linked, "share", "man", "man1")) {
		t.Fatalf("undolog man through a link: %v\n%s\nwant the pages beside the link", err, out)
	}
	if _, err := exec.LookPath("man"); err == nil {
		find := exec.Command("man", "-w", "undolog-exec")
		find.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "MANPATH=")
		if where, err := find.Output(); err != nil || strings.TrimSpace(string(where)) != filepath.Join(dir, "undolog-exec.1") {
			t.Fatalf("man -w undolog-exec with %s on PATH: %v %q", filepath.Dir(bin), err, where)
		}
	}
}
