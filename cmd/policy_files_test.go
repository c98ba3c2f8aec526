package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/internal/testbin"
)

// The proxy captures no files: a policy that leaves a tool's undo to the
// files (compensate: files, the hook's) is refused before a server starts,
// rather than its calls logged as undone by a capture that never happens.
func TestProxyRefusesCompensateFiles(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.yaml")
	os.WriteFile(pol, []byte("tools:\n  write_file: {compensate: files}\n"), 0o644)
	marker := filepath.Join(dir, "started")
	cmd := exec.Command(testbin.Undolog(t), "--log", filepath.Join(dir, "log.db"), "proxy", "--policy", pol, "--", "touch", marker)
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "write_file says compensate: files") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("proxy with compensate: files: %v\n%s\nwant exit 2 and one line naming the rule", err, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the server was started")
	}
}
