package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	sm "github.com/undolog/undolog/statemachine"
)

// kvServer is a Go SDK server over stateless Streamable HTTP that keeps
// values by key: set (a write), get (a read, readOnlyHint). versions
// narrows the protocol versions it speaks (nil: all the SDK's). It keeps
// the protocol version each request was made under, as the server read it.
type kvServer struct {
	url string

	mu       sync.Mutex
	values   map[string]string
	versions map[string]bool // the protocol version of each tool call
}

func newKVServer(t *testing.T, versions []string) *kvServer {
	kv := &kvServer{values: map[string]string{}, versions: map[string]bool{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "kv", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	// set's key goes in a header too (x-mcp-header): a 2026 request
	// without it is refused.
	setSchema := map[string]any{"type": "object", "properties": map[string]any{
		"key":   map[string]any{"type": "string", "x-mcp-header": "Key"},
		"value": map[string]any{"type": "string"},
	}}
	server.AddTool(&mcp.Tool{Name: "set", InputSchema: setSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
			return nil, err
		}
		kv.mu.Lock()
		defer kv.mu.Unlock()
		kv.versions[req.ProtocolVersion()] = true
		kv.values[a.Key] = a.Value
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "set " + a.Key}}}, nil
	})
	type getArgs struct {
		Key string `json:"key"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "get", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(_ context.Context, req *mcp.CallToolRequest, a getArgs) (*mcp.CallToolResult, any, error) {
		kv.mu.Lock()
		defer kv.mu.Unlock()
		kv.versions[req.ProtocolVersion()] = true
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: kv.values[a.Key]}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	kv.url = ts.URL + "/mcp"
	return kv
}

func (kv *kvServer) value(key string) string {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	return kv.values[key]
}

func (kv *kvServer) spoken() []string {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	var vs []string
	for v := range kv.versions {
		vs = append(vs, v)
	}
	return vs
}

// kvPolicy: set is compensable, undone by setting back the value a
// capture (get) read before it; get is classified by its readOnlyHint,
// which the proxy reads from a tools/list of its own.
const kvPolicy = `tools:
  set:
    tier: compensable
    capture: {tool: get, args: {key: "{{ .args.key }}"}}
    compensate: {tool: set, args: {key: "{{ .args.key }}", value: "{{ .capture.content[0].text }}"}}
`

// TestProxyURLSpeaks2026: a Go SDK client at 2026-07-28 and at 2025-11-25
// drives undolog proxy --url in front of a Go SDK server that speaks only
// 2026-07-28, and one that speaks every version: discovery, a compensable
// write with a capture (one of its arguments in a header) before any tool
// list, a safe read the proxy classifies by a tools/list of its own,
// tools/list, then undo setting the value back. Each
// request reaches the server at the version the client spoke (a server
// that speaks only 2026-07-28 answers nothing else), and the log names
// the client.
func TestProxyURLSpeaks2026(t *testing.T) {
	for _, tc := range []struct {
		name           string
		serverVersions []string
		clientVersion  string
		want           string // the version the server is spoken to in
	}{
		{"2026 server, 2026 client", []string{"2026-07-28"}, "2026-07-28", "2026-07-28"},
		{"both server, 2026 client", nil, "2026-07-28", "2026-07-28"},
		{"both server, 2025 client", nil, "2025-11-25", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			kv := newKVServer(t, tc.serverVersions)
			kv.values["colour"] = "blue"
			policy := filepath.Join(h.dir, "kv.yaml")
			if err := os.WriteFile(policy, []byte(kvPolicy), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(testbin.Undolog(t), "proxy", "--session", "kv-1", "--policy", policy, "--url", kv.url)
			cmd.Env = h.env
			if testing.Verbose() {
				cmd.Stderr = os.Stderr
			}
			c := mcp.NewClient(&mcp.Implementation{Name: "agent-" + tc.clientVersion, Version: "1"}, nil)
			s, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: tc.clientVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.InitializeResult().ProtocolVersion; got != tc.want {
				t.Fatalf("negotiated %q through the proxy, want %q", got, tc.want)
			}
			// set before any list (its key goes in a header), then get,
			// which the proxy classifies by a tool list of its own.
			if res := call(t, s, "set", map[string]any{"key": "colour", "value": "red"}); res.IsError || text(res) != "set colour" {
				t.Fatalf("set: %+v", res)
			}
			if res := call(t, s, "get", map[string]any{"key": "colour"}); res.IsError || text(res) != "red" {
				t.Fatalf("get: %+v", res)
			}
			tools, err := s.ListTools(t.Context(), nil)
			if err != nil || len(tools.Tools) != 2 {
				t.Fatalf("tools/list: %+v, %v", tools, err)
			}
			s.Close()
			if kv.value("colour") != "red" {
				t.Fatal("the write did not reach the server")
			}

			store := logaddr.File(h.logPath, logaddr.Options{})
			effects, _, err := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: "kv-1", Ascending: true})
			if err != nil || len(effects) != 1 || effects[0].Tool != "set" || effects[0].State != sm.Committed {
				t.Fatalf("effects: %+v, %v", effects, err)
			}

			undo := exec.Command(testbin.Undolog(t), "undo", "kv-1", "--yes")
			undo.Env = h.env
			if out, err := undo.CombinedOutput(); err != nil {
				t.Fatalf("undo: %v\n%s", err, out)
			}
			if got := kv.value("colour"); got != "blue" {
				t.Fatalf("after undo the value is %q, want blue (as captured)", got)
			}
			// undo's own client speaks the newest version the server does.
			want := []string{tc.want}
			if tc.want != "2026-07-28" {
				want = append(want, "2026-07-28")
			}
			got := kv.spoken()
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("the server was spoken to in %q, want %q", got, want)
			}
			d, err := store.GetEffect(t.Context(), effects[0].ID)
			if err != nil || d.History[0].Actor != "mcp:agent-"+tc.clientVersion {
				t.Fatalf("the log names the client %q, want %q (%v)", d.History[0].Actor, "mcp:agent-"+tc.clientVersion, err)
			}
		})
	}
}
