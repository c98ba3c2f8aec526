package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	// Piped, as a tutorial is (| tee), its tables still say what each column is.
	if !strings.Contains(string(out), "\nID\tSESSION\tTOOL\tWAITING\tEXPIRES\tARGS\n") {
		t.Fatalf("the approvals table has no header row:\n%s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// Every MCP server the examples, the README and the commands' help run
// with npx names its version: undo starts the recorded command again, and an
// unpinned one may be another version by then (docs/proxy.md).
func TestExamplesPinTheirServers(t *testing.T) {
	npx := regexp.MustCompile(`npx(?:\s+-y)?\s+(@[\w.-]+/[\w.-]+)(@[0-9][\w.-]*)?`)
	var files []string
	for _, glob := range []string{"examples/*", "README.md", "docs/*.md", "docs/cli/*.md"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	seen := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range npx.FindAllStringSubmatch(string(data), -1) {
			seen++
			if m[2] == "" {
				t.Errorf("%s runs %s unpinned: %q (name its version, %s@VERSION)", f, m[1], m[0], m[1])
			}
		}
	}
	if seen == 0 {
		t.Fatal("no npx command found: the pattern no longer matches the examples")
	}
}
