// Package agenttest runs the real Claude Code headless (claude -p) for tests,
// offline: against a fake Messages API of its own that scripts the model's
// turns (Script) and records the requests it got, only inside a network
// namespace that has nothing but loopback, with its HOME, TMPDIR and
// XDG_RUNTIME_DIR in a temp dir. It also has a recording hook (Hook) for a
// project's .claude/settings.json.
//
// The agent is the binary UNDOLOG_CLAUDE names, or claude on PATH. Starting
// it needs root (unshare --net, then ip link set lo up, in a process of its
// own: the test binary started again, whose TestMain calls Main). Without
// the agent, unshare, ip, bwrap, socat or root the tests skip, unless
// UNDOLOG_REQUIRE_CLAUDE is set (.ci/run sets it), then they fail.
//
// The fake API is served by the test's process on a unix socket; the
// process in the namespace relays 127.0.0.1 there, so a test reads the
// requests as they come.
//
// A test, with hooks of its own in the project's .claude/settings.json:
//
//	func TestMain(m *testing.M) { agenttest.Main(m) }
//
//	a, res := agenttest.Run(t, agenttest.Script{
//		{Tools: []agenttest.ToolUse{agenttest.Bash("git push")}},
//	}, projectDir)
//	// res.TerminalReason, res.SessionID; a.Requests()[1].ToolResults()
//	// is what the model read of the push; a.Resume(t, projectDir,
//	// res.SessionID) goes on with a deferred call.
package agenttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// ClaudeEnv names the claude binary to run.
	ClaudeEnv = "UNDOLOG_CLAUDE"
	// RequireEnv turns a missing agent, unshare, ip, bwrap, socat or root into a failure.
	RequireEnv = "UNDOLOG_REQUIRE_CLAUDE"
)

// Main runs the process as the harness's sandbox or recording hook when it
// was started as one, and otherwise runs the tests of m and exits with their
// code. Call it from TestMain.
func Main(m *testing.M) {
	ServeRole()
	os.Exit(m.Run())
}

// ServeRole runs the process as the harness's sandbox or recording hook and
// exits, when it was started as one; otherwise it returns. A program that
// starts the agent (the bench) calls it first thing.
func ServeRole() {
	if p := os.Getenv(sandboxEnv); p != "" {
		os.Exit(runSandbox(p))
	}
	if p := os.Getenv(hookEnv); p != "" {
		os.Exit(runHook(p))
	}
}

// Unavailable says why the agent cannot run on this machine, or "" when it
// can: the claude binary, unshare, ip, and bwrap and socat (its sandbox)
// must be there, and this process root.
func Unavailable() string {
	if _, err := claudePath(); err != nil {
		return err.Error()
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not on PATH: the agent runs only in a network namespace of its own (util-linux, iproute2)"
		}
	}
	// What Claude Code's own sandbox for its Bash needs on Linux, which
	// `undolog init claude-code` turns on.
	for _, tool := range []string{"bwrap", "socat"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not on PATH: Claude Code's sandbox needs it (Debian: apt-get install bubblewrap socat)"
		}
	}
	if os.Geteuid() != 0 {
		return "not root: the agent runs only in a network namespace of its own, which unshare --net makes as root"
	}
	return ""
}

func claudePath() (string, error) {
	if p := os.Getenv(ClaudeEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s: %v", ClaudeEnv, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("claude")
	if err != nil {
		return "", fmt.Errorf("Claude Code is not installed (%s is not set and no claude on PATH; npm install @anthropic-ai/claude-code)", ClaudeEnv)
	}
	return p, nil
}

// Agent is Claude Code with its fake Messages API and its home: the runs of
// one Agent share both, so that a run can resume an earlier one's session.
type Agent struct {
	// Env is added to the environment of the agent and its hooks (which
	// otherwise get only PATH, GORACE and what the harness sets); a
	// variable here wins over the harness's (PATH, say).
	Env []string
	// Timeout bounds each run (default 3 minutes).
	Timeout time.Duration

	api    *fakeAPI
	srv    *http.Server
	dir    string // holds the socket and the agent's home
	claude string
}

// New starts the fake API for script and makes the agent's home; it skips tb
// when the agent cannot run here (fails it when UNDOLOG_REQUIRE_CLAUDE is
// set). The package's TestMain must call Main.
func New(tb testing.TB, script Script) *Agent {
	tb.Helper()
	if why := Unavailable(); why != "" {
		if os.Getenv(RequireEnv) != "" {
			tb.Fatalf("agenttest: %s is set but %s", RequireEnv, why)
		}
		tb.Skip("agenttest: " + why)
	}
	a, err := Start(script)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(a.Close)
	return a
}

// Run is New followed by one run of the agent in projectDir, with a prompt
// that asks it to follow the script, and args added to claude's.
func Run(tb testing.TB, script Script, projectDir string, args ...string) (*Agent, Result) {
	tb.Helper()
	a := New(tb, script)
	return a, a.Run(tb, projectDir, "agenttest: follow the script", args...)
}

// Start is New for a program that is not a test (the bench): it fails when
// the agent cannot run here. Close it when done.
func Start(script Script) (*Agent, error) {
	if why := Unavailable(); why != "" {
		return nil, errors.New("agenttest: " + why)
	}
	claude, _ := claudePath()
	dir, err := os.MkdirTemp("", "agenttest-") // short: a socket's path has a limit
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"home", "tmp", "run"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "api.sock"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	a := &Agent{api: &fakeAPI{script: script}, dir: dir, claude: claude, Timeout: 3 * time.Minute}
	a.srv = &http.Server{Handler: a.api}
	go a.srv.Serve(ln)
	return a, nil
}

// Close stops the fake API and removes the agent's home.
func (a *Agent) Close() {
	a.srv.Close()
	os.RemoveAll(a.dir)
}

// Requests returns the requests the fake API got so far.
func (a *Agent) Requests() []Request { return a.api.Requests() }

// ScriptDone says whether the agent has asked for every turn of the script.
func (a *Agent) ScriptDone() bool {
	a.api.mu.Lock()
	defer a.api.mu.Unlock()
	return a.api.next == len(a.api.script)
}

// Result is what one claude -p run printed and how it ended.
type Result struct {
	ExitCode       int
	Stdout, Stderr string
	Elapsed        time.Duration
	// Output is the JSON result object claude printed (--output-format
	// json), nil when stdout was not one; the fields below are taken from it.
	Output         map[string]any
	SessionID      string
	Subtype        string // success, error_during_execution, ...
	TerminalReason string // tool_deferred when a hook deferred a call
	IsError        bool
	Text           string // the result's text: the model's last message
}

// Run runs claude -p prompt in projectDir (args are added to claude's) and
// fails tb when the harness cannot; the agent's own failure is the Result's.
func (a *Agent) Run(tb testing.TB, projectDir, prompt string, args ...string) Result {
	tb.Helper()
	r, err := a.Exec(projectDir, append([]string{"-p", prompt}, args...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("agenttest: claude -p in %s: exit %d, %s, session %s, terminal_reason %q", projectDir, r.ExitCode, r.Elapsed.Round(time.Millisecond), r.SessionID, r.TerminalReason)
	return r
}

// Resume runs claude -p --resume session in projectDir: it goes on with the
// session (a deferred call is asked of the hooks again).
func (a *Agent) Resume(tb testing.TB, projectDir, session string, args ...string) Result {
	tb.Helper()
	r, err := a.Exec(projectDir, append([]string{"-p", "--resume", session}, args...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("agenttest: claude -p --resume %s in %s: exit %d, %s, terminal_reason %q", session, projectDir, r.ExitCode, r.Elapsed.Round(time.Millisecond), r.TerminalReason)
	return r
}

// Exec runs claude with args and --output-format json in projectDir, inside
// a network namespace of its own with nothing but loopback. The error is
// the harness's (the sandbox refused or failed, the run timed out).
func (a *Agent) Exec(projectDir string, args ...string) (Result, error) {
	cfg := sandboxConfig{
		Socket: filepath.Join(a.dir, "api.sock"),
		Argv:   append(append([]string{a.claude}, args...), "--output-format", "json"),
		Dir:    projectDir,
		Env: append([]string{
			"PATH=" + os.Getenv("PATH"),
			"GORACE=" + os.Getenv("GORACE"),
			"HOME=" + filepath.Join(a.dir, "home"),
			"TMPDIR=" + filepath.Join(a.dir, "tmp"),
			"XDG_RUNTIME_DIR=" + filepath.Join(a.dir, "run"),
			"ANTHROPIC_API_KEY=sk-ant-agenttest",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_AUTOUPDATER=1",
		}, a.Env...),
	}
	cfgFile, err := os.CreateTemp(a.dir, "sandbox-*.json")
	if err != nil {
		return Result{}, err
	}
	cfgFile.Close()
	defer os.Remove(cfgFile.Name())
	if err := writeJSON(cfgFile.Name(), cfg); err != nil {
		return Result{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--net", "--", exe)
	cmd.Env = append(os.Environ(), sandboxEnv+"="+cfgFile.Name())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return r, fmt.Errorf("agenttest: claude %s: no end within %s\nstderr: %s", strings.Join(args, " "), a.Timeout, r.Stderr)
	case errors.As(err, &exit) && exit.ExitCode() == 125:
		return r, fmt.Errorf("agenttest: %s", strings.TrimSpace(r.Stderr))
	case errors.As(err, &exit):
		r.ExitCode = exit.ExitCode()
	case err != nil:
		return r, fmt.Errorf("agenttest: unshare --net: %v", err)
	}
	if json.Unmarshal(stdout.Bytes(), &r.Output) == nil {
		r.SessionID, _ = r.Output["session_id"].(string)
		r.Subtype, _ = r.Output["subtype"].(string)
		r.TerminalReason, _ = r.Output["terminal_reason"].(string)
		r.IsError, _ = r.Output["is_error"].(bool)
		r.Text, _ = r.Output["result"].(string)
	}
	return r, nil
}
