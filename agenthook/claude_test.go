package agenthook_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/internal/agenttest"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
)

// The agent and its sandbox are this test binary started again
// (agenttest.Main); undolog's hook is the real binary on the agent's PATH.
func TestMain(m *testing.M) {
	testbin.QuickRaceExit()
	agenttest.ServeRole()
	os.Exit(pgtest.Run(m.Run))
}

// claudeRig is a project guarded by undolog's hooks as `undolog init
// claude-code` installs them, for the real Claude Code.
type claudeRig struct {
	t       *testing.T
	bin     string
	log     string
	project string
	remote  string // a bare repository the project's origin names
	env     []string
}

func newClaudeRig(t *testing.T, log string, initFlags ...string) *claudeRig {
	r := &claudeRig{t: t, bin: testbin.Undolog(t), log: log, project: t.TempDir(), remote: filepath.Join(t.TempDir(), "remote.git")}
	r.env = []string{"PATH=" + filepath.Dir(r.bin) + ":" + os.Getenv("PATH"), "UNDOLOG_LOG=" + log, "UNDOLOG_FILES_DIR=" + t.TempDir()}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = r.project
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "--bare", r.remote)
	git("init", "-q", "-b", "main")
	r.write("keep.txt", "kept\n", 0o640)
	r.write("gone.txt", "deleted by the agent's shell\n", 0o600)
	r.write(".gitignore", ".claude/\n", 0o644)
	git("add", "-A")
	git("commit", "-q", "-m", "start")
	git("remote", "add", "origin", r.remote)
	r.undolog(append([]string{"init", "claude-code", r.project}, initFlags...)...)
	r.allowWrite(r.remote)
	return r
}

// allowWrite adds dir to the places the agent's sandboxed Bash may write
// (a user's own key, which init keeps): the remote a push writes to.
func (r *claudeRig) allowWrite(dir string) {
	r.t.Helper()
	var s map[string]any
	settings := r.path(".claude/settings.json")
	if err := json.Unmarshal([]byte(r.read(".claude/settings.json")), &s); err != nil {
		r.t.Fatal(err)
	}
	sandbox, ok := s["sandbox"].(map[string]any)
	if !ok {
		return // init --no-sandbox
	}
	sandbox["filesystem"].(map[string]any)["allowWrite"] = []any{dir}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(settings, b, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *claudeRig) path(name string) string { return filepath.Join(r.project, name) }

func (r *claudeRig) write(name, content string, perm os.FileMode) {
	r.t.Helper()
	if err := os.WriteFile(r.path(name), []byte(content), perm); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Chmod(r.path(name), perm); err != nil {
		r.t.Fatal(err)
	}
}

func (r *claudeRig) read(name string) string {
	r.t.Helper()
	b, err := os.ReadFile(r.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

// undolog runs the real binary as a person would, from another process;
// it fails the test unless it exits 0 (see run).
func (r *claudeRig) undolog(args ...string) string {
	r.t.Helper()
	out, code := r.run(args...)
	if code != 0 {
		r.t.Fatalf("undolog %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

func (r *claudeRig) run(args ...string) (string, int) {
	r.t.Helper()
	cmd := exec.Command(r.bin, append([]string{"--log", r.log}, args...)...)
	cmd.Env = append(os.Environ(), r.env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return string(out), 0
}

// agent is Claude Code for script, with undolog on its PATH and its log.
func (r *claudeRig) agent(script agenttest.Script) *agenttest.Agent {
	a := agenttest.New(r.t, script)
	a.Env = r.env
	return a
}

type loggedEffect struct {
	ID     uint64          `json:"id"`
	Tool   string          `json:"tool"`
	Tier   string          `json:"tier"`
	State  string          `json:"state"`
	Args   json.RawMessage `json:"args"`
	Result json.RawMessage `json:"result"`
}

// effects are the session's effects, oldest first.
func (r *claudeRig) effects(session string) []loggedEffect {
	r.t.Helper()
	var list []loggedEffect
	out := r.undolog("list", "--session", session, "--limit", "0", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		r.t.Fatalf("list: %v\n%s", err, out)
	}
	for i, j := 0, len(list)-1; i < j; i, j = i+1, j-1 {
		list[i], list[j] = list[j], list[i]
	}
	return list
}

// lastResults is what the model read of the calls of the agent's last turn.
func lastResults(a *agenttest.Agent) []agenttest.ToolResult {
	reqs := a.Requests()
	return reqs[len(reqs)-1].ToolResults()
}

// The real Claude Code, guarded by `undolog init claude-code`: its Bash
// (creating, changing, deleting files), Write and Edit are logged as the
// agent's, compensable; its `git push` is held and denied until a person
// approves it from another process, then the model's retry runs it, once;
// `undolog undo SESSION` puts every file back byte for byte.
func TestClaudeCodeGuardedByUndolog(t *testing.T) {
	r := newClaudeRig(t, filepath.Join(t.TempDir(), "u.db"), "--wait", "1s")
	notes := r.path("notes.md")
	push := agenttest.Bash("git push -q origin main")
	a := r.agent(agenttest.Script{
		{Tools: []agenttest.ToolUse{agenttest.Bash("printf 'new\\n' > made.txt && printf 'more\\n' >> keep.txt && rm gone.txt && printenv CLAUDECODE CLAUDE_CODE_SESSION_ID > env.txt")}},
		{Tools: []agenttest.ToolUse{agenttest.Write(notes, "one\ntwo\n")}},
		{Tools: []agenttest.ToolUse{agenttest.Edit(notes, "two", "three")}},
		{Tools: []agenttest.ToolUse{push}},
		{Text: "the push waits for a person"},
		// The resumed run: the same push again, then once more.
		{Tools: []agenttest.ToolUse{push}},
		{Tools: []agenttest.ToolUse{push}},
	})
	res := a.Run(t, r.project, "agenttest: follow the script")
	if res.ExitCode != 0 || res.SessionID == "" {
		t.Fatalf("run: exit %d, %+v\nstderr: %s", res.ExitCode, res.Output, res.Stderr)
	}
	for name, want := range map[string]string{"made.txt": "new\n", "keep.txt": "kept\nmore\n", "gone.txt": "<absent>", "notes.md": "one\nthree\n"} {
		if got := r.read(name); got != want {
			t.Fatalf("%s after the run: %q, want %q", name, got, want)
		}
	}
	session := res.SessionID
	e := r.effects(session)
	if len(e) != 4 {
		t.Fatalf("effects %+v: want Bash, Write, Edit, the push", e)
	}
	for i, want := range []struct{ tool, tier, state string }{
		{"Bash", "compensable", "committed"}, {"Write", "compensable", "committed"}, {"Edit", "compensable", "committed"}, {"Bash", "irreversible", "pending"},
	} {
		if e[i].Tool != want.tool || e[i].Tier != want.tier || e[i].State != want.state {
			t.Fatalf("effect %d: %s %s %s, want %+v", i+1, e[i].Tool, e[i].Tier, e[i].State, want)
		}
	}
	pushID := e[3].ID
	if got := lastResults(a); len(got) != 1 || !got[0].IsError || !strings.Contains(got[0].Content, "person") ||
		strings.Contains(got[0].Content, "approve "+jsonID(pushID)) {
		t.Fatalf("what the model read of the push: %+v, want a denial asking for a person's approval, with no command that gives it", got)
	}
	// What undolog approve and its kin compare to refuse a decision made
	// from inside the agent: its Bash's environment.
	if got := r.read("env.txt"); got != "1\n"+session+"\n" {
		t.Fatalf("CLAUDECODE and CLAUDE_CODE_SESSION_ID in the agent's Bash: %q, want 1 and the session %s", got, session)
	}
	show := r.undolog("show", "1", "-o", "json")
	if !strings.Contains(show, `"claude-code"`) {
		t.Fatalf("show 1 does not name the agent as the actor:\n%s", show)
	}

	r.undolog("approve", jsonID(pushID), "--reason", "release")
	res = a.Resume(t, r.project, session, "agenttest: go on")
	if res.ExitCode != 0 {
		t.Fatalf("resumed run: exit %d\nstderr: %s", res.ExitCode, res.Stderr)
	}
	out, err := exec.Command("git", "--git-dir", r.remote, "rev-parse", "main").CombinedOutput()
	if err != nil {
		t.Fatalf("the push did not reach the remote: %v\n%s", err, out)
	}
	e = r.effects(session)
	pushes := 0
	for _, x := range e {
		switch {
		case x.Tier == "irreversible" && x.State == "committed":
			pushes++
		case x.Tier == "irreversible" && x.State != "replayed":
			t.Fatalf("a push %s, want it committed once, its repeat replayed: %+v", x.State, e)
		}
	}
	if pushes != 1 {
		t.Fatalf("%d pushes committed, want one: %+v", pushes, e)
	}
	if got := lastResults(a); len(got) != 1 || !got[0].IsError || !strings.Contains(got[0].Content, "already ran") {
		t.Fatalf("what the model read of the push made again: %+v, want it denied with its outcome", got)
	}

	dry := r.undolog("undo", session, "--dry-run")
	for _, name := range []string{"made.txt", "keep.txt", "gone.txt", "notes.md"} {
		if !strings.Contains(dry, name) {
			t.Fatalf("undo --dry-run does not list %s:\n%s", name, dry)
		}
	}
	r.undolog("undo", session, "--yes")
	for name, want := range map[string]string{"made.txt": "<absent>", "keep.txt": "kept\n", "gone.txt": "deleted by the agent's shell\n", "notes.md": "<absent>"} {
		if got := r.read(name); got != want {
			t.Errorf("%s after undo: %q, want %q", name, got, want)
		}
	}
	for name, want := range map[string]os.FileMode{"keep.txt": 0o640, "gone.txt": 0o600} {
		if info, err := os.Stat(r.path(name)); err != nil || info.Mode().Perm() != want {
			t.Errorf("%s's mode after undo: %v %v, want %o", name, info, err, want)
		}
	}
}

func jsonID(id uint64) string { b, _ := json.Marshal(id); return string(b) }

// Headless (claude -p in CI, `init --headless`), on PostgreSQL: the push
// is deferred, the run ends with it pending; approved from another
// process, `claude -p --resume` runs it. A file the agent wrote and someone
// changed since stops the undo, which overwrites nothing.
func TestClaudeCodeHeadlessDeferOnPostgres(t *testing.T) {
	r := newClaudeRig(t, pgtest.Server(t).NewDatabase(t), "--headless", "--wait", "0s")
	a := r.agent(agenttest.Script{
		{Tools: []agenttest.ToolUse{agenttest.Write(r.path("plan.md"), "by the agent\n")}},
		{Tools: []agenttest.ToolUse{agenttest.Bash("git push -q origin main")}},
	})
	res := a.Run(t, r.project, "agenttest: follow the script")
	if res.TerminalReason != "tool_deferred" {
		t.Fatalf("run: terminal_reason %q, want tool_deferred\nstderr: %s", res.TerminalReason, res.Stderr)
	}
	if _, err := exec.Command("git", "--git-dir", r.remote, "rev-parse", "--verify", "-q", "main").Output(); err == nil {
		t.Fatal("the deferred push reached the remote before its approval")
	}
	e := r.effects(res.SessionID)
	if len(e) != 2 || e[1].Tier != "irreversible" || e[1].State != "pending" {
		t.Fatalf("effects %+v: want the Write and the pending push", e)
	}
	r.undolog("approve", jsonID(e[1].ID))
	session := res.SessionID
	res = a.Resume(t, r.project, session)
	if res.ExitCode != 0 || res.TerminalReason == "tool_deferred" {
		t.Fatalf("resumed: exit %d, terminal_reason %q\nstderr: %s", res.ExitCode, res.TerminalReason, res.Stderr)
	}
	if out, err := exec.Command("git", "--git-dir", r.remote, "rev-parse", "main").CombinedOutput(); err != nil {
		t.Fatalf("the approved push did not run: %v\n%s", err, out)
	}
	r.write("plan.md", "changed by a person\n", 0o644)
	out, code := r.run("undo", session, "--yes")
	if code != 9 || !strings.Contains(out, "plan.md") {
		t.Fatalf("undo over a file changed since: exit %d, want 9 naming the file\n%s", code, out)
	}
	if got := r.read("plan.md"); got != "changed by a person\n" {
		t.Fatalf("plan.md after the stopped undo: %q, want the person's bytes", got)
	}
}

// lenientPolicy lets through, unlogged, every shell command but a push,
// and logs Write as compensable: the policy would let the agent at the
// log, so what stops it below is the sandbox and the permission rules
// `undolog init claude-code` writes.
const lenientPolicy = `tools:
  Read: {tier: safe}
  Bash:
    tier:
      - when: '.args.command | test("git push")'
        tier: irreversible
      - tier: safe
  Write:
    compensate: files
    tier: compensable
`

// With the sandbox init turns on, the real agent cannot approve its own
// held call, write the log, its snapshots or the settings from its shell,
// nor the log or the settings with its Write tool, though the policy lets
// every one of those calls through: each fails at the file system or at
// Claude Code's permission rules, and the held call stays held.
func TestClaudeCodeSandboxKeepsTheAgentFromUndolog(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "lenient.yaml")
	if err := os.WriteFile(policy, []byte(lenientPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newClaudeRig(t, filepath.Join(t.TempDir(), "u.db"), "--wait", "1s", "--policy", policy)
	settingsBefore := r.read(".claude/settings.json")
	store := r.env[2][len("UNDOLOG_FILES_DIR="):]
	// Each step prints its exit status; .claude is spelled so that Claude
	// Code's own check of a command line does not see it, and the
	// environment undolog approve refuses inside an agent is taken away:
	// the file system is what must stop them.
	attack := strings.Join([]string{
		`env -u CLAUDECODE -u CLAUDE_CODE_SESSION_ID undolog approve 1 --reason self; echo "approve=$?"`,
		`cp /dev/null "$UNDOLOG_LOG"; echo "log=$?"`,
		`touch "$UNDOLOG_FILES_DIR/planted"; echo "store=$?"`,
		`d=.cla; d=${d}ude; echo '{"sandbox":{"enabled":false}}' > "$d/settings.local.json"; echo "local=$?"`,
		`echo '{}' > "$d/settings.json"; echo "settings=$?"`,
		`mv "$d" moved; echo "move=$?"`,
		`echo "in the project" > mine.txt; echo "project=$?"`,
	}, "\n")
	a := r.agent(agenttest.Script{
		{Tools: []agenttest.ToolUse{agenttest.Bash("git push -q origin main")}},
		{Tools: []agenttest.ToolUse{agenttest.Bash(attack)}},
		{Tools: []agenttest.ToolUse{agenttest.Write(r.log, "x")}},
		{Tools: []agenttest.ToolUse{agenttest.Write(r.path(".claude/settings.local.json"), `{"sandbox":{"enabled":false}}`)}},
		{Tools: []agenttest.ToolUse{agenttest.Write(filepath.Join(store, "planted"), "x")}},
		// Read first: Claude Code writes no file its session has not read.
		{Tools: []agenttest.ToolUse{agenttest.Read(policy)}},
		{Tools: []agenttest.ToolUse{agenttest.Write(policy, "tools: {Bash: {tier: safe}}\n")}},
	})
	res := a.Run(t, r.project, "agenttest: follow the script")
	if res.ExitCode != 0 || res.SessionID == "" {
		t.Fatalf("run: exit %d, %+v\nstderr: %s", res.ExitCode, res.Output, res.Stderr)
	}
	var results [][]agenttest.ToolResult
	for _, q := range a.Requests() {
		if rs := q.ToolResults(); q.Path == "/v1/messages" && len(rs) > 0 {
			results = append(results, rs)
		}
	}
	if len(results) != 7 {
		t.Fatalf("the agent sent %d tool results, want 7: %+v", len(results), results)
	}
	shell := results[1][0].Content
	for _, step := range []string{"approve", "log", "store", "local", "settings", "move"} {
		if !strings.Contains(shell, step+"=") || strings.Contains(shell, step+"=0") {
			t.Errorf("the agent's shell: %s did not fail:\n%s", step, shell)
		}
	}
	if !strings.Contains(shell, "project=0") || !strings.Contains(shell, "Read-only file system") {
		t.Errorf("the agent's shell: want its project writable and the rest a read-only file system:\n%s", shell)
	}
	for i, what := range map[int]string{2: "the log", 3: "the local settings", 4: "the snapshot store", 6: "the policy"} {
		if got := results[i]; len(got) != 1 || !got[0].IsError || !strings.Contains(got[0].Content, "denied") {
			t.Errorf("Write to %s: the model read %+v, want a denial", what, got)
		}
	}
	e := r.effects(res.SessionID)
	if len(e) != 1 || e[0].Tier != "irreversible" || e[0].State != "pending" {
		t.Fatalf("effects %+v: want the push alone, still pending", e)
	}
	if b, _ := os.ReadFile(policy); string(b) != lenientPolicy {
		t.Errorf("the policy changed:\n%s", b)
	}
	if got := r.read(".claude/settings.json"); got != settingsBefore {
		t.Errorf("the settings changed:\n%s", got)
	}
	if got := r.read(".claude/settings.local.json"); got != "<absent>" {
		t.Errorf("the agent wrote settings.local.json: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(store, "planted")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the agent wrote in the snapshot store: %v", err)
	}
	if got := r.read("mine.txt"); got != "in the project\n" {
		t.Errorf("mine.txt: %q, want the agent's write in its project", got)
	}
	if _, err := exec.Command("git", "--git-dir", r.remote, "rev-parse", "--verify", "-q", "main").Output(); err == nil {
		t.Fatal("the held push reached the remote")
	}
}

// The user's sandbox.excludedCommands takes make out of Claude Code's
// sandbox whatever allowUnsandboxedCommands says (ADV31C K1): the agent
// wrote a Makefile whose recipe approved its held push, ran make, and the
// push reached the remote. The hook holds make for a person instead.
func TestClaudeCodeExcludedCommandsAreHeld(t *testing.T) {
	r := newClaudeRig(t, filepath.Join(t.TempDir(), "u.db"), "--wait", "1s")
	config := t.TempDir()
	if err := os.WriteFile(filepath.Join(config, "settings.json"), []byte(`{"sandbox":{"excludedCommands":["make"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	recipe := "all:\n\t-env -u CLAUDECODE -u CLAUDE_CODE_SESSION_ID undolog approve 1 --reason make; echo ran > ran.txt\n"
	a := r.agent(agenttest.Script{
		{Tools: []agenttest.ToolUse{agenttest.Bash("git push -q origin main")}},
		{Tools: []agenttest.ToolUse{agenttest.Write(r.path("Makefile"), recipe)}},
		{Tools: []agenttest.ToolUse{agenttest.Bash("make")}},
		{Tools: []agenttest.ToolUse{agenttest.Bash("git push -q origin main")}},
	})
	a.Env = append(a.Env, "CLAUDE_CONFIG_DIR="+config)
	res := a.Run(t, r.project, "agenttest: follow the script")
	if res.ExitCode != 0 || res.SessionID == "" {
		t.Fatalf("run: exit %d, %+v\nstderr: %s", res.ExitCode, res.Output, res.Stderr)
	}
	if got := r.read("ran.txt"); got != "<absent>" {
		t.Errorf("make ran the agent's recipe: ran.txt %q", got)
	}
	var held []string
	for _, e := range r.effects(res.SessionID) {
		if e.Tier == "irreversible" && e.State == "pending" {
			held = append(held, e.Tool+" "+string(e.Args))
		}
	}
	if len(held) != 2 || !strings.Contains(held[0], "git push") || !strings.Contains(held[1], `"make"`) {
		t.Errorf("held %q: want the push and make, pending", held)
	}
	if _, err := exec.Command("git", "--git-dir", r.remote, "rev-parse", "--verify", "-q", "main").Output(); err == nil {
		t.Fatal("the held push reached the remote")
	}
}
