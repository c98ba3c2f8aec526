package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/internal/testbin"
)

// Tab completes in a bash without the bash-completion package (issue 33):
// cobra's script called that package's _get_comp_words_by_ref, and each Tab
// printed "command not found". A bash with the package loaded completes as
// well, --flag=value too.
func TestBashCompletionWithoutThePackage(t *testing.T) {
	tmux := tmuxServer(t)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	dir := t.TempDir()
	bin := testbin.Undolog(t)
	if err := os.Symlink(bin, filepath.Join(dir, "undolog")); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "undolog.db")
	env := append(os.Environ(), "UNDOLOG_LOG="+logPath)
	for _, args := range [][]string{
		{"intercept", "--session", "ci-9", "--tool", "write", "--tier", "compensable"},
		{"completion", "bash"},
	} {
		c := exec.Command(bin, args...)
		c.Env = env
		out, err := c.Output()
		if err != nil {
			t.Fatalf("undolog %v: %v", args, err)
		}
		if args[0] == "completion" {
			if err := os.WriteFile(filepath.Join(dir, "undolog.bash"), out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	shells := map[string]string{"bare": ""}
	if _, err := os.Stat("/usr/share/bash-completion/bash_completion"); err == nil {
		shells["package"] = "source /usr/share/bash-completion/bash_completion; "
	}
	for name, setup := range shells {
		t.Run(name, func(t *testing.T) {
			tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "20", "env", "-i", "PATH="+dir+":/usr/bin:/bin", "HOME="+dir,
				"UNDOLOG_LOG="+logPath, "TERM=xterm", "PS1=$ ", "bash", "--norc", "--noprofile")
			tmux("send-keys", "-t", name, setup+"source "+filepath.Join(dir, "undolog.bash")+"; clear", "Enter")
			waitScreen(t, tmux, name, "$")
			tmux("send-keys", "-t", name, "-l", "undolog session show c")
			tmux("send-keys", "-t", name, "Tab")
			waitScreen(t, tmux, name, "undolog session show ci-9")
			tmux("send-keys", "-t", name, "C-u")
			tmux("send-keys", "-t", name, "-l", "undolog list --session=c")
			tmux("send-keys", "-t", name, "Tab")
			pane := waitScreen(t, tmux, name, "undolog list --session=ci-9")
			tmux("send-keys", "-t", name, "C-u")
			tmux("send-keys", "-t", name, "-l", "undolog approva")
			tmux("send-keys", "-t", name, "Tab")
			pane = waitScreen(t, tmux, name, "undolog approvals")
			if strings.Contains(pane, "not found") || strings.Contains(pane, "_get_comp_words_by_ref") {
				t.Fatalf("completion printed an error:\n%s", pane)
			}
		})
	}
}
