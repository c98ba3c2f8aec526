package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestGeneratesManPagesAndCompletions(t *testing.T) {
	dir := t.TempDir()
	if err := run("", "", dir); err != nil {
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

// The command reference committed in docs/cli, and the man pages the
// binary carries (cmd/manpages), are what the command tree generates now: a
// page for each command, each as generated.
func TestCommandReferenceIsCurrent(t *testing.T) {
	cli, man := t.TempDir(), t.TempDir()
	if err := run(cli, man, ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ fresh, committed, glob string }{
		{cli, filepath.Join("docs", "cli"), "*.md"},
		{man, filepath.Join("cmd", "manpages"), "*.1"},
	} {
		committed := filepath.Join("..", "..", c.committed)
		want, got := pages(t, c.fresh, c.glob), pages(t, committed, c.glob)
		for _, name := range want {
			w, _ := os.ReadFile(filepath.Join(c.fresh, name))
			g, err := os.ReadFile(filepath.Join(committed, name))
			if err != nil || !bytes.Equal(g, w) {
				t.Errorf("%s/%s is not what the commands say now: run `%s` and commit %s", c.committed, name, regenerate, c.committed)
			}
		}
		for _, name := range got {
			if !slices.Contains(want, name) {
				t.Errorf("%s/%s is no command's page: run `%s` (it removes it) and commit %s", c.committed, name, regenerate, c.committed)
			}
		}
		if len(want) < 30 {
			t.Fatalf("%s has %d pages: %v", c.committed, len(want), want)
		}
	}
}

// A help text line that starts with a dot or a quote would be a roff
// request, and a backslash an escape: the page keeps them as text.
func TestManPageKeepsHelpTextAsText(t *testing.T) {
	c := &cobra.Command{Use: "undolog", Short: "a-b", Long: "first\n.SH INJECTED\n'also\nback\\slash"}
	c.Flags().String("log", "", "log `address`")
	dir := t.TempDir()
	if err := writeManPages(c, dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "undolog.1"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, ".SH INJECTED") || strings.HasPrefix(line, "'also") {
			t.Fatalf("a help line became a roff request: %q\n%s", line, page)
		}
	}
	for _, want := range []string{`\&.SH INJECTED`, `\&'also`, `back\\slash`, `undolog - a-b`, `\fB--log\fP`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
}

func pages(t *testing.T, dir, glob string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	return names
}
