package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/policy"
	sm "github.com/undolog/undolog/statemachine"
)

// TestMain lets the test binary act as a small fake MCP server (for the
// failure tests) when UNDOLOG_FAKE_SERVER is set.
func TestMain(m *testing.M) {
	testbin.QuickRaceExit()
	if os.Getenv("UNDOLOG_FAKE_SERVER") != "" {
		fakeServer()
		return
	}
	pgtest.Main(m) // the rounds tests run on PostgreSQL as well
}

// fakeServer answers initialize, tools/list and tools/call; the tool "die"
// exits mid-call, "garble" writes a malformed line before its answer, and
// "flaky" fails while the file $UNDOLOG_FAKE_FAIL exists. Those of
// wire_test.go: "hold" answers once the file $UNDOLOG_FAKE_GO exists, "hang"
// never, "dieonce" exits while the file $UNDOLOG_FAKE_DIE exists (removing
// it), "task" answers a task-augmented call with a task handle and a plain
// one with its outcome, "taskonly" always with a handle, "odd" with the
// answer its argument "answer" spells (ID: the call's id). It writes its pid
// to $UNDOLOG_FAKE_PIDFILE. With $UNDOLOG_FAKE_LINGER set it stays 30 s
// after its input ends, as a server finishing its calls does.
func fakeServer() {
	if os.Getenv("UNDOLOG_FAKE_LINGER") != "" {
		defer time.Sleep(30 * time.Second)
	}
	if f := os.Getenv("UNDOLOG_FAKE_PIDFILE"); f != "" {
		os.WriteFile(f, []byte(fmt.Sprint(os.Getpid())), 0o644)
	}
	sc := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	reply := func(id json.RawMessage, result string) {
		outMu.Lock()
		defer outMu.Unlock()
		if os.Getenv("UNDOLOG_FAKE_RESPELL") != "" {
			// As a server in JavaScript does: the id read, then written
			// its own way ("\u0061" as "a", 1.0 as 1).
			var v any
			json.Unmarshal(id, &v)
			id, _ = json.Marshal(v)
		}
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id, result)
		out.Flush()
	}
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				Task      json.RawMessage `json:"task"`
				Arguments struct {
					Answer string `json:"answer"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || len(m.ID) == 0 || m.Method == "" {
			continue // notifications and our parse errors
		}
		switch m.Method {
		case "initialize":
			reply(m.ID, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`)
		case "tools/list":
			tools := `{"name":"echo","inputSchema":{"type":"object"}},{"name":"die","inputSchema":{"type":"object"}},{"name":"garble","inputSchema":{"type":"object"}}`
			for _, name := range []string{"flaky", "hold", "hang", "dieonce", "task", "taskonly", "same", "send", "odd"} {
				tools += `,{"name":"` + name + `","inputSchema":{"type":"object"}}`
			}
			if name := os.Getenv("UNDOLOG_FAKE_TOOL"); name != "" {
				quoted, _ := json.Marshal(name)
				tools += `,{"name":` + string(quoted) + `,"inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`
			}
			reply(m.ID, `{"tools":[`+tools+`]}`)
		case "tools/call":
			switch m.Params.Name {
			case "die":
				os.Exit(3)
			case "garble":
				outMu.Lock()
				fmt.Fprintln(out, "this is not JSON-RPC")
				out.Flush()
				outMu.Unlock()
			case "flaky":
				if _, err := os.Stat(os.Getenv("UNDOLOG_FAKE_FAIL")); err == nil {
					reply(m.ID, `{"content":[{"type":"text","text":"flaked"}],"isError":true}`)
					continue
				}
			case "hold":
				go func(id json.RawMessage) {
					for {
						if _, err := os.Stat(os.Getenv("UNDOLOG_FAKE_GO")); err == nil {
							reply(id, `{"content":[{"type":"text","text":"held, then done"}]}`)
							return
						}
						time.Sleep(10 * time.Millisecond)
					}
				}(m.ID)
				continue
			case "hang":
				continue
			case "odd": // the answer its argument spells, ID its id
				outMu.Lock()
				fmt.Fprintln(out, strings.ReplaceAll(m.Params.Arguments.Answer, "ID", string(m.ID)))
				out.Flush()
				outMu.Unlock()
				continue
			case "dieonce":
				if os.Remove(os.Getenv("UNDOLOG_FAKE_DIE")) == nil {
					os.Exit(3)
				}
			case "task", "taskonly":
				if len(m.Params.Task) > 0 || m.Params.Name == "taskonly" {
					reply(m.ID, `{"task":{"taskId":"t-1","status":"working","createdAt":"2026-12-01T00:00:00Z","lastUpdatedAt":"2026-12-01T00:00:00Z","ttl":60000}}`)
					continue
				}
				reply(m.ID, `{"content":[{"type":"text","text":"ran as a plain call"}]}`)
				continue
			}
			reply(m.ID, `{"content":[{"type":"text","text":"ok"}]}`)
		default:
			outMu.Lock()
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`+"\n", m.ID)
			out.Flush()
			outMu.Unlock()
		}
	}
}

// memoryServer is the real @modelcontextprotocol/server-memory, installed by
// .ci/run (UNDOLOG_MCP_MEMORY names its executable).
func memoryServer(t testing.TB) string {
	path := os.Getenv("UNDOLOG_MCP_MEMORY")
	if path == "" {
		if os.Getenv("UNDOLOG_REQUIRE_MCP") != "" {
			t.Fatal("UNDOLOG_MCP_MEMORY is not set but UNDOLOG_REQUIRE_MCP is")
		}
		t.Skip("UNDOLOG_MCP_MEMORY not set: the real MCP server is not installed")
	}
	return path
}

type harness struct {
	t       testing.TB
	dir     string
	logPath string
	env     []string
	policy  string
}

func newHarness(t testing.TB) *harness {
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, logPath: filepath.Join(dir, "undolog.db")}
	h.env = append(os.Environ(), "UNDOLOG_LOG="+h.logPath, "MEMORY_FILE_PATH="+filepath.Join(dir, "memory.jsonl"), "UNDOLOG_ACTOR=tester")
	policy, err := filepath.Abs("../examples/memory-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h.policy = policy
	return h
}

func (h *harness) connect(argv []string, env ...string) *mcp.ClientSession {
	h.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append([]string{}, h.env...), env...)
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { s.Close() })
	return s
}

func (h *harness) direct() *mcp.ClientSession { return h.connect([]string{memoryServer(h.t)}) }

func (h *harness) proxied(session string, extra ...string) *mcp.ClientSession {
	argv := append([]string{testbin.Undolog(h.t), "proxy", "--session", session, "--policy", h.policy}, extra...)
	return h.connect(append(append(argv, "--"), memoryServer(h.t)))
}

func (h *harness) cli(args ...string) string {
	h.t.Helper()
	cmd := exec.Command(testbin.Undolog(h.t), args...)
	cmd.Env = h.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		h.t.Fatalf("undolog %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func call(t testing.TB, s *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func graph(t testing.TB, s *mcp.ClientSession) string {
	r := call(t, s, "read_graph", map[string]any{})
	b, _ := json.Marshal(r.StructuredContent)
	return string(b)
}

type entity struct {
	Name         string   `json:"name"`
	EntityType   string   `json:"entityType"`
	Observations []string `json:"observations"`
}

func TestProxyInFrontOfMemoryServer(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})

	// The graph before the session: one entity made without undolog.
	direct := h.direct()
	call(t, direct, "create_entities", map[string]any{"entities": []entity{{Name: "pre", EntityType: "thing", Observations: []string{"old"}}}})
	before := graph(t, direct)
	directTools, err := direct.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	direct.Close()

	agent := h.proxied("agent-1")
	proxiedTools, err := agent.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(directTools, proxiedTools) {
		t.Fatalf("tools/list changed through the proxy")
	}

	alice := map[string]any{"entities": []entity{{Name: "alice", EntityType: "person", Observations: []string{"likes tea"}}}}
	first := call(t, agent, "create_entities", alice)
	again := call(t, agent, "create_entities", alice)
	// The client got the first answer: the repeat is the call made again,
	// and runs (the server creates nothing new). A retry is answered from
	// the log (replay_test.go).
	if first.IsError || again.IsError || !strings.Contains(text(first), "alice") || strings.Contains(text(again), "alice") {
		t.Fatalf("the repeat did not run again:\n%s\n%s", text(first), text(again))
	}
	call(t, agent, "add_observations", map[string]any{"observations": []map[string]any{{"entityName": "pre", "contents": []string{"old", "new"}}}})
	call(t, agent, "create_relations", map[string]any{"relations": []map[string]string{{"from": "alice", "to": "pre", "relationType": "knows"}}})
	if g := graph(t, agent); !strings.Contains(g, `"alice"`) || !strings.Contains(g, `"new"`) || !strings.Contains(g, `"knows"`) {
		t.Fatalf("graph after the calls: %s", g)
	}

	effects, _, _ := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: "agent-1", Ascending: true})
	var states []string
	for _, e := range effects {
		states = append(states, e.Tool+":"+string(e.State))
	}
	want := []string{"create_entities:committed", "create_entities:committed", "add_observations:committed", "create_relations:committed"}
	if !reflect.DeepEqual(states, want) {
		t.Fatalf("logged %v, want %v (safe read_graph is never logged)", states, want)
	}
	if effects[0].ReplayCount != 0 || effects[0].Compensation.Kind != model.CompensationMCP || effects[0].Compensation.Tool != "delete_entities" {
		t.Fatalf("%+v", effects[0])
	}
	if effects[0].CreatedAt.IsZero() || !strings.HasPrefix(h.cli("show", "1", "-o", "json"), "{") {
		t.Fatal("show")
	}
	sess, _ := store.GetSession(t.Context(), "agent-1")
	if len(sess.Upstream) != 1 || sess.Upstream[0] != memoryServer(t) {
		t.Fatalf("upstream not recorded: %v", sess.Upstream)
	}
	agent.Close()

	// Undo starts the recorded server and runs the compensations LIFO.
	plan := h.cli("undo", "agent-1", "--dry-run")
	if !strings.Contains(plan, `mcp delete_relations {"relations":[{"from":"alice","relationType":"knows","to":"pre"}]}`) ||
		!strings.Contains(plan, `mcp delete_observations {"deletions":[{"entityName":"pre","observations":["new"]}]}`) ||
		!strings.Contains(plan, `mcp delete_entities {"entityNames":["alice"]}`) {
		t.Fatalf("plan:\n%s", plan)
	}
	out := h.cli("undo", "agent-1", "--yes")
	if !strings.Contains(out, "4 undone") {
		t.Fatalf("undo: %s", out)
	}
	direct = h.direct()
	if after := graph(t, direct); after != before {
		t.Fatalf("the graph is not back to what it was:\nbefore %s\nafter  %s", before, after)
	}
	if rep, _ := store.Verify(t.Context()); len(rep.Problems) != 0 {
		t.Fatal(rep.Problems)
	}
}

func TestProxyIrreversibleCallsWaitForAPerson(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	direct := h.direct()
	call(t, direct, "create_entities", map[string]any{"entities": []entity{{Name: "a", EntityType: "t", Observations: []string{}}, {Name: "b", EntityType: "t", Observations: []string{}}}})
	direct.Close()

	agent := h.proxied("agent-2", "--approval-wait", "300ms")
	// No decision within the wait: a tool error that names the effect and asks for a retry.
	held := call(t, agent, "delete_entities", map[string]any{"entityNames": []string{"a"}})
	if !held.IsError || !strings.Contains(text(held), "undolog --log "+h.logPath+" approve 1") || !strings.Contains(text(held), "call delete_entities again") {
		t.Fatalf("held call: %s", text(held))
	}
	if g := graph(t, agent); !strings.Contains(g, `"a"`) {
		t.Fatal("the irreversible call ran without approval")
	}
	// Approved from another process: the retry of the same call goes ahead.
	h.cli("approve", "1", "--as", "alice")
	done := call(t, agent, "delete_entities", map[string]any{"entityNames": []string{"a"}})
	if done.IsError {
		t.Fatalf("approved retry: %s", text(done))
	}
	if g := graph(t, agent); strings.Contains(g, `"name":"a"`) {
		t.Fatalf("not deleted: %s", g)
	}
	d, _ := store.GetEffect(t.Context(), 1)
	if d.Effect.State != sm.Committed || d.Approval.DecidedBy != "alice" {
		t.Fatalf("%+v %+v", d.Effect, d.Approval)
	}

	// A call waiting when the decision comes goes ahead at once; a rejected one never runs.
	var wg sync.WaitGroup
	var rejected *mcp.CallToolResult
	agent3 := h.proxied("agent-3", "--approval-wait", "20s")
	wg.Add(1)
	go func() {
		defer wg.Done()
		rejected = call(t, agent3, "delete_entities", map[string]any{"entityNames": []string{"b"}})
	}()
	waitFor(t, "the approval request", func() bool { list, _, _ := store.PendingApprovals(t.Context(), "agent-3", 0); return len(list) == 1 })
	h.cli("reject", "2", "--as", "bob", "--reason", "b is still needed")
	wg.Wait()
	if !rejected.IsError || !strings.Contains(text(rejected), "rejected by bob (b is still needed)") {
		t.Fatalf("rejected call: %s", text(rejected))
	}
	if g := graph(t, agent3); !strings.Contains(g, `"b"`) {
		t.Fatal("a rejected call ran")
	}
	if s, _ := store.GetSession(t.Context(), "agent-3"); s.State != sm.SessionHalted {
		t.Fatalf("session %s", s.State)
	}
	// The agent cannot approve anything: whatever it sends, the call stays rejected.
	again := call(t, agent3, "delete_entities", map[string]any{"entityNames": []string{"b"}})
	if !again.IsError || !strings.Contains(text(again), "rejected") {
		t.Fatalf("repeat of a rejected call: %s", text(again))
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// rawProxy runs the proxy in front of the fake server with raw pipes, so a
// test can send what no SDK would.
func rawProxy(t *testing.T, h *harness) (io.WriteCloser, *bufio.Scanner, *exec.Cmd) {
	return rawProxyWith(t, h, "tools:\n  die: {tier: compensable}\n  garble: {tier: compensable}\n  echo: {tier: compensable}\n")
}

func rawProxyWith(t *testing.T, h *harness, policyYAML string, flags ...string) (io.WriteCloser, *bufio.Scanner, *exec.Cmd) {
	policy := filepath.Join(h.dir, "fake.yaml")
	os.WriteFile(policy, []byte(policyYAML), 0o644)
	args := append([]string{"proxy", "--session", "fake-1", "--policy", policy}, flags...)
	cmd := exec.Command(testbin.Undolog(t), append(args, "--", os.Args[0])...)
	cmd.Env = append(h.env, "UNDOLOG_FAKE_SERVER=1")
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	return in, bufio.NewScanner(outPipe), cmd
}

func next(t *testing.T, sc *bufio.Scanner) map[string]any {
	t.Helper()
	if !sc.Scan() {
		t.Fatalf("the proxy closed its output: %v", sc.Err())
	}
	var m map[string]any
	if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
		t.Fatalf("the proxy wrote a malformed line %q", sc.Text())
	}
	return m
}

func TestProxyMalformedInputAndDyingServer(t *testing.T) {
	h := newHarness(t)
	in, out, cmd := rawProxy(t, h)
	send := func(s string) { io.WriteString(in, s+"\n") }

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := next(t, out); m["id"] != 1.0 || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`this is not json`)
	if m := next(t, out); m["error"].(map[string]any)["code"] != -32700.0 {
		t.Fatalf("garbage: %v", m)
	}
	send(`{"jsonrpc":"1.0","id":2,"method":"ping"}`)
	if m := next(t, out); m["id"] != 2.0 || m["error"].(map[string]any)["code"] != -32600.0 {
		t.Fatalf("bad version: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"garble","arguments":{}}}`)
	if m := next(t, out); m["id"] != 3.0 || m["result"] == nil {
		t.Fatalf("a malformed line from the server broke the call: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"die","arguments":{}}}`)
	m := next(t, out)
	msg, _ := m["error"].(map[string]any)["message"].(string)
	if m["id"] != 4.0 || !strings.Contains(msg, "exited during die") || !strings.Contains(msg, "effect 2 stays executing") {
		t.Fatalf("dying server: %v", m)
	}
	store := logaddr.File(h.logPath, logaddr.Options{})
	d, err := store.GetEffect(t.Context(), 2)
	if err != nil || d.Effect.State != sm.Executing || d.Effect.Tool != "die" {
		t.Fatalf("%+v %v", d.Effect, err)
	}
	// The proxy exits with its server (the client keeps its input open),
	// so that a client that restarts dead servers does.
	if out.Scan() {
		t.Fatalf("the proxy wrote %s after its server died", out.Text())
	}
	if err := cmd.Wait(); exitCode(err) != 11 {
		t.Fatalf("the proxy ended with %v, want exit code 11", err)
	}
}

// TestProxyRepeatOfACallInDoubt: a call left executing when its server died
// is in doubt once its proxy has gone, which it does with its server: the
// same call through a new proxy never runs it again, and names the command
// with which a person who checked reclaims it; then it runs.
func TestProxyRepeatOfACallInDoubt(t *testing.T) {
	h := newHarness(t)
	dieFile := filepath.Join(h.dir, "die")
	os.WriteFile(dieFile, nil, 0o644)
	h.env = append(h.env, "UNDOLOG_FAKE_DIE="+dieFile)
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	const policy = "tools:\n  dieonce: {tier: compensable}\n"
	in, out, cmd := rawProxyWith(t, h, policy)
	send := func(s string) { io.WriteString(in, s+"\n") }
	send(initialize)
	next(t, out)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"dieonce","arguments":{}}}`)
	if m := next(t, out); m["error"] == nil {
		t.Fatalf("dying server: %v", m)
	}
	if err := cmd.Wait(); exitCode(err) != 11 {
		t.Fatalf("the proxy ended with %v, want exit code 11", err)
	}

	in, out, _ = rawProxyWith(t, h, policy)
	send = func(s string) { io.WriteString(in, s+"\n") }
	send(initialize)
	next(t, out)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"dieonce","arguments":{}}}`)
	m := next(t, out)
	text := toolText(m)
	want := "undolog --log " + h.logPath + " resolve 1 --reason \"what you found\""
	if m["id"] != 2.0 || !strings.Contains(text, "effect 1 is in doubt: its owner (pid ") ||
		!strings.Contains(text, ") died mid-run; it may or may not have taken effect") || !strings.Contains(text, "`"+want+"`") {
		t.Fatalf("repeat once its owner died: %v", m)
	}
	store := logaddr.File(h.logPath, logaddr.Options{})
	if d, err := store.GetEffect(t.Context(), 1); err != nil || d.Effect.State != sm.Executing || len(d.History) != 2 {
		t.Fatalf("the call in doubt was touched: %+v %v", d, err)
	}

	// A person checks, runs the command the error names, and the same call runs.
	h.cli("resolve", "1", "--reason", "checked: nothing was made")
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"dieonce","arguments":{}}}`)
	if m := next(t, out); m["id"] != 3.0 || m["result"] == nil || toolText(m) != "" {
		t.Fatalf("the call once resolved: %v", m)
	}
	d, err := store.GetEffect(t.Context(), 1)
	if err != nil || d.Effect.State != sm.Committed || d.History[2].Reason != "checked: nothing was made" || d.History[2].Actor != "tester" {
		t.Fatalf("effect 1: %+v %v", d, err)
	}
}

// An answer from the server that says neither success nor failure (not
// JSON-RPC 2.0, an error of no code or message, a result that is no tool
// result, one read two ways) is passed on, and its call left in doubt: neither committed nor
// failed, its lease stopped, a repeat of it in doubt.
func TestProxyAnswerThatSaysNeitherIsInDoubt(t *testing.T) {
	h := newHarness(t)
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	const policy = "tools:\n  odd: {tier: compensable}\n"
	in, out, cmd := rawProxyWith(t, h, policy)
	send := func(s string) { io.WriteString(in, s+"\n") }
	send(initialize)
	next(t, out)
	store := logaddr.File(h.logPath, logaddr.Options{})
	id := 1
	var first []byte
	for _, answer := range []string{
		`{"jsonrpc":"2.0","id":ID,"result":null}`,
		`{"jsonrpc":"2.0","id":ID,"result":[1]}`,
		`{"jsonrpc":"2.0","id":ID,"result":{}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":"yes"}}`,
		`{"id":ID,"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":ID,"error":{}}`,
		// Read two ways (a reader that folds case reads a success; the
		// client need not).
		`{"jsonrpc":"2.0","id":ID,"Result":{"content":[]}}`,
	} {
		id++
		args, _ := json.Marshal(map[string]string{"answer": answer})
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"odd","arguments":%s}}`, id, args))
		if m := next(t, out); m["id"] != float64(id) {
			t.Fatalf("%s: the client got %v", answer, m)
		}
		effect := uint64(id - 1)
		d, err := store.GetEffect(t.Context(), effect)
		if err != nil || d.Effect.State != sm.Executing || len(d.History) != 2 {
			t.Fatalf("%s: effect %d is %s after %d records (%v), want executing, as started: in doubt", answer, effect, d.Effect.State, len(d.History), err)
		}
		if first == nil {
			first = args
		}
	}
	in.Close()
	cmd.Wait()
	// The proxy gone, the same call through another is in doubt.
	in, out, _ = rawProxyWith(t, h, policy)
	send = func(s string) { io.WriteString(in, s+"\n") }
	send(initialize)
	next(t, out)
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"odd","arguments":%s}}`, first))
	if m := next(t, out); !strings.Contains(toolText(m), "effect 1 is in doubt") {
		t.Fatalf("a repeat of the first call: %v", m)
	}
}

// exitCode is the exit code of a process that ended with err (-1: no code).
func exitCode(err error) int {
	var ee *exec.ExitError
	if err == nil {
		return 0
	} else if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// toolText is the text of a tool error result.
func toolText(m map[string]any) string {
	r, _ := m["result"].(map[string]any)
	if r == nil || r["isError"] != true {
		return ""
	}
	c, _ := r["content"].([]any)
	if len(c) == 0 {
		return ""
	}
	s, _ := c[0].(map[string]any)["text"].(string)
	return s
}

// TestProxyClientCancelsAWaitingCall: a client that cancels a call waiting
// for approval gets no answer for it and the proxy stops waiting (it exits at
// once when the client leaves), while the approval request stands: approved
// later, the same call goes ahead.
func TestProxyClientCancelsAWaitingCall(t *testing.T) {
	h := newHarness(t)
	const policy = "tools:\n  echo: {tier: irreversible}\n"
	in, out, cmd := rawProxyWith(t, h, policy, "--approval-wait", "40s")
	send := func(s string) { io.WriteString(in, s+"\n") }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := next(t, out); m["id"] != 1.0 {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`)
	store := logaddr.File(h.logPath, logaddr.Options{})
	waitFor(t, "the call to wait for approval", func() bool { list, _, _ := store.PendingApprovals(t.Context(), "fake-1", 0); return len(list) == 1 })
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user stopped it"}}`)
	send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	if m := next(t, out); m["id"] != 8.0 {
		t.Fatalf("after the cancellation the proxy answered %v, want the ping's answer", m)
	}

	// Nothing waits any more: the proxy ends as soon as the client leaves,
	// and writes nothing for the cancelled call.
	in.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the proxy still waits on the cancelled call")
	}
	for out.Scan() {
		t.Errorf("the proxy wrote %s after the cancellation", out.Text())
	}

	// The request stands: approved in a shell, the same call goes ahead.
	if d, err := store.GetEffect(t.Context(), 1); err != nil || d.Effect.State != sm.Pending || d.Approval == nil || d.Approval.Outcome != model.ApprovalPending {
		t.Fatalf("effect 1 after the cancellation: %+v %v", d, err)
	}
	h.cli("approve", "1", "--as", "alice")
	in, out, _ = rawProxyWith(t, h, policy)
	send = func(s string) { io.WriteString(in, s+"\n") }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	next(t, out)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`)
	if m := next(t, out); m["id"] != 2.0 || m["result"] == nil {
		t.Fatalf("the approved call: %v", m)
	}
	if d, err := store.GetEffect(t.Context(), 1); err != nil || d.Effect.State != sm.Committed {
		t.Fatalf("effect 1: %+v %v", d.Effect, err)
	}
}

// TestProxyFailedIrreversibleCallAsksAgain: an approval is for one execution.
// An approved call that failed waits for a new decision when it is retried.
func TestProxyFailedIrreversibleCallAsksAgain(t *testing.T) {
	h := newHarness(t)
	failFile := filepath.Join(h.dir, "fail")
	os.WriteFile(failFile, nil, 0o644)
	h.env = append(h.env, "UNDOLOG_FAKE_FAIL="+failFile)
	in, out, _ := rawProxyWith(t, h, "tools:\n  flaky: {tier: irreversible}\n", "--approval-wait", "20s")
	send := func(s string) { io.WriteString(in, s+"\n") }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	next(t, out)
	store := logaddr.File(h.logPath, logaddr.Options{})
	waiting := func() bool { list, _, _ := store.PendingApprovals(t.Context(), "fake-1", 0); return len(list) == 1 }

	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"flaky","arguments":{}}}`)
	waitFor(t, "the first approval request", waiting)
	h.cli("approve", "1", "--as", "alice")
	if m := next(t, out); m["id"] != 2.0 || m["result"].(map[string]any)["isError"] != true {
		t.Fatalf("the failing call: %v", m)
	}
	os.Remove(failFile)

	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"flaky","arguments":{}}}`)
	waitFor(t, "a new approval request", waiting)
	time.Sleep(200 * time.Millisecond)
	if d, _ := store.GetEffect(t.Context(), 1); d.Effect.State != sm.Pending || d.Approval.Outcome != model.ApprovalPending {
		t.Fatalf("the retry did not wait for a decision: %+v %+v", d.Effect, d.Approval)
	}
	h.cli("approve", "1", "--as", "bob")
	if m := next(t, out); m["id"] != 3.0 || m["result"].(map[string]any)["isError"] == true {
		t.Fatalf("the approved retry: %v", m)
	}
	d, _ := store.GetEffect(t.Context(), 1)
	if d.Effect.State != sm.Committed || d.Approval.DecidedBy != "bob" || len(d.Approval.Earlier) != 1 || d.Approval.Earlier[0].DecidedBy != "alice" {
		t.Fatalf("%+v %+v", d.Effect, d.Approval)
	}
}

func TestPolicyInitFromTheServer(t *testing.T) {
	h := newHarness(t)
	out := h.cli("policy", "init", "--", memoryServer(t))
	for _, want := range []string{"read_graph:\n    tier: safe", "delete_entities:\n    tier: irreversible    # make it compensable (destructiveHint): tier: compensable, and\n    # compensate:",
		"create_entities:\n    tier: irreversible    # make it compensable: tier: compensable, and", "see docs/policy.md", "docs/policy.md is the reference"} {
		if !strings.Contains(out, want) {
			t.Fatalf("policy init lacks %q:\n%s", want, out)
		}
	}
	file := filepath.Join(h.dir, "init.yaml")
	os.WriteFile(file, []byte(out), 0o644)
	if check := h.cli("policy", "check", file); !strings.Contains(check, "ok: 9 rules") {
		t.Fatalf("check: %s", check)
	}
}

// A server's tool names are its own: one that would be YAML (a colon, a
// newline, a comment) stays one quoted key of the policy, and one that
// would be a glob (*) matches itself only: the read-only tool "evil*" makes
// no other evil... tool safe.
func TestPolicyInitQuotesToolNames(t *testing.T) {
	h := newHarness(t)
	const hostile = "evil*:\n    tier: safe\n  x # [y]?\\ \x1b]0;OWNED\x07\u009b2J\u202e\u200b\x7f\u0085 done"
	cmd := exec.Command(testbin.Undolog(t), "policy", "init", "--file", filepath.Join(h.dir, "p.yaml"), "--", os.Args[0])
	cmd.Env = append(h.env, "UNDOLOG_FAKE_SERVER=1", "UNDOLOG_FAKE_TOOL="+hostile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	written, _ := os.ReadFile(filepath.Join(h.dir, "p.yaml"))
	for _, r := range string(written) {
		if r != '\n' && textfmt.Unsafe(r) {
			t.Fatalf("policy init wrote %U raw:\n%q", r, written)
		}
	}
	p, err := policy.LoadPolicy(filepath.Join(h.dir, "p.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// policy check shows the names escaped.
	check := exec.Command(testbin.Undolog(t), "policy", "check", filepath.Join(h.dir, "p.yaml"))
	check.Env = h.env
	out, err := check.CombinedOutput()
	if err != nil || strings.ContainsAny(string(out), "\x1b\x07\u009b\u202e") || !strings.Contains(string(out), `\x1b]0;OWNED`) {
		t.Fatalf("policy check: %v\n%q", err, out)
	}
	none := func() (bool, bool) { return false, false }
	if c := p.Classify(hostile, none); c.Tier != sm.Safe || c.Rule == nil || len(p.Rules) != 13 { // the fake server's 12 tools and this one
		t.Fatalf("%q: %+v; rules %+v", hostile, c, p.Rules)
	}
	for _, other := range []string{"evil-twin", "echo-not", "evil"} {
		if c := p.Classify(other, none); c.Tier != sm.Irreversible || c.Rule != nil {
			t.Fatalf("%q: %+v", other, c)
		}
	}
	// --file never overwrites.
	cmd = exec.Command(testbin.Undolog(t), "policy", "init", "--file", filepath.Join(h.dir, "p.yaml"), "--", os.Args[0])
	cmd.Env = append(h.env, "UNDOLOG_FAKE_SERVER=1")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "exists; not overwriting it") {
		t.Fatalf("%v %s", err, out)
	}
}

// Requests other than tools/call (here resources/list and prompts/list) get
// exactly what the server says, whatever that is.
func TestProxyPassesOtherRequestsThrough(t *testing.T) {
	h := newHarness(t)
	direct, proxied := h.direct(), h.proxied("pass")
	ctx := context.Background()
	res1, err1 := direct.ListResources(ctx, nil)
	res2, err2 := proxied.ListResources(ctx, nil)
	if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(res1, res2) {
		t.Fatalf("resources/list: %v %v / %v %v", res1, err1, res2, err2)
	}
	p1, err1 := direct.ListPrompts(ctx, nil)
	p2, err2 := proxied.ListPrompts(ctx, nil)
	if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(p1, p2) {
		t.Fatalf("prompts/list: %v %v / %v %v", p1, err1, p2, err2)
	}
	if err := proxied.Ping(ctx, nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

// TestProxyCallWhoseLeaseLapsedOnAnotherMachine: a call left executing on
// machine m1 (its server died mid-call) is no longer renewed, though m1's
// proxy lives: machine m2 finds it in progress while its lease holds, then
// in doubt with its lease named, and never runs it.
func TestProxyCallWhoseLeaseLapsedOnAnotherMachine(t *testing.T) {
	h := newHarness(t)
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	env := h.env
	h.env = append(append([]string{}, env...), "UNDOLOG_HOST=m1", "UNDOLOG_LEASE=2s")
	in, out, m1 := rawProxy(t, h)
	io.WriteString(in, initialize+"\n")
	next(t, out)
	io.WriteString(in, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"die","arguments":{}}}`+"\n")
	if m := next(t, out); m["error"] == nil {
		t.Fatalf("dying server: %v", m)
	}

	h.env = append(append([]string{}, env...), "UNDOLOG_HOST=m2")
	in2, out2, _ := rawProxy(t, h)
	io.WriteString(in2, initialize+"\n")
	next(t, out2)
	deadline := time.Now().Add(time.Minute) // a failure bound, not a speed target
	sawInProgress := false
	for id := 2; ; id++ {
		fmt.Fprintf(in2, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"die","arguments":{}}}`+"\n", id)
		text := toolText(next(t, out2))
		if strings.Contains(text, "effect 1 is executing on m1 (") {
			sawInProgress = true
		} else if want := fmt.Sprintf("(last renewed by pid %d on m1); it may or may not have taken effect: check, then run `undolog --log %s resolve 1", m1.Process.Pid, h.logPath); strings.Contains(text, "effect 1 is in doubt: its owner's lease expired at ") && strings.Contains(text, want) {
			break
		} else {
			t.Fatalf("repeat on m2: %q", text)
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease of the call left executing never ran out")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !sawInProgress {
		t.Fatal("in doubt at once: the lease was not held at first")
	}
	store := logaddr.File(h.logPath, logaddr.Options{})
	if d, err := store.GetEffect(t.Context(), 1); err != nil || d.Effect.State != sm.Executing || len(d.History) != 2 {
		t.Fatalf("the call in doubt was touched: %+v %v", d, err)
	}
}
