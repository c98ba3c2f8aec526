package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkPutServer is the Go SDK's MCP server over stdio, which speaks every
// version the SDK does, 2026-07-28 (stateless) included: "put" adds a line
// to the file $UNDOLOG_SDK_STATE, "remove" takes it away. Each process
// appends its pid to $UNDOLOG_SDK_PIDS. $UNDOLOG_SDK_VERSIONS (comma
// separated) narrows the protocol versions it speaks.
func sdkPutServer() {
	state := os.Getenv("UNDOLOG_SDK_STATE")
	if f, err := os.OpenFile(os.Getenv("UNDOLOG_SDK_PIDS"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintln(f, os.Getpid())
		f.Close()
	}
	type nameArgs struct {
		Name string `json:"name"`
	}
	var opts *mcp.ServerOptions
	if v := os.Getenv("UNDOLOG_SDK_VERSIONS"); v != "" {
		opts = &mcp.ServerOptions{SupportedProtocolVersions: strings.Split(v, ",")}
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "sdk-stdio", Version: "1"}, opts)
	// One call at a time changes the file: the SDK runs calls concurrently.
	lock := make(chan struct{}, 1)
	edit := func(change func([]string) []string) {
		lock <- struct{}{}
		defer func() { <-lock }()
		b, _ := os.ReadFile(state)
		names := change(strings.Fields(string(b)))
		os.WriteFile(state, []byte(strings.Join(names, "\n")), 0o644)
	}
	mcp.AddTool(server, &mcp.Tool{Name: "put"}, func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
		edit(func(names []string) []string { return append(names, a.Name) })
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "put " + a.Name}}}, nil, nil
	})
	mcp.AddTool(server, &mcp.Tool{Name: "remove"}, func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
		edit(func(names []string) []string {
			return slices.DeleteFunc(names, func(n string) bool { return n == a.Name })
		})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "removed " + a.Name}}}, nil, nil
	})
	server.Run(context.Background(), &mcp.StdioTransport{})
}

// sdkHarness is a harness whose upstream is sdkPutServer; state and pids are
// its files.
func sdkHarness(t *testing.T) (h *harness, policy, state, pids string) {
	h = newHarness(t)
	state, pids = filepath.Join(h.dir, "names"), filepath.Join(h.dir, "pids")
	h.env = append(h.env, "UNDOLOG_SDK_SERVER=1", "UNDOLOG_SDK_STATE="+state, "UNDOLOG_SDK_PIDS="+pids)
	policy = filepath.Join(h.dir, "sdk.yaml")
	os.WriteFile(policy, []byte(remotePolicy), 0o644)
	return h, policy, state, pids
}

func lines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// putSessions are the sessions `undolog list` shows put calls in, each
// with how many.
func putSessions(h *harness) map[string]int {
	sessions := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(h.cli("list")), "\n") {
		if cols := strings.Split(line, "\t"); len(cols) > 2 && cols[2] == "put" {
			sessions[cols[1]]++
		}
	}
	return sessions
}

// connect2026 connects a Go SDK client named name at 2026-07-28 to url
// over HTTP; the session ends with the test.
func connect2026(t *testing.T, url, name string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestProxyListenServesStatelessClients: a Go SDK client at 2026-07-28
// reaches a Go SDK server over stdio through `undolog proxy --listen`
// without a session: discovery and tools/list pass, its 20 compensable
// calls go in one undolog session and one server process, and undo takes
// them all back; a 2025-11-25 client keeps its session of its own.
func TestProxyListenServesStatelessClients(t *testing.T) {
	h, policy, state, pids := sdkHarness(t)
	url, _, _ := listening(t, h, "--policy", policy, "--", os.Args[0])

	s := connect2026(t, url, "agent-2026")
	if v := s.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("discovery through the proxy gave %q, want 2026-07-28 (no fallback to initialize)", v)
	}
	if s.ID() != "" {
		t.Fatalf("a stateless client was given the session %q", s.ID())
	}
	tools, err := s.ListTools(t.Context(), nil)
	if err != nil || len(tools.Tools) != 2 {
		t.Fatalf("tools/list: %v %+v", err, tools)
	}
	var want []string
	for i := range 20 {
		name := fmt.Sprintf("n%02d", i)
		if res := call(t, s, "put", map[string]any{"name": name}); res.IsError || text(res) != "put "+name {
			t.Fatalf("put %s: %+v", name, res)
		}
		want = append(want, name)
	}
	if got := lines(t, state); !slices.Equal(got, want) {
		t.Fatalf("the server holds %v", got)
	}
	if n := len(lines(t, pids)); n != 1 {
		t.Fatalf("20 stateless calls started %d server processes, want 1", n)
	}
	sessions := putSessions(h)
	if len(sessions) != 1 {
		t.Fatalf("20 stateless calls of one client went in %d sessions: %v", len(sessions), sessions)
	}
	var session string
	for id, n := range sessions {
		if session = id; n != 20 {
			t.Fatalf("session %s holds %d calls, want 20", id, n)
		}
	}

	// The log names the client by the name its requests' _meta give.
	var shown struct {
		History []struct {
			Actor string `json:"actor"`
		} `json:"history"`
	}
	ids := strings.Fields(h.cli("list", "--session", session, "-o", "ids"))
	if len(ids) == 0 {
		t.Fatal("no effect listed")
	}
	if err := json.Unmarshal([]byte(h.cli("show", ids[0], "-o", "json")), &shown); err != nil || len(shown.History) == 0 || shown.History[0].Actor != "mcp:agent-2026" {
		t.Fatalf("the log names the stateless client %+v (%v), want mcp:agent-2026", shown.History, err)
	}

	// An older client beside it: a session (and server) of its own.
	old := mcp.NewClient(&mcp.Implementation{Name: "agent-2025", Version: "1"}, nil)
	os2025, err := old.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	if v := os2025.InitializeResult().ProtocolVersion; v != "2025-11-25" || os2025.ID() == "" {
		t.Fatalf("a 2025-11-25 client: version %q, session %q", v, os2025.ID())
	}
	if res := call(t, os2025, "put", map[string]any{"name": "old"}); res.IsError || text(res) != "put old" {
		t.Fatalf("put through a 2025-11-25 session: %+v", res)
	}
	os2025.Close()
	if sessions := putSessions(h); len(sessions) != 2 || sessions[session] != 20 {
		t.Fatalf("the 2025-11-25 client's call should be in a session of its own: %v", sessions)
	}

	h.cli("undo", session, "--yes")
	if got := lines(t, state); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("after undo of %s the server holds %v, want only the older client's", session, got)
	}
}

// TestProxyListenStatelessClientOfAnOlderServer: a client at 2026-07-28
// through --listen to the memory server (which speaks no 2026-07-28): its
// server/discover is answered by the server, refused, and the client falls
// back to a 2025-11-25 session, whose calls are logged as before.
func TestProxyListenStatelessClientOfAnOlderServer(t *testing.T) {
	h := newHarness(t)
	url, _, _ := listening(t, h, "--policy", h.policy, "--", memoryServer(t))
	s := connect2026(t, url, "agent-2026")
	if v := s.InitializeResult().ProtocolVersion; v >= "2026-07-28" || s.ID() == "" {
		t.Fatalf("against an older server: version %q, session %q", v, s.ID())
	}
	res := call(t, s, "create_entities", map[string]any{"entities": []map[string]any{{"name": "x", "entityType": "t", "observations": []string{}}}})
	if res.IsError || !strings.Contains(h.cli("list"), "create_entities") {
		t.Fatalf("a call after the fallback: %+v", res)
	}
}

// TestProxyListenEndsALaneItsServerRefusedDiscovery: a 2026-07-28 client
// of a server over stdio that speaks only older versions starts a lane
// (a server process) for its server/discover; the server refuses it, the
// client falls back to a session of its own (a second process), and the
// lane's process is stopped then, not left idle for the lane's timeout.
func TestProxyListenEndsALaneItsServerRefusedDiscovery(t *testing.T) {
	h, policy, _, pids := sdkHarness(t)
	h.env = append(h.env, "UNDOLOG_SDK_VERSIONS=2025-11-25,2025-06-18")
	url, _, _ := listening(t, h, "--policy", policy, "--", os.Args[0])
	s := connect2026(t, url, "agent-2026")
	if v := s.InitializeResult().ProtocolVersion; v != "2025-11-25" || s.ID() == "" {
		t.Fatalf("against a server of older versions: version %q, session %q", v, s.ID())
	}
	if res := call(t, s, "put", map[string]any{"name": "after-fallback"}); res.IsError {
		t.Fatalf("a call after the fallback: %+v", res)
	}
	started := lines(t, pids)
	if len(started) != 2 {
		t.Fatalf("%d server processes, want 2 (the discover's lane, then the session's)", len(started))
	}
	alive := func(pid string) bool {
		n, _ := strconv.Atoi(pid)
		return syscall.Kill(n, 0) == nil
	}
	for deadline := time.Now().Add(10 * time.Second); alive(started[0]); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server process of the refused discover still runs 10 s on")
		}
	}
	if !alive(started[1]) {
		t.Fatal("the session's server process stopped too")
	}
}

// TestProxyListenPinsStatelessClients: with --session, stateless clients of
// two names (a lane, and a server process, each) log their calls in the
// pinned session.
func TestProxyListenPinsStatelessClients(t *testing.T) {
	h, policy, state, pids := sdkHarness(t)
	url, _, _ := listening(t, h, "--policy", policy, "--session", "pinned-1", "--", os.Args[0])
	for _, name := range []string{"agent-a", "agent-b"} {
		c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
		s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		if res := call(t, s, "put", map[string]any{"name": name}); res.IsError {
			t.Fatalf("%s: %+v", name, res)
		}
		s.Close()
	}
	if sessions := putSessions(h); len(sessions) != 1 || sessions["pinned-1"] != 2 {
		t.Fatalf("the calls went in %v, want both in pinned-1", sessions)
	}
	if n, got := len(lines(t, pids)), lines(t, state); n != 2 || !slices.Equal(got, []string{"agent-a", "agent-b"}) {
		t.Fatalf("two client names: %d server processes, names %v", n, got)
	}
}
