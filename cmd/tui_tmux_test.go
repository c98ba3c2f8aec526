package cmd

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/engines"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/model"
)

// TestTUIInTmux drives the real binary's terminal view in tmux like a person:
// while `undolog exec` waits for approval in another process, it approves the
// call with keystrokes, and the CLI confirms the command ran, approved by the
// TUI's actor. .ci/run installs tmux and sets UNDOLOG_REQUIRE_TMUX=1.
func TestTUIInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("UNDOLOG_REQUIRE_TMUX") != "" {
			t.Fatal("tmux is required (UNDOLOG_REQUIRE_TMUX is set) but not installed")
		}
		t.Skip("tmux not installed")
	}
	dir := t.TempDir()
	bin := testbin.Undolog(t)
	logPath := filepath.Join(dir, "undolog.db")
	env := append(os.Environ(), "UNDOLOG_LOG="+logPath)

	ran := filepath.Join(dir, "ran.txt")
	waiter := exec.Command(bin, "exec", "--session", "release-9", "--tool", "deploy", "--", "sh", "-c", "echo ran > "+ran)
	waiter.Env = append(env, "UNDOLOG_ACTOR=ci")
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	defer waiter.Process.Kill()
	store := engines.File(logPath, engines.Options{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if list, _, _ := store.PendingApprovals(t.Context(), "", 0); len(list) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("exec never asked for approval")
		}
		time.Sleep(20 * time.Millisecond)
	}

	socket := "undolog-test-" + filepath.Base(dir)
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", append([]string{"-L", socket}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-x", "100", "-y", "30", "env", "UNDOLOG_LOG="+logPath, "UNDOLOG_ACTOR=tmux-user", "TERM=xterm-256color",
		bin, "tui", "--session", "release-9")
	defer exec.Command("tmux", "-L", socket, "kill-server").Run()
	screen := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if strings.Contains(tmux("capture-pane", "-p"), want) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("the screen never showed %q:\n%s", want, tmux("capture-pane", "-p"))
	}
	screen("awaiting approval")
	screen("expires in")
	tmux("send-keys", "a")
	screen("Approve effect 1 (deploy)")
	tmux("send-keys", "-l", "checked in tmux")
	tmux("send-keys", "Enter")
	screen("effect 1 approved by tmux-user")

	done := make(chan error, 1)
	go func() { done <- waiter.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("exec did not run after the approval")
	}
	if _, err := os.ReadFile(ran); err != nil {
		t.Fatal("the approved command did not run")
	}
	show := exec.Command(bin, "show", "1", "-o", "json")
	show.Env = env
	out, err := show.Output()
	if err != nil {
		t.Fatal(err)
	}
	var d model.EffectDetail
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	if d.Effect.State != "committed" || d.Approval.DecidedBy != "tmux-user" || d.Approval.Decision != "checked in tmux" {
		t.Fatalf("effect %+v approval %+v", d.Effect, d.Approval)
	}
	screen("committed") // the view follows the exec's commit by itself
	tmux("send-keys", "q")
}
