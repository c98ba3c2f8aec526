package proxy_test

import (
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

// sdkHarness is a harness whose upstream is the Go SDK test server
// (sdkserver) over stdio; state is its directory, pids the file of its
// processes' ids.
func sdkHarness(t *testing.T) (h *harness, state, pids string) {
	h, state, _ = sdkHarnessOn(t, "file")
	return h, state, filepath.Join(state, "pids")
}

// keys are the keys the test server holds, sorted.
func keys(t *testing.T, stateDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); n != "writes.log" && n != "pids" {
			out = append(out, n)
		}
	}
	return out
}

func lines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// writeSessions are the sessions `undolog list` shows write calls in, each
// with how many.
func writeSessions(h *harness) map[string]int {
	sessions := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(h.cli("list")), "\n") {
		if cols := strings.Split(line, "\t"); len(cols) > 2 && cols[2] == "write" {
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
	h, state, pids := sdkHarness(t)
	url, _, _ := listening(t, h, "--policy", h.policy, "--", sdkServer(t))

	s := connect2026(t, url, "agent-2026")
	if v := s.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("discovery through the proxy gave %q, want 2026-07-28 (no fallback to initialize)", v)
	}
	if s.ID() != "" {
		t.Fatalf("a stateless client was given the session %q", s.ID())
	}
	tools, err := s.ListTools(t.Context(), nil)
	if err != nil || len(tools.Tools) != 7 {
		t.Fatalf("tools/list: %v %+v", err, tools)
	}
	var want []string
	for i := range 20 {
		name := fmt.Sprintf("n%02d", i)
		if res := call(t, s, "write", map[string]any{"key": name, "value": "v"}); res.IsError {
			t.Fatalf("write %s: %s", name, text(res))
		}
		want = append(want, name)
	}
	if got := keys(t, state); !slices.Equal(got, want) {
		t.Fatalf("the server holds %v", got)
	}
	if n := len(lines(t, pids)); n != 1 {
		t.Fatalf("20 stateless calls started %d server processes, want 1", n)
	}
	sessions := writeSessions(h)
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
	if res := call(t, os2025, "write", map[string]any{"key": "old", "value": "v"}); res.IsError {
		t.Fatalf("write through a 2025-11-25 session: %s", text(res))
	}
	os2025.Close()
	if sessions := writeSessions(h); len(sessions) != 2 || sessions[session] != 20 {
		t.Fatalf("the 2025-11-25 client's call should be in a session of its own: %v", sessions)
	}

	h.cli("undo", session, "--yes")
	if got := keys(t, state); !slices.Equal(got, []string{"old"}) {
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
	h, _, pids := sdkHarness(t)
	h.env = append(h.env, "SDKSERVER_VERSIONS=2025-11-25,2025-06-18")
	url, _, _ := listening(t, h, "--policy", h.policy, "--", sdkServer(t))
	s := connect2026(t, url, "agent-2026")
	if v := s.InitializeResult().ProtocolVersion; v != "2025-11-25" || s.ID() == "" {
		t.Fatalf("against a server of older versions: version %q, session %q", v, s.ID())
	}
	if res := call(t, s, "write", map[string]any{"key": "after-fallback", "value": "v"}); res.IsError {
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
	h, state, pids := sdkHarness(t)
	url, _, _ := listening(t, h, "--policy", h.policy, "--session", "pinned-1", "--", sdkServer(t))
	for _, name := range []string{"agent-a", "agent-b"} {
		c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
		s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		if res := call(t, s, "write", map[string]any{"key": name, "value": "v"}); res.IsError {
			t.Fatalf("%s: %s", name, text(res))
		}
		s.Close()
	}
	if sessions := writeSessions(h); len(sessions) != 1 || sessions["pinned-1"] != 2 {
		t.Fatalf("the calls went in %v, want both in pinned-1", sessions)
	}
	if n, got := len(lines(t, pids)), keys(t, state); n != 2 || !slices.Equal(got, []string{"agent-a", "agent-b"}) {
		t.Fatalf("two client names: %d server processes, names %v", n, got)
	}
}
