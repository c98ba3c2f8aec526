package proxy_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	sm "github.com/undolog/undolog/statemachine"
)

// protocol2026 is the MCP version of multi round-trip requests.
const protocol2026 = "2026-07-28"

// sdkServer returns the path of testdata/sdkserver, the Go SDK test server.
func sdkServer(t testing.TB) string {
	return testbin.Build(t, "github.com/undolog/undolog/proxy/testdata/sdkserver")
}

// sdkPolicy classifies the test server's tools.
const sdkPolicy = `tools:
  write:
    tier: compensable
    compensate: {tool: delete, args: {key: "{{ .args.key }}"}}
  set:
    tier: compensable
    capture: {tool: read, args: {key: "{{ .args.key }}"}}
    compensate: {tool: set, args: {key: "{{ .args.key }}", value: "{{ .capture.content[0].text }}"}}
  confirmed_write:
    tier: compensable
    compensate: {tool: delete, args: {key: "{{ .args.key }}"}}
  confirmed_launch: {tier: irreversible}
  launch: {tier: irreversible}
  delete: {tier: irreversible}
`

// engines are the log engines the rounds tests run on. sdkHarnessOn knows
// one more, "pooled": PostgreSQL behind PgBouncer in transaction pooling
// mode, its URL the pooler's alone (waits poll).
var engines = []string{"file", "postgres"}

// sdkHarnessOn is a harness whose server is the Go SDK test server, its
// state in stateDir, its policy sdkPolicy, its log (store) on engine.
func sdkHarnessOn(t *testing.T, engine string) (h *harness, stateDir string, store effectlog.Log) {
	h = newHarness(t)
	store = logaddr.File(h.logPath, logaddr.Options{})
	if engine == "postgres" || engine == "pooled" {
		var addr string
		if engine == "pooled" {
			addr = pgtest.Server(t).NewPooledDatabase(t, false)
		} else {
			addr = pgtest.Server(t).NewDatabase(t)
		}
		h.env = append(h.env, "UNDOLOG_LOG="+addr) // the last value wins
		store = logaddr.Open(addr, logaddr.Options{})
		t.Cleanup(func() { store.Close() })
	}
	stateDir = filepath.Join(h.dir, "state")
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	h.env = append(h.env, "SDKSERVER_DIR="+stateDir)
	h.policy = filepath.Join(h.dir, "policy.yaml")
	if err := os.WriteFile(h.policy, []byte(sdkPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	return h, stateDir, store
}

// sdkClient connects a Go SDK client at version through argv; its
// elicitation handler answers action and counts the requests in asked.
func sdkClient(h *harness, argv []string, version, action string, asked *atomic.Int64) *mcp.ClientSession {
	h.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = h.env
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "rounds-agent", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: action}, nil
		},
	})
	s, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { s.Close() })
	return s
}

// journal is what the test server did, one line an act.
func journal(t *testing.T, stateDir string) []string {
	b, err := os.ReadFile(filepath.Join(stateDir, "writes.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
}

func TestSDKServerAsksForInputDirectly(t *testing.T) {
	for _, version := range []string{protocol2026, "2025-11-25", "2025-06-18"} {
		t.Run(version, func(t *testing.T) {
			h, state, _ := sdkHarnessOn(t, "file")
			var asked atomic.Int64
			s := sdkClient(h, []string{sdkServer(t)}, version, "accept", &asked)
			if got := s.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s, want %s", got, version)
			}
			r := call(t, s, "confirmed_write", map[string]any{"key": "k", "value": "v"})
			if r.IsError || asked.Load() != 1 {
				t.Fatalf("asked %d times: %s", asked.Load(), text(r))
			}
			if j := journal(t, state); len(j) != 1 || j[0] != "write_k=v" {
				t.Fatalf("journal %v", j)
			}
		})
	}
}

// roundsProxy is the argv of undolog proxy in front of the test server.
func roundsProxy(h *harness, flags ...string) []string {
	argv := append([]string{testbin.Undolog(h.t), "proxy", "--session", "rounds", "--policy", h.policy}, flags...)
	return append(argv, "--", sdkServer(h.t))
}

// loggedEffects are the effects of session rounds, as "tool:state".
func loggedEffects(t *testing.T, store effectlog.Log) []string {
	t.Helper()
	list, _, err := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: "rounds", Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list {
		out = append(out, e.Tool+":"+string(e.State))
	}
	return out
}

// Issue 30 item 2: a call whose server asks for input stays one effect
// through its rounds, committed by its last; undo compensates it once. Under
// older versions the server asks by elicitation, which passes through.
func TestProxyInputRoundsAreOneEffect(t *testing.T) {
	for _, engine := range engines {
		for _, version := range []string{protocol2026, "2025-11-25", "2025-06-18"} {
			t.Run(engine+"/"+version, func(t *testing.T) { inputRoundsAreOneEffect(t, engine, version) })
		}
	}
	t.Run("pooled/"+protocol2026, func(t *testing.T) { inputRoundsAreOneEffect(t, "pooled", protocol2026) })
}

func inputRoundsAreOneEffect(t *testing.T, engine, version string) {
	h, state, store := sdkHarnessOn(t, engine)
	var asked atomic.Int64
	s := sdkClient(h, roundsProxy(h), version, "accept", &asked)
	if got := s.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}
	r := call(t, s, "confirmed_write", map[string]any{"key": "k", "value": "v"})
	if r.IsError || asked.Load() != 1 {
		t.Fatalf("asked %d times: %s", asked.Load(), text(r))
	}
	if j := journal(t, state); strings.Join(j, " ") != "write_k=v" {
		t.Fatalf("journal %v", j)
	}
	if got := loggedEffects(t, store); strings.Join(got, " ") != "confirmed_write:committed" {
		t.Fatalf("logged %v, want one committed effect", got)
	}
	s.Close()
	if out := h.cli("undo", "rounds", "--yes"); !strings.Contains(out, "1 undone") {
		t.Fatalf("undo: %s", out)
	}
	if j := journal(t, state); strings.Join(j, " ") != "write_k=v delete_k" {
		t.Fatalf("journal after undo %v", j)
	}
}

// An irreversible call that asks for input is approved once: its next round
// continues the approved effect. Behind a pooler the proxy's wait for the
// approval, made by another process, polls.
func TestProxyInputRoundsOfAnIrreversibleCallApprovedOnce(t *testing.T) {
	for _, engine := range []string{"file", "pooled"} {
		t.Run(engine, func(t *testing.T) { irreversibleCallApprovedOnce(t, engine) })
	}
}

func irreversibleCallApprovedOnce(t *testing.T, engine string) {
	h, state, store := sdkHarnessOn(t, engine)
	var asked atomic.Int64
	s := sdkClient(h, roundsProxy(h), protocol2026, "accept", &asked)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "confirmed_launch", Arguments: map[string]any{"name": "rocket"}})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	waitFor(t, "the approval request", func() bool {
		list, _, _ := store.PendingApprovals(t.Context(), "rounds", 0)
		return len(list) == 1
	})
	h.cli("approve", "1", "--as", "alice")
	var r *mcp.CallToolResult
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the approved call did not complete")
	}
	if r == nil || r.IsError || asked.Load() != 1 {
		t.Fatalf("asked %d times: %v", asked.Load(), r)
	}
	if j := journal(t, state); strings.Join(j, " ") != "launch_rocket" {
		t.Fatalf("journal %v", j)
	}
	if got := loggedEffects(t, store); strings.Join(got, " ") != "confirmed_launch:committed" {
		t.Fatalf("logged %v, want one committed effect", got)
	}
	if list, _, _ := store.PendingApprovals(t.Context(), "rounds", 0); len(list) != 0 {
		t.Fatalf("approvals still pending: %v", list)
	}
}

// A call abandoned between rounds is failed after the input wait, as show
// says; called again, it runs (a retry) and completes.
func TestProxyInputRoundAbandonedIsFailed(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) { inputRoundAbandonedIsFailed(t, engine) })
	}
}

func inputRoundAbandonedIsFailed(t *testing.T, engine string) {
	h, state, store := sdkHarnessOn(t, engine)
	s, _ := roundByRoundClient(h, roundsProxy(h, "--input-wait", "1s"))
	args := map[string]any{"key": "k", "value": "v"}
	r := call(t, s, "confirmed_write", args)
	if !r.NeedsInput() {
		t.Fatalf("the first round did not ask for input: %s", text(r))
	}
	if got := loggedEffects(t, store); strings.Join(got, " ") != "confirmed_write:executing" {
		t.Fatalf("between rounds: %v, want one executing effect", got)
	}
	waitForState(t, store, 1, sm.Pending) // failed: pending, to run again
	if out := h.cli("show", "1"); !strings.Contains(out, "abandoned between input rounds") {
		t.Fatalf("show does not say the call was abandoned:\n%s", out)
	}
	if j := journal(t, state); len(j) != 0 {
		t.Fatalf("journal %v", j)
	}
	// Called again: the failed call runs again, through both rounds.
	r = call(t, s, "confirmed_write", args)
	if !r.NeedsInput() {
		t.Fatalf("the call again did not ask for input: %s", text(r))
	}
	r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "confirmed_write", Arguments: args,
		InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept"}}, RequestState: r.RequestState})
	if err != nil || r.IsError {
		t.Fatalf("the second round: %v %v", err, r)
	}
	d, err := store.GetEffect(t.Context(), 1)
	if err != nil || d.Effect.State != sm.Committed {
		t.Fatalf("effect 1: %+v %v", d.Effect, err)
	}
	if got := loggedEffects(t, store); len(got) != 1 {
		t.Fatalf("logged %v, want one effect", got)
	}
	if j := journal(t, state); strings.Join(j, " ") != "write_k=v" {
		t.Fatalf("journal %v", j)
	}
}

// A declined input ends the call as the server says (a tool error): the
// effect failed, and undo has nothing to compensate.
func TestProxyInputDeclinedIsFailed(t *testing.T) {
	h, state, store := sdkHarnessOn(t, "file")
	var asked atomic.Int64
	s := sdkClient(h, roundsProxy(h), protocol2026, "decline", &asked)
	if r := call(t, s, "confirmed_write", map[string]any{"key": "k", "value": "v"}); !r.IsError || asked.Load() != 1 {
		t.Fatalf("asked %d times: %s", asked.Load(), text(r))
	}
	if got := loggedEffects(t, store); strings.Join(got, " ") != "confirmed_write:pending" {
		t.Fatalf("logged %v, want one failed (pending) effect", got)
	}
	s.Close()
	h.cli("undo", "rounds", "--yes")
	if j := journal(t, state); len(j) != 0 {
		t.Fatalf("journal %v: undo compensated what never happened", j)
	}
}

// An input_required answer that carries "content": [] (a readable tool
// result) is a round all the same: not committed, and the retry goes to the
// server; a round pending when the proxy ends is failed, as show says.
func TestProxyInputRoundWithContentIsNoOutcome(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	in, out, cmd := rawProxyWith(t, h, "tools:\n  odd: {tier: compensable}\n")
	send := func(s string) { fmt.Fprintln(in, s) }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	next(t, out)
	answer := `{\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":{\"resultType\":\"input_required\",\"content\":[],\"inputRequests\":{\"c\":{\"method\":\"elicitation/create\",\"params\":{\"message\":\"sure?\",\"requestedSchema\":{\"type\":\"object\"}}}},\"requestState\":\"s1\"}}`
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"odd","arguments":{"answer":"` + answer + `"}}}`)
	if m := next(t, out); m["id"] != 2.0 || m["result"].(map[string]any)["resultType"] != "input_required" {
		t.Fatalf("the first round: %v", m)
	}
	waitForState(t, store, 1, sm.Executing)
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"odd","arguments":{"answer":"` + answer + `"},"inputResponses":{"c":{"action":"accept"}},"requestState":"s1"}}`)
	if m := next(t, out); m["id"] != 3.0 || m["result"].(map[string]any)["resultType"] != "input_required" {
		t.Fatalf("the next round did not reach the server: %v", m)
	}
	list, _, _ := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: "fake-1"})
	if len(list) != 1 || list[0].State != sm.Executing {
		t.Fatalf("after two rounds: %+v, want one executing effect", list)
	}
	in.Close()
	cmd.Wait()
	d, err := store.GetEffect(t.Context(), 1)
	if err != nil || d.Effect.State != sm.Pending {
		t.Fatalf("after the proxy ended: %+v %v", d.Effect, err)
	}
	if out := h.cli("show", "1"); !strings.Contains(out, "the proxy ended before the client's next round") {
		t.Fatalf("show does not say why the call failed:\n%s", out)
	}
}

// prompts/get and resources/read pass through the proxy unlogged: their
// input rounds reach the server at every version.
func TestProxyInputRoundsOfPromptsAndResources(t *testing.T) {
	for _, version := range []string{protocol2026, "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			h, _, store := sdkHarnessOn(t, "file")
			var asked atomic.Int64
			s := sdkClient(h, roundsProxy(h), version, "accept", &asked)
			p, err := s.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "confirmed"})
			if err != nil || len(p.Messages) != 1 {
				t.Fatalf("prompts/get: %v %v", p, err)
			}
			want := int64(1)
			// The SDK's server (v1.8.0) fails a resource read that asks an
			// older client for input (directly as well): 2026-07-28 only.
			if version == protocol2026 {
				r, err := s.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "sdkserver://confirmed"})
				if err != nil || len(r.Contents) != 1 || r.Contents[0].Text != "confirmed resource" {
					t.Fatalf("resources/read: %v %v", r, err)
				}
				want++
			}
			if asked.Load() != want {
				t.Fatalf("asked %d times, want %d", asked.Load(), want)
			}
			if got := loggedEffects(t, store); len(got) != 0 {
				t.Fatalf("logged %v", got)
			}
		})
	}
}

// sdkServerHTTP starts the test server over HTTP and returns its URL.
func sdkServerHTTP(t *testing.T, h *harness) string {
	cmd := exec.Command(sdkServer(t))
	cmd.Env = append(h.env, "SDKSERVER_LISTEN=127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var url string
	if _, err := fmt.Fscanln(out, &url); err != nil {
		t.Fatalf("the test server printed no URL: %v", err)
	}
	return url
}

// The test server over HTTP, directly: 2026-07-28 statelessly and
// 2025-11-25 in a session, each asked for input.
func TestSDKServerOverHTTP(t *testing.T) {
	h, state, _ := sdkHarnessOn(t, "file")
	url := sdkServerHTTP(t, h)
	var asked atomic.Int64
	for _, version := range []string{protocol2026, "2025-11-25"} {
		c := mcp.NewClient(&mcp.Implementation{Name: "rounds-agent", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked.Add(1)
				return &mcp.ElicitResult{Action: "accept"}, nil
			},
		})
		s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		if got := s.InitializeResult().ProtocolVersion; got != version {
			t.Fatalf("negotiated %s, want %s", got, version)
		}
		if (s.ID() == "") != (version == protocol2026) {
			t.Fatalf("%s: session %q", version, s.ID())
		}
		if r := call(t, s, "confirmed_write", map[string]any{"key": "k", "value": version}); r.IsError {
			t.Fatalf("%s: %s", version, text(r))
		}
		s.Close()
	}
	if j := journal(t, state); asked.Load() != 2 || strings.Join(j, " ") != "write_k="+protocol2026+" write_k=2025-11-25" {
		t.Fatalf("asked %d times, journal %v", asked.Load(), j)
	}
}

// A proxy killed (SIGKILL) while a call awaits the client's input leaves
// the call executing, awaiting that input, as show says; the client's next
// round, through another proxy, fails it (its server had not acted) and
// runs it again as the same effect, which completes: nothing is in doubt.
func TestProxyKilledBetweenRoundsRunsTheCallAgain(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) { killedBetweenRounds(t, engine) })
	}
}

// roundByRoundClient connects a Go SDK client at 2026-07-28 that makes
// each input round itself (MultiRoundTrip disabled) through argv, the
// command it runs.
func roundByRoundClient(h *harness, argv []string) (*mcp.ClientSession, *exec.Cmd) {
	h.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = h.env
	c := mcp.NewClient(&mcp.Implementation{Name: "rounds-agent", Version: "1"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	s, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: protocol2026})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { s.Close() })
	return s, cmd
}

// killedAwaitingInput leaves a call of confirmed_write awaiting the
// client's input in a proxy it then kills (SIGKILL), as show says, and
// returns that round's answer and how to connect a client through another.
func killedAwaitingInput(t *testing.T, engine string) (h *harness, state string, store effectlog.Log, r *mcp.CallToolResult, connect func() (*mcp.ClientSession, *exec.Cmd)) {
	h, state, store = sdkHarnessOn(t, engine)
	connect = func() (*mcp.ClientSession, *exec.Cmd) { return roundByRoundClient(h, roundsProxy(h)) }
	s, proxy := connect()
	r = call(t, s, "confirmed_write", map[string]any{"key": "k", "value": "v"})
	if !r.NeedsInput() {
		t.Fatalf("the first round did not ask for input: %s", text(r))
	}
	awaiting := func(when string) {
		t.Helper()
		out := h.cli("show", "1")
		if !strings.Contains(out, "awaiting:     the client's input since ") || !strings.Contains(out, "Awaiting the client's input") {
			t.Fatalf("%s, show does not say the call awaits the client's input:\n%s", when, out)
		}
	}
	awaiting("between rounds")
	if err := proxy.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	s.Close() // reaps the proxy
	if got := loggedEffects(t, store); strings.Join(got, " ") != "confirmed_write:executing" {
		t.Fatalf("after the kill: %v, want one executing effect", got)
	}
	awaiting("after the kill")
	if out := h.cli("show", "1"); !strings.Contains(out, "abandoned:    abandoned between input rounds: it awaited the client's input since ") {
		t.Fatalf("after the kill, show does not say the call's owner is gone:\n%s", out)
	}
	return h, state, store, r, connect
}

// Undone after its proxy was killed between rounds, the call is failed
// and skipped, not compensated: its server had not acted.
func TestProxyKilledBetweenRoundsUndoesNothing(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			h, state, store, _, _ := killedAwaitingInput(t, engine)
			out := h.cli("undo", "rounds", "--yes")
			if !strings.Contains(out, "nothing to undo (never ran)") || !strings.Contains(out, "0 undone") {
				t.Fatalf("undo:\n%s", out)
			}
			if j := journal(t, state); len(j) != 0 {
				t.Fatalf("journal %v: undo compensated a write that never happened", j)
			}
			d, err := store.GetEffect(t.Context(), 1)
			if err != nil || d.Effect.State != sm.Pending || d.Undo == nil || d.Undo.State != sm.EntrySkipped ||
				!strings.HasPrefix(d.Effect.Error, "abandoned between input rounds: it awaited the client's input since ") {
				t.Fatalf("effect 1 after undo: %+v, entry %+v (%v)", d.Effect, d.Undo, err)
			}
			h.cli("verify")
		})
	}
}

func killedBetweenRounds(t *testing.T, engine string) {
	h, state, store, r, connect := killedAwaitingInput(t, engine)
	args := map[string]any{"key": "k", "value": "v"}
	// The client's next round, through another proxy.
	s, _ := connect()
	r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "confirmed_write", Arguments: args,
		InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept"}}, RequestState: r.RequestState})
	if err != nil || r.IsError || r.NeedsInput() {
		t.Fatalf("the next round: %v %s", err, text(r))
	}
	failedAsAbandoned(t, h, state, store, "confirmed_write:committed", "write_k=v")
}

// failedAsAbandoned checks, after effect 1 was failed as abandoned between
// its rounds, the effects of session rounds and the journal, that show
// says why, and that the log verifies.
func failedAsAbandoned(t *testing.T, h *harness, state string, store effectlog.Log, effects, writes string) {
	t.Helper()
	if got := loggedEffects(t, store); strings.Join(got, " ") != effects {
		t.Fatalf("session rounds: %v, want %s", got, effects)
	}
	if j := journal(t, state); strings.Join(j, " ") != writes {
		t.Fatalf("journal %v, want %s", j, writes)
	}
	out := h.cli("show", "1")
	if !strings.Contains(out, "abandoned between input rounds: it awaited the client's input since") || strings.Contains(out, "awaiting:") {
		t.Fatalf("show does not say the call was failed as abandoned:\n%s", out)
	}
	h.cli("verify")
}

// A later proxy fails, at its first logged call, a call a killed proxy
// left awaiting its client's input, though that client never comes back:
// it is not left executing for good. A proxy of the session does, and so
// does one of another (unpinned: a new session each run, where the
// client's retry lands as a new call): the sweep is of the whole log.
func TestProxyKilledBetweenRoundsIsFailedByTheNextProxy(t *testing.T) {
	for _, engine := range engines {
		for _, pinned := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/pinned=%v", engine, pinned), func(t *testing.T) {
				h, state, store, _, connect := killedAwaitingInput(t, engine)
				if !pinned {
					connect = func() (*mcp.ClientSession, *exec.Cmd) {
						return roundByRoundClient(h, []string{testbin.Undolog(h.t), "proxy", "--policy", h.policy, "--", sdkServer(h.t)})
					}
				}
				s, _ := connect()
				if r := call(t, s, "write", map[string]any{"key": "k2", "value": "v2"}); r.IsError {
					t.Fatalf("write: %s", text(r))
				}
				want := "confirmed_write:pending write:committed"
				if !pinned {
					want = "confirmed_write:pending" // the write is in the other session
				}
				failedAsAbandoned(t, h, state, store, want, "write_k2=v2")
			})
		}
	}
}

var confirmedArgs = map[string]any{"key": "k", "value": "v"}

// firstRoundAsked connects a round-by-round client through a proxy of
// session rounds and makes confirmed_write's first round, which asks for
// input.
func firstRoundAsked(t *testing.T, engine string) (h *harness, state string, store effectlog.Log, s *mcp.ClientSession, first *mcp.CallToolResult) {
	h, state, store = sdkHarnessOn(t, engine)
	s, _ = roundByRoundClient(h, roundsProxy(h))
	first = call(t, s, "confirmed_write", confirmedArgs)
	if !first.NeedsInput() {
		t.Fatalf("the first round did not ask for input: %s", text(first))
	}
	return h, state, store, s, first
}

// nextRoundOf is the client's next round of confirmed_write after first,
// accepting.
func nextRoundOf(first *mcp.CallToolResult) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "confirmed_write", Arguments: confirmedArgs,
		InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept"}}, RequestState: first.RequestState}
}

// The same call made afresh (no inputResponses, no requestState) while
// another of it awaits its next round is no next round of that one: it is
// a repeat, in progress, and never reaches the server.
func TestProxyFreshCallIsNoNextRound(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			h, state, store, s, first := firstRoundAsked(t, engine)
			fresh := call(t, s, "confirmed_write", confirmedArgs)
			if !fresh.IsError || fresh.NeedsInput() || !strings.Contains(text(fresh), "executing") {
				t.Fatalf("a fresh identical call: %s (needs input %v), want the call in progress", text(fresh), fresh.NeedsInput())
			}
			if out := h.cli("show", "1"); strings.Contains(out, "Client's input sent to the server") {
				t.Fatalf("the fresh call went to the server as a next round:\n%s", out)
			}
			r, err := s.CallTool(t.Context(), nextRoundOf(first))
			if err != nil || r.IsError || r.NeedsInput() {
				t.Fatalf("the next round: %v %s", err, text(r))
			}
			if got := loggedEffects(t, store); strings.Join(got, " ") != "confirmed_write:committed" {
				t.Fatalf("logged %v, want one committed effect", got)
			}
			if j := journal(t, state); strings.Join(j, " ") != "write_k=v" {
				t.Fatalf("journal %v", j)
			}
		})
	}
}

// A last round sent again after its call committed (a re-sent request, a
// stale requestState) is answered from the log: no second effect, no
// second write.
func TestProxyStaleNextRoundIsReplayed(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			_, state, store, s, first := firstRoundAsked(t, engine)
			last := nextRoundOf(first)
			r, err := s.CallTool(t.Context(), last)
			if err != nil || r.IsError || r.NeedsInput() {
				t.Fatalf("the next round: %v %s", err, text(r))
			}
			again, err := s.CallTool(t.Context(), last)
			if err != nil || again.IsError || text(again) != text(r) {
				t.Fatalf("the last round again: %v %s, want %s", err, text(again), text(r))
			}
			if got := loggedEffects(t, store); strings.Join(got, " ") != "confirmed_write:committed confirmed_write:replayed" {
				t.Fatalf("logged %v, want one committed effect and its replay", got)
			}
			if j := journal(t, state); strings.Join(j, " ") != "write_k=v" {
				t.Fatalf("journal %v", j)
			}
		})
	}
}
