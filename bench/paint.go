package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// paintRows times the terminal view's first paint as a whole process: from
// asking tmux for a window running `undolog tui` on the 1M log to the first
// screen's text reaching tmux, beside the floor of the same measurement, a
// shell printing the same screen (captured from the view, colours and all)
// in the same tmux. A control-mode client (tmux -C) hears the pane's output
// as tmux reads it, so no polling adds its period to either side. Each
// round runs the two sides in turns of a few windows; the ratio is the
// median of the rounds' differences.
func paintRows(add func(what, value, ratio string), bin, path string) error {
	const what = "1M effects: TUI first paint (whole process, tmux)"
	if _, err := exec.LookPath("tmux"); err != nil {
		add(what, "skipped", "no tmux on PATH")
		return nil
	}
	work, err := os.MkdirTemp("", "undolog-bench-paint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	c, err := startControl(fmt.Sprintf("undolog-bench-paint-%d", os.Getpid()))
	if err != nil {
		return err
	}
	defer c.close()

	// The view's command line: the environment of a person's terminal.
	view := fmt.Sprintf("exec env -u NO_COLOR -u CI UNDOLOG_LOG=%s %s tui", shellQuote(path), shellQuote(bin))
	// Its first screen, to print as the floor and to know it by: the last
	// session row shown (the rows come before the footer in one frame).
	screen, err := c.captureOnce(view, regexp.MustCompile(`load-\d{4}`))
	if err != nil {
		return err
	}
	marker := regexp.MustCompile(`load-\d{4}`).FindAllString(screen, -1)
	if len(marker) == 0 {
		return fmt.Errorf("the view's first screen shows no session:\n%s", screen)
	}
	last := marker[len(marker)-1]
	text := filepath.Join(work, "screen.txt")
	// The alternate screen, as the view enters it, then the screen.
	if err := os.WriteFile(text, []byte("\x1b[?1049h\x1b[H"+strings.ReplaceAll(screen, "\n", "\r\n")), 0o600); err != nil {
		return err
	}
	floor := fmt.Sprintf("cat %s; exec sleep 600", shellQuote(text))

	const turn = 5
	r, err := sideBySide2(func() (float64, float64, error) {
		var vs, fs []float64
		for i := 0; i < turn; i++ {
			ms, err := c.firstShown(view, last)
			if err != nil {
				return 0, 0, err
			}
			vs = append(vs, ms)
		}
		for i := 0; i < turn; i++ {
			ms, err := c.firstShown(floor, last)
			if err != nil {
				return 0, 0, err
			}
			fs = append(fs, ms)
		}
		return median(vs), median(fs), nil
	})
	if err != nil {
		return err
	}
	var diffs []float64
	for _, row := range r {
		diffs = append(diffs, row[0]-row[1])
	}
	add(what, fmt.Sprintf("%.1f ms", r.median(0)), fmt.Sprintf("+%.1f ms over the floor (target: 15)", median(diffs)))
	add("floor: a shell printing the same screen in the same tmux", fmt.Sprintf("%.1f ms", r.median(1)), "")
	return nil
}

// control is a tmux server of its own with a control-mode client attached.
type control struct {
	socket string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	seq    int
}

func startControl(socket string) (*control, error) {
	setup := [][]string{
		{"-f", "/dev/null", "new-session", "-d", "-s", "base", "-x", "100", "-y", "30", "sleep 3600"},
		{"set-option", "-g", "remain-on-exit", "on"}, // a view that fails leaves its error to read
	}
	for _, args := range setup {
		if out, err := exec.Command("tmux", append([]string{"-L", socket}, args...)...).CombinedOutput(); err != nil {
			exec.Command("tmux", "-L", socket, "kill-server").Run()
			return nil, fmt.Errorf("tmux %v: %v: %s", args, err, out)
		}
	}
	cmd := exec.Command("tmux", "-L", socket, "-C", "attach-session", "-t", "base")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &control{socket: socket, cmd: cmd, in: in, out: bufio.NewReaderSize(outp, 1<<16)}
	// Commands sent before the client is attached find no client.
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			c.close()
			return nil, fmt.Errorf("tmux control client: %v", err)
		}
		if strings.HasPrefix(line, "%session-changed") {
			break
		}
	}
	// The client's size is the windows' (tmux 3.3a's server crashes on an
	// alternate screen in a window of window-size manual).
	if _, err := c.run("refresh-client -C 100x30"); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *control) close() {
	c.in.Close()
	c.cmd.Wait()
	exec.Command("tmux", "-L", c.socket, "kill-server").Run()
}

// run sends one command and returns its output, passing over notifications.
func (c *control) run(command string) (string, error) {
	if _, err := io.WriteString(c.in, command+"\n"); err != nil {
		return "", err
	}
	var body []string
	in := false
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("tmux control client: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "%begin"):
			// Flags 1: the reply to a command of this client (the
			// attach's own block has 0).
			in, body = strings.HasSuffix(line, " 1"), nil
		case strings.HasPrefix(line, "%end") && in:
			return strings.Join(body, "\n"), nil
		case strings.HasPrefix(line, "%error") && in:
			return "", fmt.Errorf("tmux %s: %s", command, strings.Join(body, " "))
		case in:
			body = append(body, line)
		}
	}
}

// firstShown opens a window running shell and returns the milliseconds
// until its output holds marker, then closes it.
func (c *control) firstShown(shell, marker string) (float64, error) {
	c.seq++
	name := fmt.Sprintf("w%d", c.seq)
	start := time.Now()
	pane, err := c.run(fmt.Sprintf("new-window -d -P -F '#{pane_id}' -n %s %s", name, tmuxQuote(shell)))
	if err != nil {
		return 0, err
	}
	prefix := "%output " + pane + " "
	var seen strings.Builder
	deadline := time.AfterFunc(10*time.Second, func() { c.in.Close() })
	defer deadline.Stop()
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			return 0, fmt.Errorf("the window never showed %q (%v): %q", marker, err, seen.String())
		}
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		// Control mode escapes bytes below space and backslash; the
		// marker has none, so the escaped stream holds it as it is.
		seen.WriteString(strings.TrimRight(line[len(prefix):], "\n"))
		if strings.Contains(seen.String(), marker) {
			ms := float64(time.Since(start).Microseconds()) / 1000
			_, err := c.run("kill-window -t " + name)
			return ms, err
		}
	}
}

// captureOnce runs shell in a window until its screen matches want, and
// returns the screen with its colours.
func (c *control) captureOnce(shell string, want *regexp.Regexp) (string, error) {
	name := "capture"
	if _, err := c.run(fmt.Sprintf("new-window -d -n %s %s", name, tmuxQuote(shell))); err != nil {
		return "", err
	}
	defer c.run("kill-window -t " + name)
	deadline := time.Now().Add(10 * time.Second)
	for {
		plain, err := c.run("capture-pane -p -t " + name)
		if err != nil {
			return "", err
		}
		if want.MatchString(plain) {
			time.Sleep(300 * time.Millisecond) // the whole frame, not its first bytes
			return c.run("capture-pane -p -e -t " + name)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the view never showed its first screen:\n%s", plain)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// tmuxQuote quotes a string as one argument of a tmux command line.
func tmuxQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`).Replace(s) + `"`
}
