package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestGeneratesManPagesAndCompletions(t *testing.T) {
	dir := t.TempDir()
	if err := run("", dir); err != nil {
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
	if !strings.Contains(string(page), `approvals -o ids`) {
		t.Errorf("approve's man page lacks its example")
	}
}

// The command reference committed in docs/cli is what the command tree
// generates now: a page for each command, each as generated.
func TestCommandReferenceIsCurrent(t *testing.T) {
	fresh := t.TempDir()
	if err := run(fresh, ""); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join("..", "..", "docs", "cli")
	want, got := pages(t, fresh), pages(t, committed)
	for _, name := range want {
		w, _ := os.ReadFile(filepath.Join(fresh, name))
		g, err := os.ReadFile(filepath.Join(committed, name))
		if err != nil || !bytes.Equal(g, w) {
			t.Errorf("docs/cli/%s is not what the commands say now: run `%s` and commit docs/cli", name, regenerate)
		}
	}
	for _, name := range got {
		if !slices.Contains(want, name) {
			t.Errorf("docs/cli/%s is no command's page: run `%s` (it removes it) and commit docs/cli", name, regenerate)
		}
	}
	if len(want) < 30 {
		t.Fatalf("the reference has %d pages: %v", len(want), want)
	}
}

func pages(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	return names
}
