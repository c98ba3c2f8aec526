package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGeneratesManPagesAndCompletions(t *testing.T) {
	dir := t.TempDir()
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"man/undolog.1", "man/undolog-undo.1", "man/undolog-session-start.1",
		"completions/undolog.bash", "completions/_undolog", "completions/undolog.fish", "completions/undolog.ps1"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "undolog") {
			t.Errorf("%s does not mention undolog", name)
		}
	}
	page, _ := os.ReadFile(filepath.Join(dir, "man/undolog-approve.1"))
	if !strings.Contains(string(page), `approvals \-o ids`) {
		t.Errorf("approve's man page lacks its example")
	}
}
