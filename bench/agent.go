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
	guarded := filepath.Join(work, "agent-undolog")
	for _, d := range []string{bare, hooked, guarded} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := agenttest.WriteSettings(hooked, agenttest.HooksSettings(noopHook, "PreToolUse", "PostToolUse")); err != nil {
		return err
	}
	if out, err := exec.Command(bin, "init", "claude-code", guarded).CombinedOutput(); err != nil {
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
	env := []string{"PATH=" + path + ":" + os.Getenv("PATH"), "UNDOLOG_LOG=" + filepath.Join(work, "agent.db"),
		"UNDOLOG_FILES_DIR=" + filepath.Join(work, "agent-files")}
	r, err := sideBySide(
		func() (float64, error) { return agentRun(bare, nil) },
		func() (float64, error) { return agentRun(hooked, nil) },
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
	add(what+", undolog's hooks (init claude-code; compensable, files captured)", fmt.Sprintf("%.0f ms", r.median(2)),
		fmt.Sprintf("%+.1f ms a call, %.2fx the no-op hook's (target: 2x)", perCall(2), perCall(2)/perCall(1)))
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
