package main

// The coding agent's rows: a whole headless Claude Code run (claude -p) of
// scripted tool calls with undolog's hooks (as `undolog init claude-code`
// installs them) and with a no-op hook on PreToolUse and PostToolUse,
// against the same run without hooks: what a hook costs a call, whole
// processes, as the agent runs it. They run the real agent through
// internal/agenttest (offline, in a network namespace of nothing but
// loopback, so as root, with unshare and ip; UNDOLOG_CLAUDE names the
// binary, as for the tests).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/undolog/undolog/internal/agenttest"
)

// agentCalls is how many tool calls a run makes.
const agentCalls = 20

// noopHook is the least a hook can do: read the payload, answer nothing.
const noopHook = "cat >/dev/null"

func agentRows(add func(what, value, ratio string), work string) error {
	if why := agenttest.Unavailable(); why != "" {
		add("agent rows", "skipped", why)
		return nil
	}
	bin, err := buildUndolog()
	if err != nil {
		return err
	}
	bare := filepath.Join(work, "agent-bare")
	hooked := filepath.Join(work, "agent-noop-hook")
	sandboxed := filepath.Join(work, "agent-noop-hook-sandbox")
	guarded := filepath.Join(work, "agent-undolog")
	for _, d := range []string{bare, hooked, sandboxed, guarded} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := agenttest.WriteSettings(hooked, agenttest.HooksSettings(noopHook, "PreToolUse", "PostToolUse")); err != nil {
		return err
	}
	// The no-op hook with Claude Code's sandbox on, as init turns it on: what
	// the sandbox costs a Bash call, apart from undolog's hooks.
	withSandbox := agenttest.HooksSettings(noopHook, "PreToolUse", "PostToolUse")
	withSandbox["sandbox"] = map[string]any{"enabled": true, "failIfUnavailable": true, "allowUnsandboxedCommands": false}
	if err := agenttest.WriteSettings(sandboxed, withSandbox); err != nil {
		return err
	}
	// The log and the store in directories of their own, given to init too:
	// the sandbox denies writes to them, and the hook holds Bash where the
	// settings do not deny its own log's.
	logDir, store := filepath.Join(work, "agent-log"), filepath.Join(work, "agent-store", "files")
	logEnv := []string{"UNDOLOG_LOG=" + filepath.Join(logDir, "agent.db"), "UNDOLOG_FILES_DIR=" + store}
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return err
	}
	initCmd := exec.Command(bin, "init", "claude-code", guarded)
	initCmd.Env = append(os.Environ(), logEnv...)
	if out, err := initCmd.CombinedOutput(); err != nil {
		return fmt.Errorf("undolog init claude-code: %v\n%s", err, out)
	}
	// The hooks `init` writes run `undolog`: the bench's build, on PATH.
	path := filepath.Join(work, "agent-bin")
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(bin, filepath.Join(path, "undolog")); err != nil && !os.IsExist(err) {
		return err
	}
	env := append([]string{"PATH=" + path + ":" + os.Getenv("PATH")}, logEnv...)
	r, err := sideBySide(
		func() (float64, error) { return agentRun(bare, nil) },
		func() (float64, error) { return agentRun(hooked, nil) },
		func() (float64, error) { return agentRun(sandboxed, nil) },
		func() (float64, error) { return agentRun(guarded, env) })
	if err != nil {
		return err
	}
	perCall := func(j int) float64 {
		var xs []float64
		for _, row := range r {
			xs = append(xs, (row[j]-row[0])/agentCalls)
		}
		return median(xs)
	}
	what := fmt.Sprintf("agent: claude -p, %d calls (Bash and Write by turns)", agentCalls)
	add(what+", no hooks", fmt.Sprintf("%.0f ms", r.median(0)), "")
	add(what+", a no-op hook before and after", fmt.Sprintf("%.0f ms", r.median(1)),
		fmt.Sprintf("%+.1f ms a call (the hook's cost)", perCall(1)))
	add(what+", a no-op hook, Claude Code's sandbox on", fmt.Sprintf("%.0f ms", r.median(2)),
		fmt.Sprintf("%+.1f ms a call (the hook's and the sandbox's)", perCall(2)))
	add(what+", undolog's hooks (init claude-code: sandbox on; compensable, files captured)", fmt.Sprintf("%.0f ms", r.median(3)),
		fmt.Sprintf("%+.1f ms a call, %.2fx the no-op hook's (target: 2x); %.2fx the no-op hook's in the sandbox", perCall(3), perCall(3)/perCall(1), perCall(3)/perCall(2)))
	return nil
}

// agentRun times one claude -p run in dir whose model calls Bash and Write
// by turns, agentCalls times (allowed without asking, as a hook's allow
// would), with env added to the agent's.
func agentRun(dir string, env []string) (float64, error) {
	script := make(agenttest.Script, agentCalls)
	for i := range script {
		call := agenttest.Bash(fmt.Sprintf("echo %d > bash-%d.txt", i, i))
		if i%2 == 1 {
			call = agenttest.Write(filepath.Join(dir, fmt.Sprintf("write-%d.txt", i)), fmt.Sprintf("%d\n", i))
		}
		script[i] = agenttest.Turn{Tools: []agenttest.ToolUse{call}}
	}
	a, err := agenttest.Start(script)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	a.Env = env
	res, err := a.Exec(dir, "-p", "bench", "--allowedTools", "Bash,Write")
	if err != nil {
		return 0, err
	}
	if res.ExitCode != 0 || res.TerminalReason != "completed" || !a.ScriptDone() {
		return 0, fmt.Errorf("agent run in %s: exit %d, terminal_reason %q, script done %v\n%.500s", dir, res.ExitCode, res.TerminalReason, a.ScriptDone(), res.Stderr)
	}
	return float64(res.Elapsed.Microseconds()) / 1000, nil
}
