package agenttest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// The hooks and the sandbox are this test binary started again: with
	// -race it would sleep a second at each exit.
	os.Setenv("GORACE", strings.TrimSpace("atexit_sleep_ms=0 "+os.Getenv("GORACE")))
	Main(m)
}

// allowAll answers every PreToolUse with allow, as a guard that lets a call
// through does (it skips Claude Code's own prompt, which -p cannot show).
var allowAll = HookRule{Event: "PreToolUse", Answers: []Answer{{Decision: "allow"}}}

// The real agent's Bash, Write, Edit and a failing Bash, each seen by the
// hooks before and after, with the fields undolog's hook reads.
func TestHooksSeeEveryToolCall(t *testing.T) {
	dir := t.TempDir()
	hook := &Hook{Rules: []HookRule{allowAll}}
	hook.Install(t, dir)
	notes := filepath.Join(dir, "notes.txt")
	a, r := Run(t, Script{
		{Text: "making a file", Tools: []ToolUse{Bash("printf 'from bash\\n' > made.txt")}},
		{Tools: []ToolUse{Write(notes, "one\ntwo\n")}},
		{Tools: []ToolUse{Edit(notes, "two", "three")}},
		{Tools: []ToolUse{Bash("echo failing >&2; exit 3")}},
	}, dir)
	if r.ExitCode != 0 || r.IsError || r.TerminalReason != "completed" || r.Text != EndText {
		t.Fatalf("run: exit %d, is_error %v, terminal_reason %q, result %q\nstderr: %s", r.ExitCode, r.IsError, r.TerminalReason, r.Text, r.Stderr)
	}
	if !a.ScriptDone() {
		t.Fatal("the agent did not ask for every turn of the script")
	}
	for path, want := range map[string]string{filepath.Join(dir, "made.txt"): "from bash\n", notes: "one\nthree\n"} {
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}

	calls := hook.Calls(t)
	var seen []string
	for _, c := range calls {
		seen = append(seen, c.Event()+" "+c.Tool())
		p := c.Payload
		for _, field := range []string{"session_id", "transcript_path", "cwd", "hook_event_name", "permission_mode", "tool_name", "tool_input", "tool_use_id"} {
			if _, ok := p[field]; !ok {
				t.Errorf("%s %s: no %s in %v", c.Event(), c.Tool(), field, p)
			}
		}
		if p["session_id"] != r.SessionID || c.SessionIDEnv != r.SessionID {
			t.Errorf("%s %s: session_id %v, CLAUDE_CODE_SESSION_ID %q; the run's is %q", c.Event(), c.Tool(), p["session_id"], c.SessionIDEnv, r.SessionID)
		}
		if p["cwd"] != dir || c.Cwd != dir || c.ProjectDirEnv != dir {
			t.Errorf("%s %s: cwd %v, ran in %q, CLAUDE_PROJECT_DIR %q; want %q", c.Event(), c.Tool(), p["cwd"], c.Cwd, c.ProjectDirEnv, dir)
		}
		switch c.Event() {
		case "PostToolUse":
			for _, field := range []string{"tool_response", "duration_ms"} {
				if _, ok := p[field]; !ok {
					t.Errorf("PostToolUse %s: no %s in %v", c.Tool(), field, p)
				}
			}
		case "PostToolUseFailure":
			for _, field := range []string{"error", "is_interrupt"} {
				if _, ok := p[field]; !ok {
					t.Errorf("PostToolUseFailure %s: no %s in %v", c.Tool(), field, p)
				}
			}
		}
	}
	want := []string{
		"PreToolUse Bash", "PostToolUse Bash",
		"PreToolUse Write", "PostToolUse Write",
		"PreToolUse Edit", "PostToolUse Edit",
		"PreToolUse Bash", "PostToolUseFailure Bash",
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("hook calls:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	// Each tool's input as the model sent it, under the tool_use id the
	// model gave; before and after share it.
	inputs := []map[string]string{
		{"command": "printf 'from bash\\n' > made.txt"},
		{"file_path": notes, "content": "one\ntwo\n"},
		{"file_path": notes, "old_string": "two", "new_string": "three"},
		{"command": "echo failing >&2; exit 3"},
	}
	for i, fields := range inputs {
		before, after := calls[2*i], calls[2*i+1]
		id := "toolu_agenttest_" + string(rune('1'+i))
		if before.ToolUseID() != id || after.ToolUseID() != id {
			t.Errorf("%s: tool_use_id %q before, %q after; want %q", before.Tool(), before.ToolUseID(), after.ToolUseID(), id)
		}
		for k, v := range fields {
			if got := before.ToolInput()[k]; got != v {
				t.Errorf("%s: tool_input.%s %q, want %q", before.Tool(), k, got, v)
			}
		}
	}
	if _, ok := calls[5].ToolInput()["replace_all"]; !ok {
		t.Errorf("Edit: no replace_all in tool_input %v", calls[5].ToolInput())
	}
	if _, ok := calls[0].ToolInput()["description"]; !ok {
		t.Errorf("Bash: no description in tool_input %v", calls[0].ToolInput())
	}
}

// A PreToolUse deny stops the tool and the model reads the reason in the
// tool result; so does an exit 2 with the reason on stderr; the same call
// retried goes ahead once the hook allows it.
func TestHookDenyReachesTheModel(t *testing.T) {
	dir := t.TempDir()
	const reason = "agenttest: held for approval; retry the same call later"
	const blocked = "agenttest: blocked by exit 2"
	hook := &Hook{Rules: []HookRule{{Event: "PreToolUse", Tool: "Bash", Answers: []Answer{
		{Decision: "deny", Reason: reason}, {Decision: "exit2", Reason: blocked}, {Decision: "allow"}}}}}
	hook.Install(t, dir)
	push := Bash("touch pushed")
	a, r := Run(t, Script{{Tools: []ToolUse{push}}, {Text: "retrying", Tools: []ToolUse{push}}, {Tools: []ToolUse{push}}}, dir)
	if r.ExitCode != 0 || r.TerminalReason != "completed" {
		t.Fatalf("run: exit %d, terminal_reason %q\nstderr: %s", r.ExitCode, r.TerminalReason, r.Stderr)
	}
	reqs := turns(a)
	if len(reqs) != 4 {
		t.Fatalf("%d requests for a message, want 4", len(reqs))
	}
	for i, want := range []string{reason, blocked} {
		read := reqs[i+1].ToolResults()
		if len(read) != 1 || !read[0].IsError || !strings.Contains(read[0].Content, want) {
			t.Fatalf("after hook answer %d the model read %+v; want an error result with %q", i+1, read, want)
		}
	}
	retried := reqs[3].ToolResults()
	if len(retried) != 1 || retried[0].IsError {
		t.Fatalf("after the retry the model read %+v; want the command's success", retried)
	}
	if _, err := os.Stat(filepath.Join(dir, "pushed")); err != nil {
		t.Fatalf("the retried call did not run: %v", err)
	}
	var events []string
	for _, c := range hook.Calls(t) {
		events = append(events, c.Event()+" "+c.Answer.Decision)
	}
	if want := []string{"PreToolUse deny", "PreToolUse exit2", "PreToolUse allow", "PostToolUse "}; !slices.Equal(events, want) {
		t.Fatalf("hook calls %q, want %q", events, want)
	}
}

// The agent and its tools run offline: a Bash call sees no network
// interface but lo, and a home of the harness's.
func TestAgentSeesNothingButLoopback(t *testing.T) {
	dir := t.TempDir()
	hook := &Hook{Rules: []HookRule{allowAll}}
	hook.Install(t, dir)
	a, r := Run(t, Script{{Tools: []ToolUse{Bash("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo HOME=$HOME")}}}, dir)
	if r.ExitCode != 0 {
		t.Fatalf("run: exit %d\nstderr: %s", r.ExitCode, r.Stderr)
	}
	reqs := turns(a)
	if len(reqs) != 2 || len(reqs[1].ToolResults()) != 1 {
		t.Fatalf("requests %+v: want the Bash call's result in the second", reqs)
	}
	out := reqs[1].ToolResults()[0].Content
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || lines[0] != "lo" || !strings.HasPrefix(lines[1], "HOME="+os.TempDir()) || lines[1] == "HOME="+os.Getenv("HOME") {
		t.Fatalf("the agent's Bash saw %q: want the interface lo alone and a temp HOME", out)
	}
}

// A PreToolUse defer ends a -p run with the call pending (terminal_reason
// tool_deferred, the tool not run); --resume asks the hook again, and an
// allow then runs it.
func TestHookDeferEndsRunAndResumeAsksAgain(t *testing.T) {
	dir := t.TempDir()
	hook := &Hook{Rules: []HookRule{{Event: "PreToolUse", Tool: "Bash", Answers: []Answer{{Decision: "defer"}, {Decision: "allow"}}}}}
	hook.Install(t, dir)
	a := New(t, Script{{Tools: []ToolUse{Bash("touch deployed")}}})
	r := a.Run(t, dir, "deploy")
	if r.TerminalReason != "tool_deferred" {
		t.Fatalf("run: exit %d, terminal_reason %q, want tool_deferred\nstdout: %s\nstderr: %s", r.ExitCode, r.TerminalReason, r.Stdout, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "deployed")); !os.IsNotExist(err) {
		t.Fatalf("the deferred call ran: %v", err)
	}
	if r.SessionID == "" {
		t.Fatalf("no session id to resume: %s", r.Stdout)
	}
	r2 := a.Resume(t, dir, r.SessionID)
	if r2.ExitCode != 0 || r2.TerminalReason != "completed" {
		t.Fatalf("resume: exit %d, terminal_reason %q\nstdout: %s\nstderr: %s", r2.ExitCode, r2.TerminalReason, r2.Stdout, r2.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "deployed")); err != nil {
		t.Fatalf("the resumed call did not run: %v", err)
	}
	calls := hook.Calls(t)
	var pre []HookCall
	for _, c := range calls {
		if c.Event() == "PreToolUse" {
			pre = append(pre, c)
		}
	}
	if len(pre) != 2 || pre[0].ToolUseID() != pre[1].ToolUseID() || pre[1].Answer.Decision != "allow" {
		t.Fatalf("PreToolUse calls %+v: want the same call asked twice, deferred then allowed", pre)
	}
	if pre[1].Payload["session_id"] != r.SessionID {
		t.Errorf("the resumed run's session is %v, want %q", pre[1].Payload["session_id"], r.SessionID)
	}
}

// A hook that does not answer within its timeout is cut off and the tool
// runs: Claude Code fails open, so a hook that holds a call must answer
// (deny) before its timeout.
func TestHookPastItsTimeoutLetsTheToolRun(t *testing.T) {
	dir := t.TempDir()
	const delay = time.Minute // far past the timeout, even on a loaded machine
	hook := &Hook{Timeout: 1, Rules: []HookRule{{Event: "PreToolUse", Tool: "Bash", Answers: []Answer{
		{Decision: "deny", Reason: "agenttest: too late", Delay: delay}}}}}
	hook.Install(t, dir)
	_, r := Run(t, Script{{Tools: []ToolUse{Bash("touch ran")}}}, dir, "--allowedTools", "Bash")
	if r.ExitCode != 0 {
		t.Fatalf("run: exit %d\nstderr: %s", r.ExitCode, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err != nil {
		t.Fatalf("the tool did not run after its hook's timeout: %v", err)
	}
	if r.Elapsed >= delay {
		t.Errorf("the run took %s: the hook was not cut off at its timeout", r.Elapsed)
	}
}

// turns are the agent's requests for a message.
func turns(a *Agent) []Request {
	var out []Request
	for _, q := range a.Requests() {
		if q.Path == "/v1/messages" {
			out = append(out, q)
		}
	}
	return out
}

// The sandbox refuses to start the agent in a namespace with more than
// loopback (here: the test's own), and says why.
func TestSandboxRefusesOutsideItsNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox brings lo up, as root")
	}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	if len(ifs) == 1 && ifs[0].Name == "lo" {
		t.Skip("this test's network namespace has nothing but loopback already")
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "agent-started")
	cfg := filepath.Join(dir, "sandbox.json")
	if err := writeJSON(cfg, sandboxConfig{Socket: filepath.Join(dir, "none.sock"), Argv: []string{"touch", marker}, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), sandboxEnv+"="+cfg)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
		t.Fatalf("the sandbox outside a namespace: %v, want exit 125\n%s", err, out)
	}
	if !strings.Contains(string(out), "refusing to start the agent: its network namespace has interfaces besides lo") {
		t.Errorf("the sandbox said %q", out)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the agent started: %v", err)
	}
}
