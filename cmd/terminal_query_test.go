//go:build linux

package cmd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undolog/undolog/internal/testbin"
)

// openPTY opens a pseudo-terminal: the master, read by the test, and the
// slave, the command's terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil { // unlockpt
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN) // ptsname
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// sgr is a colour or attribute sequence: output, not a question.
var sgr = regexp.MustCompile(`\x1b\[[0-9;:]*m`)

// No command but the view asks the terminal anything (issue 17): on a
// terminal, Bubble Tea v1's package init wrote an OSC 11 (background colour)
// query and a DSR (cursor position) to it and waited up to 5 s for the
// answers, before every command, `undolog version` too. Here each command
// runs on a pseudo-terminal that never answers: what arrives on it is the
// command's output only, and the command exits without waiting.
func TestCommandsAskTheTerminalNothing(t *testing.T) {
	bin := testbin.Undolog(t)
	logPath := filepath.Join(t.TempDir(), "demo.db")
	if out, err := exec.Command(bin, "demo", "--log", logPath).CombinedOutput(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "undolog"},
		{[]string{"list", "--log", logPath}, "agent-research-42"},
	} {
		t.Run(c.args[0], func(t *testing.T) {
			master, slave := openPTY(t)
			cmd := exec.Command(bin, c.args...)
			// A person's terminal (termenv asks nothing under CI, nor
			// with TERM screen or tmux).
			cmd.Env = append(os.Environ(), "TERM=xterm-256color", "CI=", "NO_COLOR=", "COLORTERM=")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close() // the master reads EIO once the command has let its terminal go
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var out bytes.Buffer
			read := make(chan struct{})
			go func() {
				defer close(read)
				buf := make([]byte, 4096)
				for {
					n, err := master.Read(buf)
					out.Write(buf[:n])
					if err != nil {
						return
					}
				}
			}()
			// Bubble Tea v1 waited termenv's 5 s for answers that never came.
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("undolog %v: %v", c.args, err)
				}
			case <-time.After(4 * time.Second):
				cmd.Process.Kill()
				<-done
				<-read
				t.Fatalf("undolog %v waits on the terminal; it wrote %q", c.args, out.Bytes())
			}
			<-read
			got := out.Bytes()
			for _, q := range []string{"\x1b]11;?", "\x1b[6n", "\x1b[c"} {
				if bytes.Contains(got, []byte(q)) {
					t.Errorf("undolog %v asked the terminal %q:\n%q", c.args, q, got)
				}
			}
			if rest := sgr.ReplaceAll(got, nil); bytes.ContainsRune(rest, 0x1b) {
				t.Errorf("undolog %v wrote control sequences beyond its output's colours:\n%q", c.args, got)
			}
			if !bytes.Contains(got, []byte(c.want)) {
				t.Errorf("undolog %v: output %q lacks %q", c.args, got, c.want)
			}
		})
	}
}

// The view learns the terminal's colours once: lipgloss detects them for
// stdout as the program starts, and the view uses what it found. In tmux a
// detection runs `tmux info`: a tmux on PATH records being run.
func TestViewDetectsTheColoursOnce(t *testing.T) {
	bin := testbin.Undolog(t)
	logPath := filepath.Join(t.TempDir(), "demo.db")
	if out, err := exec.Command(bin, "demo", "--log", logPath).CombinedOutput(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	fake := t.TempDir()
	ran := filepath.Join(fake, "ran")
	if err := os.WriteFile(filepath.Join(fake, "tmux"), []byte("#!/bin/sh\necho \"$@\" >> "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	master, slave := openPTY(t)
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "tui", "--log", logPath)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color", "CI=", "NO_COLOR=", "COLORTERM=",
		"TMUX=/tmp/tmux-0/default,1,0", "PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var out bytes.Buffer
	shown := make(chan struct{})
	go func() {
		buf, seen := make([]byte, 4096), false
		for {
			n, err := master.Read(buf)
			out.Write(buf[:n])
			if !seen && bytes.Contains(out.Bytes(), []byte("agent-research-42")) {
				seen = true
				close(shown)
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-shown:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("the view never showed its first screen")
	}
	master.Write([]byte("q"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("undolog tui: %v", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("the view did not quit on q")
	}
	data, _ := os.ReadFile(ran)
	if n := bytes.Count(data, []byte("info\n")); n != 1 {
		t.Fatalf("the view ran tmux info %d times, want once:\n%s", n, data)
	}
}
