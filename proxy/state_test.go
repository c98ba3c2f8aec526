package proxy_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/policy"
	sm "github.com/undolog/undolog/statemachine"
)

// without is env less the variable name.
func without(env []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

// TestUndoActsOnTheSessionsMemoryState: the proxy of the real memory server
// records where the server kept its state (MEMORY_FILE_PATH, which undolog
// knows for that server without a policy saying so). An undo run where the
// variable is elsewhere or unset refuses before it starts the server (exit
// 2, one line naming the variable): the session, its entries and the
// graph's file stay as they were, and no other state is made. Where it
// agrees, the graph is back as it was.
func TestUndoActsOnTheSessionsMemoryState(t *testing.T) {
	h := newHarness(t)
	memory := filepath.Join(h.dir, "memory.jsonl")
	store := logaddr.File(h.logPath, logaddr.Options{})

	direct := h.direct()
	call(t, direct, "create_entities", map[string]any{"entities": []entity{{Name: "pre", EntityType: "thing", Observations: []string{"old"}}}})
	before := graph(t, direct)
	direct.Close()
	agent := h.proxied("agent-1")
	call(t, agent, "create_entities", map[string]any{"entities": []entity{{Name: "alice", EntityType: "person", Observations: []string{"likes tea"}}}})
	call(t, agent, "add_observations", map[string]any{"observations": []map[string]any{{"entityName": "pre", "contents": []string{"new"}}}})
	agent.Close()
	sess, err := store.VerifySession(t.Context(), "agent-1")
	if err != nil || sess.UpstreamEnv["MEMORY_FILE_PATH"] == nil || *sess.UpstreamEnv["MEMORY_FILE_PATH"] != memory {
		t.Fatalf("the session's state environment: %v %v", sess.UpstreamEnv, err)
	}
	during, err := os.ReadFile(memory)
	if err != nil {
		t.Fatal(err)
	}
	history := func() int {
		hist, err := store.SessionHistory(t.Context(), "agent-1")
		if err != nil {
			t.Fatal(err)
		}
		return len(hist)
	}
	records := history()

	undo := func(env []string, args ...string) (int, string) {
		cmd := exec.Command(testbin.Undolog(t), append([]string{"undo", "agent-1"}, args...)...)
		cmd.Env = append(without(h.env, "MEMORY_FILE_PATH"), env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	elsewhere := filepath.Join(h.dir, "elsewhere.jsonl")
	for name, env := range map[string][]string{"elsewhere": {"MEMORY_FILE_PATH=" + elsewhere}, "unset": nil} {
		plan, out := undo(env, "--dry-run")
		if plan != 0 || !strings.Contains(out, "WILL FAIL: undo refuses to start its MCP server on another state: MEMORY_FILE_PATH is") {
			t.Fatalf("plan with MEMORY_FILE_PATH %s: exit %d:\n%s", name, plan, out)
		}
		code, out := undo(env, "--yes")
		if code != 2 || !strings.Contains(out, "MEMORY_FILE_PATH is") || !strings.Contains(out, memory) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("undo with MEMORY_FILE_PATH %s: exit %d:\n%s", name, code, out)
		}
		if now, err := os.ReadFile(memory); err != nil || string(now) != string(during) {
			t.Fatalf("the graph's file changed under a refused undo (%v):\n%s", err, now)
		}
		if _, err := os.Stat(elsewhere); err == nil {
			t.Fatal("a refused undo started the server on another state")
		}
		if s, err := store.GetSession(t.Context(), "agent-1"); err != nil || s.State != sm.SessionActive || history() != records {
			t.Fatalf("the session after a refused undo: %v %v", s.State, err)
		}
		effects, _, _ := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: "agent-1", Undo: sm.EntryPending})
		if len(effects) != 2 {
			t.Fatalf("%d entries pending after a refused undo, want 2", len(effects))
		}
	}

	if code, out := undo([]string{"MEMORY_FILE_PATH=" + memory}, "--yes"); code != 0 || !strings.Contains(out, "2 undone") {
		t.Fatalf("undo with the session's MEMORY_FILE_PATH: exit %d:\n%s", code, out)
	}
	direct = h.direct()
	if after := graph(t, direct); after != before {
		t.Fatalf("the graph is not back to what it was:\nbefore %s\nafter  %s", before, after)
	}
}

// A policy names what locates its server's state (state_env); undolog
// knows it of the memory server by its executable or its npm package.
func TestStateEnvOfThePolicyAndOfKnownServers(t *testing.T) {
	p, err := policy.ParsePolicy([]byte("state_env: [DATA_DIR, CACHE]\ntools: {}\n"))
	if err != nil || !slices.Equal(p.StateEnv, []string{"DATA_DIR", "CACHE"}) {
		t.Fatalf("%+v %v", p, err)
	}
	for _, bad := range []string{`state_env: ["A=B"]`, `state_env: [""]`, `state_env: A`} {
		if _, err := policy.ParsePolicy([]byte(bad)); !errors.Is(err, policy.ErrPolicy) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
	for command, want := range map[string][]string{
		"/opt/node_modules/.bin/mcp-server-memory":                   {"MEMORY_FILE_PATH"},
		"npx -y @modelcontextprotocol/server-memory@2026.8.31":       {"MEMORY_FILE_PATH"},
		"npx -y @modelcontextprotocol/server-memory":                 {"MEMORY_FILE_PATH"},
		"npx -y @modelcontextprotocol/server-filesystem /srv/memory": nil,
		"my-server --data server-memory":                             nil,
	} {
		if got := policy.KnownStateEnv(strings.Fields(command)); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", command, got, want)
		}
	}
	// The memory server run by node from its package, or by a shell's
	// script: its state is located as well (undo acted on another graph
	// and said it was compensated).
	for _, command := range [][]string{
		{"node", "/opt/node_modules/@modelcontextprotocol/server-memory/dist/index.js"},
		{"sh", "-c", "exec /opt/node_modules/.bin/mcp-server-memory 2>/dev/null"},
		{"sh", "-c", "cd /srv && npx -y '@modelcontextprotocol/server-memory@2026.8.31'"},
		{"bash", "-c", "mcp-server-memory;"},
	} {
		if got := policy.KnownStateEnv(command); !slices.Equal(got, []string{"MEMORY_FILE_PATH"}) {
			t.Errorf("%q: %v, want [MEMORY_FILE_PATH]", command, got)
		}
	}
}

// What a session records of its server's state is what the policy's
// state_env and --state-env name, each with its value or as unset, and
// nothing else; a remote server's (--url) is not taken.
func TestProxyRecordsTheNamedStateEnv(t *testing.T) {
	h := newHarness(t)
	policy := filepath.Join(h.dir, "state.yaml")
	if err := os.WriteFile(policy, []byte("state_env: [UNDOLOG_TEST_POLICY_STATE]\ntools:\n  echo: {tier: compensable}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := h.connect([]string{testbin.Undolog(t), "proxy", "--session", "named", "--policy", policy, "--state-env", "UNDOLOG_TEST_FLAG_STATE", "--", os.Args[0]},
		"UNDOLOG_FAKE_SERVER=1", "UNDOLOG_TEST_POLICY_STATE=/srv/state")
	if res := call(t, agent, "echo", map[string]any{}); res.IsError {
		t.Fatalf("echo: %s", text(res))
	}
	agent.Close()
	sess, err := logaddr.File(h.logPath, logaddr.Options{}).VerifySession(t.Context(), "named")
	if err != nil {
		t.Fatal(err)
	}
	env := sess.UpstreamEnv
	if v, ok := env["UNDOLOG_TEST_FLAG_STATE"]; len(env) != 2 || env["UNDOLOG_TEST_POLICY_STATE"] == nil || *env["UNDOLOG_TEST_POLICY_STATE"] != "/srv/state" || !ok || v != nil {
		t.Fatalf("recorded %v", env)
	}

	cmd := exec.Command(testbin.Undolog(t), "proxy", "--url", "http://127.0.0.1:1/mcp", "--state-env", "DATA_DIR")
	cmd.Env = h.env
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "the server at --url keeps its state where it runs") {
		t.Fatalf("--state-env with --url: exit %d: %s", code, out)
	}
}

// TestUndoOfTheMemoryServerStartedOtherwise: the real memory server run by
// node from its package, and a session a second proxy joined with another
// MEMORY_FILE_PATH. Undo reported both compensated, having acted on
// another graph than the one the calls changed (or on one of two); now it
// refuses (exit 2, one line), and each graph's file is as it was.
func TestUndoOfTheMemoryServerStartedOtherwise(t *testing.T) {
	h := newHarness(t)
	script, err := filepath.EvalSymlinks(memoryServer(t)) // .../@modelcontextprotocol/server-memory/dist/index.js
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	at := func(name string) string { return "MEMORY_FILE_PATH=" + filepath.Join(h.dir, name) }
	proxied := func(session, state string) {
		argv := []string{testbin.Undolog(t), "proxy", "--session", session, "--policy", h.policy, "--", node, script}
		s := h.connect(argv, at(state))
		call(t, s, "create_entities", map[string]any{"entities": []entity{{Name: session + "-" + state, EntityType: "thing", Observations: []string{"x"}}}})
		s.Close()
	}
	proxied("by-node", "a.jsonl")
	proxied("joined", "b.jsonl")
	proxied("joined", "c.jsonl")
	files := map[string]string{}
	for _, name := range []string{"a.jsonl", "b.jsonl", "c.jsonl"} {
		data, err := os.ReadFile(filepath.Join(h.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(data)
	}
	for session, state := range map[string]string{"by-node": "elsewhere.jsonl", "joined": "c.jsonl"} {
		cmd := exec.Command(testbin.Undolog(t), "undo", session, "--yes")
		cmd.Env = append(without(h.env, "MEMORY_FILE_PATH"), at(state))
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "MEMORY_FILE_PATH") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Fatalf("undo %s with %s: exit %d:\n%s", session, state, code, out)
		}
	}
	for name, was := range files {
		if now, err := os.ReadFile(filepath.Join(h.dir, name)); err != nil || string(now) != was {
			t.Fatalf("%s changed under a refused undo (%v):\n%s\nwas\n%s", name, err, now, was)
		}
	}
}
