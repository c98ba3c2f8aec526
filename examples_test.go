package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's scripted tour runs on a fresh clone, writes no escape
// sequence into a pipe, and leaves nothing behind.
func TestQuickstartRunsAndLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds undolog")
	}
	tmp := t.TempDir()
	cmd := exec.Command("bash", "examples/quickstart.sh")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "UNDOLOG_LOG=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.ContainsRune(string(out), '\x1b') {
		t.Fatalf("escape sequences in piped output:\n%q", out)
	}
	if !strings.Contains(string(out), "ok: 1 session") {
		t.Fatalf("the tour did not end verified:\n%s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
