package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/mcpclient"
	"github.com/undolog/undolog/policy"
	"github.com/undolog/undolog/proxy"
)

// TestHTTPServer: the Streamable HTTP path against another implementation
// (the Go SDK's server, in the test only): the headers read from the
// environment go with every request, tools/list is paged (one tool a page),
// a tool error is an error, and Close ends the session with a DELETE.
func TestHTTPServer(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "sdk", Version: "1"}, &mcp.ServerOptions{PageSize: 1})
	type args struct {
		Name string `json:"name"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "greet", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + a.Name}}}, nil, nil
	})
	mcp.AddTool(server, &mcp.Tool{Name: "refuse"}, func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no " + a.Name}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	var mu sync.Mutex
	var seen []string // method, session id and X-Key of each request
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("Mcp-Session-Id")+" "+r.Header.Get("X-Key"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	t.Setenv("UNDOLOG_TEST_KEY", "k1")
	argv := mcpclient.Remote{URL: ts.URL, Headers: []mcpclient.HeaderVar{{Name: "X-Key", Var: "UNDOLOG_TEST_KEY"}}}.Argv()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Dial(ctx, argv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.ProtocolVersion != "2025-11-25" {
		t.Fatalf("protocol version %q", c.ProtocolVersion)
	}
	tools, err := c.Tools(ctx)
	if err != nil || len(tools) != 2 {
		t.Fatalf("tools: %v, %v", tools, err)
	}
	names := map[string]*mcpclient.Tool{}
	for _, tool := range tools {
		names[tool.Name] = tool
	}
	if g := names["greet"]; g == nil || g.Annotations == nil || !g.Annotations.ReadOnlyHint || names["refuse"] == nil || !strings.Contains(string(g.InputSchema), `"name"`) {
		t.Fatalf("tools: %+v", tools)
	}
	out, err := c.CallTool(ctx, "greet", json.RawMessage(`{"name":"ada"}`))
	if err != nil || mcpclient.ResultText(out) != "hello ada" {
		t.Fatalf("greet: %s, %v", out, err)
	}
	if _, err := c.CallTool(ctx, "refuse", json.RawMessage(`{"name":"bob"}`)); err == nil || err.Error() != "refuse: no bob" {
		t.Fatalf("refuse: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	sid := strings.Fields(seen[len(seen)-1])
	if len(sid) != 3 || sid[0] != http.MethodDelete || sid[1] == "" {
		t.Fatalf("the last request %q: want a DELETE of the session", seen[len(seen)-1])
	}
	for _, s := range seen {
		if !strings.HasSuffix(s, " k1") {
			t.Fatalf("a request without the header: %q", s)
		}
	}
}

// TestHTTPMemoryServerThroughProxy: the real memory server, reached over
// Streamable HTTP through undolog's own proxy (its --listen side), as undo
// reaches an HTTP upstream.
func TestHTTPMemoryServerThroughProxy(t *testing.T) {
	path := os.Getenv("UNDOLOG_MCP_MEMORY")
	if path == "" {
		if os.Getenv("UNDOLOG_REQUIRE_MCP") != "" {
			t.Fatal("UNDOLOG_MCP_MEMORY is not set but UNDOLOG_REQUIRE_MCP is")
		}
		t.Skip("UNDOLOG_MCP_MEMORY not set: the real MCP server is not installed")
	}
	t.Setenv("MEMORY_FILE_PATH", filepath.Join(t.TempDir(), "memory.jsonl"))
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.ParsePolicy([]byte("tools:\n  create_entities: {tier: compensable}\n  read_graph: {tier: safe}\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &proxy.HTTPServer{Start: func(ctx context.Context, client proxy.Conn) {
		up, err := proxy.StartCommand([]string{path}, nil)
		if err != nil {
			client.Close()
			return
		}
		p := &proxy.Proxy{Log: store, Session: "s", Policy: pol, Upstream: []string{path}}
		p.Serve(ctx, client, up)
	}}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() { stop(); <-served }()

	callCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := mcpclient.Dial(callCtx, mcpclient.Remote{URL: "http://" + ln.Addr().String() + "/mcp"}.Argv())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tools, err := c.Tools(callCtx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tool := range tools {
		found = found || tool.Name == "create_entities"
	}
	if !found {
		t.Fatalf("tools: %v", tools)
	}
	if _, err := c.CallTool(callCtx, "create_entities", json.RawMessage(`{"entities":[{"name":"ada","entityType":"person","observations":[]}]}`)); err != nil {
		t.Fatal(err)
	}
	out, err := c.CallTool(callCtx, "read_graph", json.RawMessage(`{}`))
	if err != nil || !strings.Contains(mcpclient.ResultText(out), `"ada"`) {
		t.Fatalf("read_graph: %s, %v", out, err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// The call went through the proxy: it is in the log.
	d, err := store.GetEffect(context.Background(), 1)
	if err != nil || d.Effect.Tool != "create_entities" {
		t.Fatalf("effect 1: %+v, %v", d.Effect, err)
	}
}

// TestHTTPDialCancelled: a server that never answers initialize does not
// hold Dial past its context (the POST is abandoned, not waited for).
func TestHTTPDialCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // (the server sees the client go only once the body is read)
		cancel()                    // the caller gives up while the server sits on it
		<-r.Context().Done()
	}))
	defer ts.Close()
	if _, err := mcpclient.Dial(ctx, mcpclient.Remote{URL: ts.URL}.Argv()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Dial: %v, want context.Canceled", err)
	}
}

// TestHTTPServerOf2026: undo's client reaches a Go SDK server that speaks
// only 2026-07-28 (stateless HTTP, which answers initialize with a version
// it then refuses): it discovers it instead of initializing, and each
// request says its version, client and capabilities in its _meta. A
// server that speaks both is spoken to at 2026-07-28 too; a stateful one
// (older versions only) is initialized as before.
func TestHTTPServerOf2026(t *testing.T) {
	for _, tc := range []struct {
		name      string
		versions  []string
		stateless bool
		want      string
	}{
		{"2026 only", []string{"2026-07-28"}, true, "2026-07-28"},
		{"both", nil, true, "2026-07-28"},
		{"sessions", nil, false, "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := mcp.NewServer(&mcp.Implementation{Name: "sdk", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: tc.versions})
			var mu sync.Mutex
			var callers []string
			// greet's name goes in a header too (x-mcp-header): a server of
			// 2026-07-28 refuses a call without it.
			schema := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string", "x-mcp-header": "Name"}}}
			server.AddTool(&mcp.Tool{Name: "greet", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var a struct {
					Name string `json:"name"`
				}
				json.Unmarshal(req.Params.Arguments, &a)
				mu.Lock()
				if ci := req.ClientInfo(); ci != nil {
					callers = append(callers, req.ProtocolVersion()+" "+ci.Name)
				}
				mu.Unlock()
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + a.Name}}}, nil
			})
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: tc.stateless})
			ts := httptest.NewServer(h)
			defer ts.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := mcpclient.Dial(ctx, mcpclient.Remote{URL: ts.URL}.Argv())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.ProtocolVersion != tc.want {
				t.Fatalf("protocol version %q, want %q", c.ProtocolVersion, tc.want)
			}
			// Called before any tools/list of the caller's (as undo calls a
			// compensation).
			out, err := c.CallTool(ctx, "greet", json.RawMessage(`{"name":"ada"}`))
			if err != nil || mcpclient.ResultText(out) != "hello ada" {
				t.Fatalf("greet: %s, %v", out, err)
			}
			if tools, err := c.Tools(ctx); err != nil || len(tools) != 1 {
				t.Fatalf("tools: %v, %v", tools, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(callers) != 1 || callers[0] != tc.want+" undolog" {
				t.Fatalf("the server saw the call from %q, want %q", callers, tc.want+" undolog")
			}
		})
	}
}
