package cmd

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/undolog/undolog/internal/testbin"
)

// On a terminal, help is wrapped at the terminal's width, whatever $COLUMNS
// says (a shell exports it at the size it last saw).
func TestHelpWrapsAtTheTerminalsWidth(t *testing.T) {
	bin := testbin.Undolog(t)
	const width = 52
	master, slave := openPTY(t)
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: width}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "undo", "--help")
	cmd.Env = append(os.Environ(), "COLUMNS=200", "NO_COLOR=1")
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
		t.Fatalf("undo --help: %v\n%s", err, out.Bytes())
	}
	text := strings.ReplaceAll(out.String(), "\r\n", "\n")
	long, _, ok := strings.Cut(text, "\nUsage:")
	if !ok {
		t.Fatalf("no usage in the help:\n%s", text)
	}
	lines := strings.Split(long, "\n")
	full := 0
	for _, l := range lines {
		if len(l) > width {
			t.Errorf("a line of %d columns on a %d-column terminal: %q", len(l), width, l)
		}
		if len(l) > width-12 {
			full++
		}
	}
	// Filled, not just short: most prose lines come near the width.
	if full < len(lines)/2 {
		t.Errorf("only %d of %d lines fill the %d columns:\n%s", full, len(lines), width, long)
	}
}
