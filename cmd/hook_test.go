package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
)

// hookRig drives the real binary's `undolog hook` with the events Claude
// Code sends, this test process standing for the agent (the hook's parent).
type hookRig struct {
	t       *testing.T
	bin     string
	log     string
	project string
	files   string
	session string
	env     []string // more of the hook's environment
	message string   // the systemMessage of the last PreToolUse answer
}

// newHookRig is a project set up by `undolog init claude-code`: its Bash
// sandboxed, so the hook holds no shell command for want of it.
func newHookRig(t *testing.T, log string) *hookRig {
	r := &hookRig{t: t, bin: testbin.Undolog(t), log: log, project: t.TempDir(), files: t.TempDir(), session: "6f1c2a9e-0d4b-4c8e-9a51-3b7e2d0c8f14"}
	init := exec.Command(r.bin, "--log", r.log, "init", "claude-code", r.project)
	init.Env = append(os.Environ(), "UNDOLOG_FILES_DIR="+r.files)
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("init claude-code: %v\n%s", err, out)
	}
	return r
}

// settings writes the project's .claude/settings.json.
func (r *hookRig) settings(s string) {
	r.t.Helper()
	if err := os.MkdirAll(filepath.Join(r.project, ".claude"), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.project, ".claude", "settings.json"), []byte(s), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// initSettings is the project's .claude/settings.json as init wrote it,
// and parsed.
func (r *hookRig) initSettings() ([]byte, map[string]any) {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.project, ".claude", "settings.json"))
	if err != nil {
		r.t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		r.t.Fatal(err)
	}
	return b, s
}

// event is a hook event of Claude Code's: its common fields, the tool's,
// and more (tool_response, error, is_interrupt).
func (r *hookRig) event(name, tool string, input map[string]any, more map[string]any) []byte {
	ev := map[string]any{"session_id": r.session, "transcript_path": filepath.Join(r.project, "t.jsonl"), "cwd": r.project,
		"hook_event_name": name, "permission_mode": "default", "tool_name": tool, "tool_input": input, "tool_use_id": "toolu_01"}
	for k, v := range more {
		ev[k] = v
	}
	b, err := json.Marshal(ev)
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

// hook runs `undolog hook` on event: its stdout, stderr and exit code.
func (r *hookRig) hook(event []byte, flags ...string) (string, string, int) {
	r.t.Helper()
	cmd := exec.Command(r.bin, append([]string{"hook"}, flags...)...)
	cmd.Dir = r.project
	cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+r.log, "UNDOLOG_FILES_DIR="+r.files, "CLAUDE_PROJECT_DIR="+r.project, "UNDOLOG_SESSION=", "UNDOLOG_ACTOR=", "UNDOLOG_HOOK_HEADLESS=")
	cmd.Env = append(cmd.Env, r.env...)
	cmd.Stdin = bytes.NewReader(event)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// pre runs a PreToolUse hook: its decision and reason.
func (r *hookRig) pre(tool string, input map[string]any, flags ...string) (string, string) {
	r.t.Helper()
	out, stderr, code := r.hook(r.event("PreToolUse", tool, input, nil), flags...)
	var ans struct {
		SystemMessage      string `json:"systemMessage"`
		HookSpecificOutput struct {
			HookEventName            string `json:"hookEventName"`
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &ans) != nil || ans.HookSpecificOutput.HookEventName != "PreToolUse" {
		r.t.Fatalf("PreToolUse %s: exit %d, stdout %q, stderr %q: want exit 0 and a decision", tool, code, out, stderr)
	}
	r.message = ans.SystemMessage
	return ans.HookSpecificOutput.PermissionDecision, ans.HookSpecificOutput.PermissionDecisionReason
}

// post runs a PostToolUse (response) or PostToolUseFailure (more has error).
func (r *hookRig) post(name, tool string, input map[string]any, more map[string]any) {
	r.t.Helper()
	if out, stderr, code := r.hook(r.event(name, tool, input, more)); code != 0 || strings.TrimSpace(out) != "{}" {
		r.t.Fatalf("%s %s: exit %d, stdout %q, stderr %q", name, tool, code, out, stderr)
	}
}

// undolog runs another command on the log, as a person elsewhere would.
func (r *hookRig) undolog(args ...string) string {
	r.t.Helper()
	out, err := exec.Command(r.bin, append([]string{"--log", r.log}, args...)...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("undolog %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// hookEffect is an effect as `list -o json` gives it.
type hookEffect struct {
	ID     uint64          `json:"id"`
	Tool   string          `json:"tool"`
	Tier   string          `json:"tier"`
	State  string          `json:"state"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

// effects are the session's effects, newest first.
func (r *hookRig) effects() []hookEffect {
	r.t.Helper()
	var list []hookEffect
	out := r.undolog("list", "--session", r.session, "--limit", "0", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		r.t.Fatalf("list: %v\n%s", err, out)
	}
	return list
}

func hookEngines(t *testing.T, run func(t *testing.T, r *hookRig)) {
	t.Run("file", func(t *testing.T) { run(t, newHookRig(t, filepath.Join(t.TempDir(), "u.db"))) })
	t.Run("postgres", func(t *testing.T) { run(t, newHookRig(t, pgtest.Server(t).NewDatabase(t))) })
}

// Safe calls run unlogged; compensable ones are recorded before they run,
// committed with the tool's response by PostToolUse, failed by
// PostToolUseFailure, as the agent (claude-code) in Claude Code's session.
func TestHookSafeAndCompensableCalls(t *testing.T) {
	hookEngines(t, func(t *testing.T, r *hookRig) {
		if d, why := r.pre("Read", map[string]any{"file_path": "a.go"}); d != "allow" {
			t.Fatalf("Read: %s %s, want allow", d, why)
		}
		write := map[string]any{"file_path": filepath.Join(r.project, "a.txt"), "content": "hello\n"}
		if d, why := r.pre("Write", write); d != "allow" {
			t.Fatalf("Write: %s %s, want allow", d, why)
		}
		if e := r.effects(); len(e) != 1 || e[0].Tool != "Write" || e[0].Tier != "compensable" || e[0].State != "executing" {
			t.Fatalf("after PreToolUse: %+v, want one Write executing (Read is not logged)", e)
		}
		r.post("PostToolUse", "Write", write, map[string]any{"tool_response": map[string]any{"type": "create", "filePath": "a.txt"}, "duration_ms": 3})
		bash := map[string]any{"command": "make build", "description": "build"}
		if d, why := r.pre("Bash", bash); d != "allow" {
			t.Fatalf("Bash make: %s %s, want allow", d, why)
		}
		r.post("PostToolUseFailure", "Bash", bash, map[string]any{"error": "Exit code 2: no rule to make target", "is_interrupt": false})
		e := r.effects()
		var result bytes.Buffer
		if len(e) == 2 {
			json.Compact(&result, e[1].Result)
		}
		// A failed call is pending again, its error kept: the same call runs again.
		if len(e) != 2 || e[1].State != "committed" || result.String() != `{"filePath":"a.txt","type":"create"}` ||
			e[0].Tool != "Bash" || e[0].State != "pending" || !strings.Contains(e[0].Error, "no rule to make target") {
			t.Fatalf("effects %+v: want Write committed with its response, Bash failed with its error", e)
		}
		if show := r.undolog("session", "show", r.session); !strings.Contains(show, "claude-code") {
			t.Fatalf("session show names no claude-code:\n%s", show)
		}
		// A failed call made again runs again.
		if d, why := r.pre("Bash", bash); d != "allow" {
			t.Fatalf("Bash make again: %s %s, want allow", d, why)
		}
	})
}

// An irreversible call is held: no decision within --wait denies it,
// naming the effect, with no command that decides it for the model to run
// (the person reads it in the systemMessage); approved from another process, the same call made
// again runs, once: made again after it committed, it is denied with its
// recorded outcome. A call held while a person approves it goes ahead.
func TestHookHoldsIrreversibleCalls(t *testing.T) {
	hookEngines(t, func(t *testing.T, r *hookRig) {
		push := map[string]any{"command": "git push origin main", "description": "push"}
		d, why := r.pre("Bash", push, "--wait", "200ms")
		if d != "deny" || !strings.Contains(why, "effect 1 (Bash)") || !strings.Contains(why, "person") || !strings.Contains(why, "same Bash call again later") {
			t.Fatalf("undecided: %s %q, want deny naming effect 1, a person deciding, and asking for the same call later", d, why)
		}
		if strings.Contains(why, "approve 1") || strings.Contains(why, "reject 1") || strings.Contains(why, "`") {
			t.Fatalf("undecided: the model reads %q: it names a command that decides the call", why)
		}
		if !strings.Contains(r.message, "approve 1") || !strings.Contains(r.message, "reject 1") {
			t.Fatalf("undecided: systemMessage %q, want the person's commands", r.message)
		}
		if e := r.effects(); len(e) != 1 || e[0].State != "pending" {
			t.Fatalf("undecided: %+v, want effect 1 pending", e)
		}
		r.undolog("approve", "1", "--as", "ops", "--reason", "ok")
		if d, why := r.pre("Bash", push, "--wait", "200ms"); d != "allow" {
			t.Fatalf("after approval: %s %q, want allow", d, why)
		}
		r.post("PostToolUse", "Bash", push, map[string]any{"tool_response": map[string]any{"stdout": "To origin\n   a..b  main -> main\x1b[2J", "stderr": ""}})
		d, why = r.pre("Bash", push, "--wait", "200ms")
		// The recorded outcome is the tool's response as JSON: no control byte.
		if d != "deny" || !strings.Contains(why, "effect 1 (Bash) already ran") || !strings.Contains(why, "main -> main") ||
			strings.Contains(why, "\x1b") || !strings.Contains(why, `\u001b[2J`) {
			t.Fatalf("repeat of a committed push: %s %q, want deny with its recorded outcome", d, why)
		}
		for _, e := range r.effects() {
			if e.State == "executing" || e.State == "pending" {
				t.Fatalf("after the denied repeat, effect %d is %s: want nothing started or waiting", e.ID, e.State)
			}
		}

		// Held while a person approves it from elsewhere: allowed in the same hook.
		publish := map[string]any{"command": "npm publish", "description": "publish"}
		type answer struct{ d, why string }
		done := make(chan answer, 1)
		go func() {
			out, _, _ := r.hook(r.event("PreToolUse", "Bash", publish, nil), "--wait", "60s")
			var ans struct {
				H struct {
					D   string `json:"permissionDecision"`
					Why string `json:"permissionDecisionReason"`
				} `json:"hookSpecificOutput"`
			}
			json.Unmarshal([]byte(out), &ans)
			done <- answer{ans.H.D, ans.H.Why}
		}()
		id := ""
		for deadline := time.Now().Add(30 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			for _, e := range r.effects() {
				if e.State == "pending" {
					id = fmt.Sprint(e.ID)
				}
			}
		}
		if id == "" {
			t.Fatal("npm publish never came to wait for a decision")
		}
		r.undolog("approve", id, "--as", "ops")
		select {
		case a := <-done:
			if a.d != "allow" {
				t.Fatalf("approved while held: %s %q, want allow", a.d, a.why)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the held hook did not answer after the approval")
		}
	})
}

// A rejection denies with the person's reason and halts the session: the
// next call of the session is denied too. Headless, an undecided call is
// deferred.
func TestHookRejectedAndDeferred(t *testing.T) {
	hookEngines(t, func(t *testing.T, r *hookRig) {
		deploy := map[string]any{"command": "kubectl apply -f prod.yaml", "description": "deploy"}
		if d, why := r.pre("Bash", deploy, "--headless", "--wait", "0s"); d != "defer" || !strings.Contains(why, "effect 1") {
			t.Fatalf("headless: %s %q, want defer naming effect 1", d, why)
		}
		r.undolog("reject", "1", "--as", "ops", "--reason", "not on a Friday")
		d, why := r.pre("Bash", deploy, "--wait", "200ms")
		if d != "deny" || !strings.Contains(why, "not on a Friday") || !strings.Contains(why, "halted") || strings.Contains(why, "session resume") ||
			!strings.Contains(r.message, "session resume") {
			t.Fatalf("rejected: %s %q, want deny with the reason and the halt", d, why)
		}
		if d, why := r.pre("Write", map[string]any{"file_path": "b.txt", "content": "x"}); d != "deny" || !strings.Contains(why, "halted") ||
			strings.Contains(why, "session resume") || !strings.Contains(r.message, "session resume") {
			t.Fatalf("Write in a halted session: %s %q (person: %q), want deny naming the halt, the command for the person only", d, why, r.message)
		}
	})
}

// Whatever goes wrong, PreToolUse denies (exit 0, JSON): an unreadable
// policy, a log that cannot be opened; an input that is not an event exits
// 2, which blocks the call too. A PostToolUse with no call started fails.
func TestHookErrorsDeny(t *testing.T) {
	r := newHookRig(t, filepath.Join(t.TempDir(), "u.db"))
	bad := filepath.Join(r.project, "bad.yaml")
	os.WriteFile(bad, []byte("tools:\n  Bash: {tier: sometimes}\n"), 0o644)
	write := map[string]any{"file_path": "a.txt", "content": "x"}
	if d, why := r.pre("Write", write, "--policy", bad); d != "deny" || !strings.Contains(why, "policy") {
		t.Fatalf("bad policy: %s %q, want deny", d, why)
	}
	notADir := filepath.Join(r.project, "file")
	os.WriteFile(notADir, nil, 0o644)
	r.log = filepath.Join(notADir, "u.db")
	if d, why := r.pre("Write", write); d != "deny" || !strings.Contains(why, "did not run") {
		t.Fatalf("log that cannot be opened: %s %q, want deny", d, why)
	}
	if d, _ := r.pre("Read", map[string]any{"file_path": "a.txt"}); d != "allow" {
		t.Fatalf("a safe call needs no log: %s, want allow", d)
	}
	if _, stderr, code := r.hook([]byte("not json")); code != 2 || stderr == "" {
		t.Fatalf("garbage input: exit %d, stderr %q; want 2 with a message", code, stderr)
	}
	if out, _, code := r.hook([]byte(`{"session_id":"s","hook_event_name":"SessionStart"}`)); code != 0 || strings.TrimSpace(out) != "{}" {
		t.Fatalf("another event: exit %d %q, want a no-op", code, out)
	}
	r.log = filepath.Join(t.TempDir(), "u.db")
	if _, stderr, code := r.hook(r.event("PostToolUse", "Write", write, map[string]any{"tool_response": "ok"})); code != 1 || !strings.Contains(stderr, "no call started") {
		t.Fatalf("PostToolUse without its PreToolUse: exit %d %q, want 1", code, stderr)
	}
}

// The agent's process owns a call between its hooks: a call interrupted
// (PostToolUseFailure with is_interrupt) stays executing while the agent
// lives, and is in doubt once it is gone; the same call is then denied for
// a person to resolve, not run again.
func TestHookInterruptedCallIsInDoubtOnceTheAgentIsGone(t *testing.T) {
	r := newHookRig(t, filepath.Join(t.TempDir(), "u.db"))
	edit := map[string]any{"file_path": "a.txt", "old_string": "a", "new_string": "b", "replace_all": false}
	// The agent here is a process that runs the two hooks (through a
	// shell, as Claude Code may) and exits: timeout(1), which is no shell,
	// so the hook takes it as its agent.
	script := filepath.Join(r.project, "agent.sh")
	os.WriteFile(filepath.Join(r.project, "pre.json"), r.event("PreToolUse", "Edit", edit, nil), 0o644)
	os.WriteFile(filepath.Join(r.project, "post.json"), r.event("PostToolUseFailure", "Edit", edit, map[string]any{"error": "interrupted", "is_interrupt": true}), 0o644)
	os.WriteFile(script, []byte(`timeout 60 sh -c '"$UNDOLOG_BIN" hook < pre.json && "$UNDOLOG_BIN" hook < post.json'`), 0o755)
	cmd := exec.Command("sh", script)
	cmd.Dir = r.project
	cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+r.log, "UNDOLOG_FILES_DIR="+r.files, "UNDOLOG_BIN="+r.bin, "UNDOLOG_SESSION=")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), `"allow"`) {
		t.Fatalf("agent: %v\n%s", err, out)
	}
	if e := r.effects(); len(e) != 1 || e[0].State != "executing" {
		t.Fatalf("interrupted: %+v, want executing", e)
	}
	d, why := r.pre("Edit", edit)
	if d != "deny" || !strings.Contains(why, "in doubt") || strings.Contains(why, "resolve 1") || !strings.Contains(r.message, "resolve 1") {
		t.Fatalf("the same call once its agent is gone: %s %q (systemMessage %q), want deny: in doubt, resolve only for the person", d, why, r.message)
	}
}

// UNDOLOG_HOOK_HEADLESS=1 is --headless --wait 0s, over the settings'
// --wait: an undecided call is deferred at once; --headless on the command
// line leaves the flags as they are.
func TestHookHeadlessEnvDefersAtOnce(t *testing.T) {
	r := newHookRig(t, filepath.Join(t.TempDir(), "u.db"))
	r.env = []string{"UNDOLOG_HOOK_HEADLESS=1"}
	push := map[string]any{"command": "git push origin main"}
	start := time.Now()
	if d, why := r.pre("Bash", push, "--wait", "30s"); d != "defer" || !strings.Contains(why, "effect 1") {
		t.Fatalf("UNDOLOG_HOOK_HEADLESS=1: %s %q, want defer naming effect 1", d, why)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("UNDOLOG_HOOK_HEADLESS=1 waited %v for a decision, want none", took)
	}
	start = time.Now()
	if d, _ := r.pre("Bash", push, "--headless", "--wait", "1s"); d != "defer" || time.Since(start) < time.Second {
		t.Fatalf("--headless --wait 1s: %s after %v, want defer after the wait", d, time.Since(start))
	}
}

// The agent cannot talk the hook round from its own Bash: its call to
// approve its own held call is itself held (and the held call stays
// pending), as are its rewrite of the hook's policy and a write through a
// link in the project to a file outside it; a read of the log is allowed.
func TestHookAgentCannotApproveItsOwnCalls(t *testing.T) {
	hookEngines(t, func(t *testing.T, r *hookRig) {
		push := map[string]any{"command": "git push origin main", "description": "push"}
		if d, why := r.pre("Bash", push, "--wait", "100ms"); d != "deny" {
			t.Fatalf("git push: %s %q, want deny (held)", d, why)
		}
		approve := map[string]any{"command": "undolog --log '" + r.log + "' approve 1 --reason ok", "description": "approve"}
		if d, why := r.pre("Bash", approve, "--wait", "100ms"); d != "deny" {
			t.Fatalf("the agent's own approve: %s %q, want deny (held for a person)", d, why)
		}
		if d, why := r.pre("Bash", map[string]any{"command": "undolog list --session " + r.session}); d != "allow" {
			t.Fatalf("undolog list: %s %q, want allow", d, why)
		}
		policy := map[string]any{"file_path": filepath.Join(r.project, ".claude", "undolog-policy.yaml"), "content": "tools: {Bash: {tier: safe}}\n"}
		if d, why := r.pre("Write", policy, "--wait", "100ms"); d != "deny" {
			t.Fatalf("Write of the policy: %s %q, want deny", d, why)
		}
		outside := testbin.DirOutsideTmp(t) // not /tmp, which is scratch
		if err := os.Symlink(outside, filepath.Join(r.project, "out")); err != nil {
			t.Fatal(err)
		}
		if d, why := r.pre("Bash", map[string]any{"command": "echo x > out/not-written"}, "--wait", "100ms"); d != "deny" {
			t.Fatalf("a write through a link to outside the project: %s %q, want deny", d, why)
		}
		logFile := logaddr.IsFile(r.log)
		if logFile { // the log's file is held wherever it is, below /tmp too
			if d, why := r.pre("Bash", map[string]any{"command": "rm -f '" + r.log + "'"}, "--wait", "100ms"); d != "deny" {
				t.Fatalf("rm of the log: %s %q, want deny", d, why)
			}
		}
		if d, why := r.pre("Bash", map[string]any{"command": "echo x > in.txt"}); d != "allow" {
			t.Fatalf("a write in the project: %s %q, want allow", d, why)
		}
		tiers := map[uint64]string{}
		for _, e := range r.effects() {
			tiers[e.ID] = e.Tier + " " + e.State
		}
		if tiers[1] != "irreversible pending" || tiers[2] != "irreversible pending" || tiers[3] != "irreversible pending" || tiers[4] != "irreversible pending" {
			t.Fatalf("effects %v: want the push, the approve, the policy write and the write outside held, pending", tiers)
		}
		if logFile && tiers[5] != "irreversible pending" {
			t.Fatalf("effects %v: want the rm of the log held, pending", tiers)
		}
	})
}

// approve, reject, resolve and session resume refuse, exit 13 with the log
// unchanged, when run from inside the agent whose session the call is in
// (Claude Code's Bash gives its shells CLAUDECODE=1 and
// CLAUDE_CODE_SESSION_ID); another session's call, or a shell outside the
// agent, decides as ever.
func TestAgentCannotDecideItsOwnCalls(t *testing.T) {
	r := newHookRig(t, filepath.Join(t.TempDir(), "u.db"))
	push := map[string]any{"command": "git push origin main"}
	if d, _ := r.pre("Bash", push, "--wait", "0s"); d != "deny" {
		t.Fatalf("push: %s, want deny", d)
	}
	inAgent := func(session string, args ...string) (string, int) {
		cmd := exec.Command(r.bin, append([]string{"--log", r.log}, args...)...)
		cmd.Env = append(os.Environ(), "CLAUDECODE=1", "CLAUDE_CODE_SESSION_ID="+session, "UNDOLOG_SESSION=")
		return outputAndCode(cmd)
	}
	before := r.undolog("show", "1", "-o", "json")
	for _, args := range [][]string{{"approve", "1"}, {"reject", "1", "--reason", "no"}, {"resolve", "1", "--reason", "done"}} {
		out, code := inAgent(r.session, args...)
		if code != ExitAgentDecision || !strings.Contains(out, "inside the coding agent") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Fatalf("%s from inside the agent: exit %d %q, want %d and one line", args[0], code, out, ExitAgentDecision)
		}
	}
	if after := r.undolog("show", "1", "-o", "json"); after != before {
		t.Fatalf("a refused decision changed effect 1:\n%s\nwas\n%s", after, before)
	}
	r.undolog("reject", "1", "--as", "ops", "--reason", "not now")
	if out, code := inAgent(r.session, "session", "resume", r.session, "--reason", "go on"); code != ExitAgentDecision {
		t.Fatalf("session resume from inside the agent: exit %d %q", code, out)
	}
	if out, code := inAgent("another-session", "session", "resume", r.session, "--reason", "go on"); code != 0 {
		t.Fatalf("session resume from another agent session: exit %d %q, want done", code, out)
	}
}

// The hook exits once it has answered: a log another process holds (a
// reader, so that the hook's first write is the one that waits) past the
// hook's bound gets a denial by then, and the process does not outlive
// it waiting to close the log (Claude Code waits for the hook to exit, and
// runs the tool of a hook it cuts off).
func TestHookExitsOnceItHasAnswered(t *testing.T) {
	r := newHookRig(t, filepath.Join(t.TempDir(), "u.db"))
	first := map[string]any{"command": "touch a"}
	if d, why := r.pre("Bash", first); d != "allow" {
		t.Fatalf("first: %s %q", d, why)
	}
	r.post("PostToolUse", "Bash", first, map[string]any{"tool_response": "ok"})
	// A reader's lock: the hook reads on, and its first write waits.
	held, err := os.OpenFile(r.log, os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d, why := r.pre("Bash", map[string]any{"command": "touch b"}, "--wait", "0s", "--lock-timeout", "90s")
	// The hook answers by its wait plus 20 s; then it has a few seconds to
	// let go of the log.
	if took := time.Since(start); d != "deny" || took > 40*time.Second {
		t.Fatalf("a held log: %s %q after %v, want deny and the hook gone within 40s", d, why, took)
	}
}

// A Bash call run in the background is held, not compensable: Claude Code
// sends its PostToolUse when it starts, so what it changes after is in no
// snapshot, and undo would report undone what it never restored.
func TestHookHoldsABackgroundCommand(t *testing.T) {
	r := newHookRig(t, filepath.Join(t.TempDir(), "u.db"))
	late := map[string]any{"command": "sleep 3; echo late > late.txt", "run_in_background": true}
	if d, why := r.pre("Bash", late, "--wait", "0s"); d != "deny" || !strings.Contains(r.message, "approve") {
		t.Fatalf("a background command: %s %q, want deny (held for a person)", d, why)
	}
	if d, why := r.pre("Bash", map[string]any{"command": "sleep 3; echo late > late.txt"}); d != "allow" {
		t.Fatalf("the same command in the foreground: %s %q, want allow", d, why)
	}
	if d, why := r.pre("Bash", map[string]any{"command": "ls", "run_in_background": true}); d != "allow" {
		t.Fatalf("a safe command in the background: %s %q, want allow", d, why)
	}
}

// A shell command the policy takes for compensable is held for a person
// when the project's settings leave Bash outside Claude Code's sandbox
// (settings.local.json turning it off wins over settings.json), or leave
// the log and .claude writable to it; a safe one and a Write go on;
// --no-sandbox, the user's opt-out, holds nothing.
func TestHookHoldsShellCommandsOutsideTheSandbox(t *testing.T) {
	r := newHookRig(t, filepath.Join(t.TempDir(), "u.db"))
	local := filepath.Join(r.project, ".claude", "settings.local.json")
	if err := os.WriteFile(local, []byte(`{"sandbox": {"enabled": false}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	build := map[string]any{"command": "make build"}
	d, why := r.pre("Bash", build, "--wait", "100ms")
	if d != "deny" || !strings.Contains(why, "person") {
		t.Fatalf("make build with the sandbox off: %s %q, want deny until a person decides", d, why)
	}
	if e := r.effects(); len(e) != 1 || e[0].Tier != "irreversible" || e[0].State != "pending" {
		t.Fatalf("effects %+v: want make build held as irreversible", e)
	}
	if out := r.undolog("show", "1"); !strings.Contains(out, "sandbox is off") {
		t.Fatalf("show 1 does not say why it is held:\n%s", out)
	}
	if d, why := r.pre("Bash", map[string]any{"command": "ls"}); d != "allow" {
		t.Fatalf("ls with the sandbox off: %s %q, want allow", d, why)
	}
	write := map[string]any{"file_path": filepath.Join(r.project, "a.txt"), "content": "x"}
	if d, why := r.pre("Write", write); d != "allow" {
		t.Fatalf("Write with the sandbox off: %s %q, want allow", d, why)
	}
	r.post("PostToolUse", "Write", write, map[string]any{"tool_response": map[string]any{"type": "create"}})
	test := map[string]any{"command": "make test"}
	if d, why := r.pre("Bash", test, "--no-sandbox"); d != "allow" {
		t.Fatalf("make test with --no-sandbox: %s %q, want allow", d, why)
	}
	r.post("PostToolUse", "Bash", test, map[string]any{"tool_response": map[string]any{"stdout": ""}})
	if err := os.Remove(local); err != nil {
		t.Fatal(err)
	}
	lint := map[string]any{"command": "make lint"}
	if d, why := r.pre("Bash", lint); d != "allow" {
		t.Fatalf("make lint with the sandbox on: %s %q, want allow", d, why)
	}
	r.post("PostToolUse", "Bash", lint, map[string]any{"tool_response": map[string]any{"stdout": ""}})
	for _, s := range []string{`{}`, `{"sandbox": {"enabled": true}}`, `{"sandbox": {"enabled": true, "failIfUnavailable": true}}`,
		`{"sandbox": {"enabled": true, "failIfUnavailable": true, "allowUnsandboxedCommands": false}}`} {
		r.settings(s)
		if d, why := r.pre("Bash", map[string]any{"command": "make clean"}, "--wait", "100ms"); d != "deny" {
			t.Fatalf("make clean under settings %s: %s %q, want deny", s, d, why)
		}
	}
}

// sandbox.excludedCommands takes its commands out of Claude Code's sandbox
// even with allowUnsandboxedCommands false (ADV31C K1: the agent's
// Makefile ran undolog approve): in the project's settings.json, its
// settings.local.json or the user's settings, it holds every shell
// command the policy takes for compensable, the reason naming the file
// and the key. File tools go on; an empty list holds nothing.
func TestHookHoldsShellCommandsWhenTheSandboxExcludesSome(t *testing.T) {
	r := newHookRig(t, filepath.Join(t.TempDir(), "u.db"))
	config := t.TempDir()
	r.env = append(r.env, "CLAUDE_CONFIG_DIR="+config)
	settings := filepath.Join(r.project, ".claude", "settings.json")
	initd, s := r.initSettings()
	s["sandbox"].(map[string]any)["excludedCommands"] = []any{"make"}
	withExcluded, _ := json.Marshal(s)
	local := filepath.Join(r.project, ".claude", "settings.local.json")
	user := filepath.Join(config, "settings.json")
	for i, c := range []struct{ file, content string }{
		{settings, string(withExcluded)},
		{local, `{"sandbox":{"excludedCommands":["make"]}}`},
		{user, `{"sandbox":{"excludedCommands":["make"]}}`},
	} {
		if err := os.WriteFile(c.file, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		build := map[string]any{"command": fmt.Sprintf("make build%d", i)}
		if d, why := r.pre("Bash", build, "--wait", "100ms"); d != "deny" || !strings.Contains(why, "person") {
			t.Fatalf("make with %s excluding it: %s %q, want deny until a person decides", c.file, d, why)
		}
		e := r.effects()
		if len(e) == 0 || e[0].Tier != "irreversible" || e[0].State != "pending" {
			t.Fatalf("effects %+v: want make held as irreversible", e)
		}
		if out := r.undolog("show", fmt.Sprint(e[0].ID)); !strings.Contains(out, c.file) || !strings.Contains(out, "sandbox.excludedCommands") {
			t.Fatalf("show %d does not name %s and its key:\n%s", e[0].ID, c.file, out)
		}
		write := map[string]any{"file_path": filepath.Join(r.project, fmt.Sprintf("a%d.txt", i)), "content": "x"}
		if d, why := r.pre("Write", write); d != "allow" {
			t.Fatalf("Write with %s excluding make: %s %q, want allow", c.file, d, why)
		}
		r.post("PostToolUse", "Write", write, map[string]any{"tool_response": map[string]any{"type": "create"}})
		if err := os.WriteFile(c.file, []byte(`{"sandbox":{"excludedCommands":[]}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if c.file == settings {
			if err := os.WriteFile(settings, initd, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		lint := map[string]any{"command": fmt.Sprintf("make lint%d", i)}
		if d, why := r.pre("Bash", lint); d != "allow" {
			t.Fatalf("make lint with %s excluding nothing: %s %q, want allow", c.file, d, why)
		}
		r.post("PostToolUse", "Bash", lint, map[string]any{"tool_response": map[string]any{"stdout": ""}})
	}
}

// A file tool's call the policy takes for compensable is held for a
// person when the project's settings lack a permission rule init wrote
// (ADV31C M1: without them Write reached the store and the log's journal),
// one rule missing as much as all; the rules count from settings.json
// and settings.local.json together; a Read goes on.
func TestHookHoldsFileEditsWithoutThePermissionRules(t *testing.T) {
	r := newHookRig(t, filepath.Join(t.TempDir(), "u.db"))
	settings := filepath.Join(r.project, ".claude", "settings.json")
	local := filepath.Join(r.project, ".claude", "settings.local.json")
	_, s := r.initSettings()
	perms := s["permissions"].(map[string]any)
	rules := perms["deny"].([]any)
	if len(rules) < 3 {
		t.Fatalf("init wrote permission rules %v, want .claude's, the log's and the store's", rules)
	}
	write := func(i int, want string) {
		t.Helper()
		in := map[string]any{"file_path": filepath.Join(r.project, fmt.Sprintf("f%d.txt", i)), "content": "x"}
		d, why := r.pre("Write", in, "--wait", "100ms")
		if d != want {
			t.Fatalf("Write %d: %s %q, want %s", i, d, why, want)
		}
		if d == "allow" {
			r.post("PostToolUse", "Write", in, map[string]any{"tool_response": map[string]any{"type": "create"}})
			return
		}
		e := r.effects()
		if e[0].Tier != "irreversible" || e[0].State != "pending" {
			t.Fatalf("effects %+v: want the Write held as irreversible", e)
		}
		if out := r.undolog("show", fmt.Sprint(e[0].ID)); !strings.Contains(out, "permissions.deny") {
			t.Fatalf("show %d does not say why it is held:\n%s", e[0].ID, out)
		}
	}
	rewrite := func(file string, deny []any) {
		t.Helper()
		perms["deny"] = deny
		b, _ := json.Marshal(s)
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(0, "allow")
	rewrite(settings, []any{})
	write(1, "deny")
	rewrite(settings, rules[:len(rules)-1]) // the store's rule gone
	write(2, "deny")
	if d, why := r.pre("Read", map[string]any{"file_path": filepath.Join(r.project, "f0.txt")}); d != "allow" {
		t.Fatalf("Read without the rules: %s %q, want allow", d, why)
	}
	if err := os.WriteFile(local, []byte(fmt.Sprintf(`{"permissions":{"deny":[%q]}}`, rules[len(rules)-1])), 0o644); err != nil {
		t.Fatal(err)
	}
	write(3, "allow")
}
