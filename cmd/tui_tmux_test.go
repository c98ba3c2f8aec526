package cmd

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
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
	store := logaddr.File(logPath, logaddr.Options{})
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

	socket := tmuxSocket(t)
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", append([]string{"-L", socket}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	pane := terminalEnv(append([]string{"UNDOLOG_LOG=" + logPath, "UNDOLOG_ACTOR=tmux-user"}, keepPane(bin, "tui", "--session", "release-9")...)...)
	tmux(append([]string{"new-session", "-d", "-x", "100", "-y", "30"}, pane...)...)
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

// tmuxSocket names a private tmux server for the test: its own for each
// test and process, so that test runs side by side never share one (a
// temp dir's base name, 001, is every test's).
func tmuxSocket(t *testing.T) string {
	return fmt.Sprintf("undolog-test-%d-%s", os.Getpid(), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
}

// tmuxServer starts a private tmux server for the test, or skips without tmux.
func tmuxServer(t *testing.T) func(args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("UNDOLOG_REQUIRE_TMUX") != "" {
			t.Fatal("tmux is required (UNDOLOG_REQUIRE_TMUX is set) but not installed")
		}
		t.Skip("tmux not installed")
	}
	socket := tmuxSocket(t)
	t.Cleanup(func() { exec.Command("tmux", "-L", socket, "kill-server").Run() })
	return func(args ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-L", socket}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
}

// terminalEnv is the env(1) command line for a pane: a person's terminal,
// whatever the test's environment says. A CI runner sets CI (termenv then
// takes no output for a terminal) and may set NO_COLOR; tmux passes its
// starting environment on to every pane.
func terminalEnv(args ...string) []string {
	return append([]string{"env", "-u", "CI", "-u", "NO_COLOR", "-u", "CLICOLOR", "-u", "CLICOLOR_FORCE", "TERM=xterm-256color"}, args...)
}

// keepPane runs argv in a pane that stays after it exits, with its exit
// status: a view that fails at once leaves its error on the screen that the
// failing test prints, and not "server exited unexpectedly".
func keepPane(argv ...string) []string {
	return append([]string{"sh", "-c", `"$@"; echo "[exited $?]"; sleep 600`, "sh"}, argv...)
}

// waitScreen waits until the pane (the window named target) shows each of
// want.
func waitScreen(t *testing.T, tmux func(...string) string, target string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pane := tmux("capture-pane", "-p", "-t", target)
		if showsAll(pane, want) {
			return pane
		}
		if time.Now().After(deadline) {
			t.Fatalf("the screen never showed %q:\n%s", want, pane)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func showsAll(pane string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(pane, w) {
			return false
		}
	}
	return true
}

// The view in a real terminal at 80x24 and 160x45, with and without
// NO_COLOR: the selected row is marked by text, the footer keeps help and
// quit, the title names the log (issue 16, items 1, 4 and 6).
func TestTUILayoutsInTmux(t *testing.T) {
	tmux := tmuxServer(t)
	dir := t.TempDir()
	bin := testbin.Undolog(t)
	logPath := filepath.Join(dir, "demo.db")
	if out, err := exec.Command(bin, "demo", "--log", logPath).CombinedOutput(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for i, l := range []struct {
		w, h    int
		noColor bool
	}{{80, 24, true}, {80, 24, false}, {160, 45, true}, {160, 45, false}} {
		name := fmt.Sprintf("v%d", i)
		vars := []string{"UNDOLOG_LOG=" + logPath}
		if l.noColor {
			vars = append(vars, "NO_COLOR=1")
		}
		view := terminalEnv(append(vars, keepPane(bin, "tui")...)...)
		tmux(append([]string{"new-session", "-d", "-s", name, "-x", strconv.Itoa(l.w), "-y", strconv.Itoa(l.h)}, view...)...)
		// The footer is drawn last: a frame tmux shows half written has none.
		pane := waitScreen(t, tmux, name, "ci-nightly-88", "q quit")
		lines := strings.Split(strings.TrimRight(pane, "\n"), "\n")
		if !strings.Contains(pane, "▶ ci-nightly-88") {
			t.Errorf("%dx%d no_color=%v: the selection is not marked:\n%s", l.w, l.h, l.noColor, pane)
		}
		if last := strings.TrimSpace(lines[len(lines)-1]); !strings.HasSuffix(last, "? help • q quit") || strings.Contains(last, "approve") {
			t.Errorf("%dx%d: footer %q", l.w, l.h, last)
		}
		if !strings.Contains(lines[0], "demo.db") {
			t.Errorf("%dx%d: the title %q does not name the log", l.w, l.h, lines[0])
		}
		coloured := tmux("capture-pane", "-p", "-e", "-t", name)
		if hasColour := strings.Contains(coloured, "\x1b[3") || strings.Contains(coloured, "\x1b[9"); hasColour == l.noColor {
			t.Errorf("%dx%d no_color=%v: colour shown: %v", l.w, l.h, l.noColor, hasColour)
		}
		tmux("send-keys", "-t", name, "j")
		waitScreen(t, tmux, name, "▶ agent-ops-3")
		// The session screen's longer footer keeps help and quit too, and
		// offers only what the selected call allows: drop_database was
		// rejected, nobody approves it now.
		tmux("send-keys", "-t", name, "Enter")
		pane = waitScreen(t, tmux, name, "drop_database", "esc back")
		lines = strings.Split(strings.TrimRight(pane, "\n"), "\n")
		if last := strings.TrimSpace(lines[len(lines)-1]); !strings.HasSuffix(last, "? help • q quit") || strings.Contains(last, "approve") || !strings.Contains(last, "u undo session") {
			t.Errorf("%dx%d: session footer %q", l.w, l.h, last)
		}
		if !strings.Contains(pane, "▶ ") {
			t.Errorf("%dx%d: no row marked:\n%s", l.w, l.h, pane)
		}
		// Help stands centred over the screen, which stays in sight.
		tmux("send-keys", "-t", name, "?")
		pane = waitScreen(t, tmux, name, "Columns")
		lines = strings.Split(strings.TrimRight(pane, "\n"), "\n")
		left := -1
		for _, line := range lines {
			if i := strings.Index(line, "┌"); i >= 0 {
				left = len([]rune(line[:i]))
				break
			}
		}
		if !strings.Contains(lines[0], "demo.db") || !strings.Contains(pane, "agent-ops-3") || left < 2 {
			t.Errorf("%dx%d: help not over the screen (box at column %d):\n%s", l.w, l.h, left, pane)
		}
		tmux("send-keys", "-t", name, "Escape")
		tmux("send-keys", "-t", name, "q")
	}
}

// `undolog demo` at a terminal says, after the view closes, where its log
// was; it removes its temporary folder unless --keep, which keeps it and
// says where (issue 16, item 6).
func TestDemoSaysWhereItsLogIsInTmux(t *testing.T) {
	tmux := tmuxServer(t)
	bin := testbin.Undolog(t)
	for i, keep := range []bool{false, true} {
		tmp := t.TempDir()
		name := fmt.Sprintf("d%d", i)
		args := "demo"
		if keep {
			args += " --keep"
		}
		tmux(append([]string{"new-session", "-d", "-s", name, "-x", "100", "-y", "30"}, terminalEnv("TMPDIR="+tmp, "sh", "-c",
			bin+" "+args+"; echo exit=$?; sleep 60")...)...)
		waitScreen(t, tmux, name, "agent-research-42")
		tmux("send-keys", "-t", name, "q")
		pane := strings.ReplaceAll(waitScreen(t, tmux, name, "exit=0"), "\n", "") // long lines wrap
		left, _ := filepath.Glob(filepath.Join(tmp, "undolog-demo-*"))
		if keep {
			if len(left) != 1 || !strings.Contains(pane, "the demo log is kept at "+filepath.Join(left[0], "undolog.db")) {
				t.Fatalf("--keep: folders %v\n%s", left, pane)
			}
			continue
		}
		if len(left) != 0 || !strings.Contains(pane, "the demo log was "+tmp) || !strings.Contains(pane, "now removed (undolog demo --keep keeps it)") {
			t.Fatalf("folders left %v\n%s", left, pane)
		}
	}
}
