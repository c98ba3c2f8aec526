package cmd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"golang.org/x/sys/unix"

	"github.com/undolog/undolog/internal/testbin"
)

// On an 80-column terminal, show's history fits: the time to the second,
// and a long reason or error wrapped under its column, whole.
func TestHistoryFitsAnEightyColumnTerminal(t *testing.T) {
	bin := testbin.Undolog(t)
	env := append(os.Environ(), "UNDOLOG_LOG="+filepath.Join(t.TempDir(), "u.db"), "NO_COLOR=1", "UNDOLOG_ACTOR=tester")
	reason := "the bucket release-artifacts-eu-west-1 is locked by the nightly backup job until 03:00"
	for _, args := range [][]string{
		{"intercept", "--session", "s", "--tool", "upload", "--tier", "compensable", "--args", "{}", "--compensate-cmd", "true"},
		{"start", "1"},
		{"fail", "1", "--error", reason},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("undolog %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	const width = 80
	text := runOnTerminal(t, width, append(env, "COLUMNS=200"), bin, "show", "1")
	_, history, ok := strings.Cut(text, "History:\n")
	if !ok {
		t.Fatalf("no history:\n%s", text)
	}
	lines := strings.Split(strings.TrimSpace(history), "\n")
	var words []string
	for _, l := range lines {
		if w := ansi.StringWidth(l); w > width {
			t.Errorf("a history line of %d columns on a %d-column terminal: %q", w, width, l)
		}
		words = append(words, strings.Fields(l)...)
	}
	if !strings.Contains(strings.Join(words, " "), "error: "+reason) {
		t.Errorf("the error is not whole in the history:\n%s", history)
	}
	if strings.Contains(history, ".000") || strings.Contains(history, "T") && strings.Contains(history, "Z") {
		t.Errorf("the history shows the instant a script reads, not a person's time:\n%s", history)
	}
}

// On a terminal, approvals with nothing waiting says so, rather than a
// header over nothing (piped, it prints nothing: scripts count lines).
func TestApprovalsSaysNothingWaits(t *testing.T) {
	bin := testbin.Undolog(t)
	env := append(os.Environ(), "UNDOLOG_LOG="+filepath.Join(t.TempDir(), "u.db"), "NO_COLOR=1")
	start := exec.Command(bin, "session", "start", "s")
	start.Env = env
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("session start: %v\n%s", err, out)
	}
	if text := runOnTerminal(t, 80, env, bin, "approvals"); strings.TrimSpace(text) != "nothing awaits a decision" {
		t.Errorf("approvals with nothing waiting, on a terminal:\n%q", text)
	}
	piped := exec.Command(bin, "approvals")
	piped.Env = env
	if out, err := piped.Output(); err != nil || len(out) != 0 {
		t.Errorf("approvals piped with nothing waiting: %v %q", err, out)
	}
}

// runOnTerminal runs bin with args on a terminal width columns wide, and
// returns what it wrote there, lines ending in \n.
func runOnTerminal(t *testing.T, width int, env []string, bin string, args ...string) string {
	t.Helper()
	master, slave := openPTY(t)
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: uint16(width)}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := master.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("undolog %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
	}
	return strings.ReplaceAll(out.String(), "\r\n", "\n")
}
