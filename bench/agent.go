package main

// The coding agent's rows: a whole headless Claude Code run (claude -p) of
// scripted tool calls with a no-op hook on PreToolUse and PostToolUse
// against the same run without hooks: what a hook costs a call, whole
// processes, as the agent runs it. They run the real agent through
// internal/agenttest (offline, in a network namespace of nothing but
// loopback, so as root, with unshare and ip; UNDOLOG_CLAUDE names the
// binary, as for the tests).

import (
	"fmt"
	"os"
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
	bare := filepath.Join(work, "agent-bare")
	hooked := filepath.Join(work, "agent-noop-hook")
	for _, d := range []string{bare, hooked} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := agenttest.WriteSettings(hooked, agenttest.HooksSettings(noopHook, "PreToolUse", "PostToolUse")); err != nil {
		return err
	}
	r, err := sideBySide(
		func() (float64, error) { return agentRun(bare) },
		func() (float64, error) { return agentRun(hooked) })
	if err != nil {
		return err
	}
	perCall := func() float64 {
		var xs []float64
		for _, row := range r {
			xs = append(xs, (row[1]-row[0])/agentCalls)
		}
		return median(xs)
	}()
	what := fmt.Sprintf("agent: claude -p, %d Bash calls", agentCalls)
	add(what+", no hooks", fmt.Sprintf("%.0f ms", r.median(0)), "")
	add(what+", a no-op hook before and after", fmt.Sprintf("%.0f ms", r.median(1)),
		fmt.Sprintf("%+.1f ms a call (the hook's cost)", perCall))
	return nil
}

// agentRun times one claude -p run in dir whose model calls Bash
// agentCalls times (Bash allowed without asking, as a hook's allow would).
func agentRun(dir string) (float64, error) {
	script := make(agenttest.Script, agentCalls)
	for i := range script {
		script[i] = agenttest.Turn{Tools: []agenttest.ToolUse{agenttest.Bash(fmt.Sprintf("echo %d", i))}}
	}
	a, err := agenttest.Start(script)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	res, err := a.Exec(dir, "-p", "bench", "--allowedTools", "Bash")
	if err != nil {
		return 0, err
	}
	if res.ExitCode != 0 || res.TerminalReason != "completed" || !a.ScriptDone() {
		return 0, fmt.Errorf("agent run in %s: exit %d, terminal_reason %q, script done %v\n%.500s", dir, res.ExitCode, res.TerminalReason, a.ScriptDone(), res.Stderr)
	}
	return float64(res.Elapsed.Microseconds()) / 1000, nil
}
