package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPUpstreamSpeaks2026: requests that name 2026-07-28 in their _meta
// reach a Go SDK server that speaks only that version (stateless) with the
// headers it wants, taken from each message: discovery, a tools/call (its
// Mcp-Name the tool's), a resources/read (the URI), and a tools/call of a
// tool whose arguments go in headers too, as the tool list said (base64
// for a value a header cannot carry as it is); without them the server
// answers HTTP 400 and -32020.
func TestHTTPUpstreamSpeaks2026(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "new-only", Version: "1"},
		&mcp.ServerOptions{SupportedProtocolVersions: []string{StatelessVersion}})
	type echoArgs struct {
		Say string `json:"say"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + a.Say}}}, nil, nil
	})
	server.AddResource(&mcp.Resource{URI: "test://note", Name: "note"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://note", Text: "a note"}}}, nil
	})
	// place's arguments go in headers too (x-mcp-header), which the
	// connection learns from a tool list.
	placeSchema := map[string]any{"type": "object", "properties": map[string]any{
		"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
		"spec": map[string]any{"type": "object", "properties": map[string]any{
			"count": map[string]any{"type": "integer", "x-mcp-header": "Count"},
			"dry":   map[string]any{"type": "boolean", "x-mcp-header": "Dry"},
		}},
	}}
	server.AddTool(&mcp.Tool{Name: "place", InputSchema: placeSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		h := req.Extra.Header
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "placed " + h.Get("Mcp-Param-Region") + " " + h.Get("Mcp-Param-Count") + " " + h.Get("Mcp-Param-Dry")}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	var lists atomic.Int32 // the tools/list requests the server got
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/list" {
			lists.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()

	c := DialHTTP(ts.URL, nil, nil)
	defer c.Close()
	meta := fmt.Sprintf(`"_meta":{%q:%q,%q:{"name":"tester","version":"1"},%q:{}}`, MetaProtocolVersion, StatelessVersion, MetaClientInfo, MetaClientCapabilities)
	for _, tc := range []struct{ msg, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`, "supportedVersions"},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{` + meta + `}}`, "place"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"say":"hi"},` + meta + `}}`, "echo hi"},
		{`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"test://note",` + meta + `}}`, "a note"},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"place","arguments":{"region":"île","spec":{"count":3,"dry":false}},` + meta + `}}`, "placed =?base64?w65sZQ==?= 3 false"},
	} {
		if err := c.Write([]byte(tc.msg)); err != nil {
			t.Fatal(err)
		}
		got := readWithin(t, c)
		if got["error"] != nil || !containsText(got["result"], tc.want) {
			t.Fatalf("%s\nanswered %v, want a result with %q", tc.msg, got, tc.want)
		}
	}
	if n := lists.Load(); n != 1 {
		t.Fatalf("the server got %d tool lists, want the client's only", n)
	}

	// A client that calls place without listing tools (over stdio, say):
	// the connection lists them first, once, its answer passed to no one.
	c2 := DialHTTP(ts.URL, nil, nil)
	defer c2.Close()
	for id := range 2 {
		c2.Write([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"place","arguments":{"region":"north","spec":{"count":-2}},%s}}`, id, meta)))
		if got := readWithin(t, c2); got["id"] != float64(id) || !containsText(got["result"], "placed north -2 ") {
			t.Fatalf("a call of place before any list: %v", got)
		}
	}
	if n := lists.Load(); n != 2 {
		t.Fatalf("the server got %d tool lists, want one more", n)
	}

	// A name no header can carry is an error answer (never sent), not a
	// lost one (in doubt).
	c2.Write([]byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"line\nbreak",` + meta + `}}`))
	got := readWithin(t, c2)
	if e, _ := got["error"].(map[string]any); got["id"] != 9.0 || e == nil || !strings.HasSuffix(fmt.Sprint(e["message"]), `: the Mcp-Name header cannot carry "line\nbreak", as 2026-07-28 asks`) {
		t.Fatalf("a name with a line break: %v", got)
	}
}

func containsText(v any, want string) bool {
	switch v := v.(type) {
	case string:
		return v == want
	case map[string]any:
		for k, e := range v {
			if k == want || containsText(e, want) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if containsText(e, want) {
				return true
			}
		}
	}
	return false
}

// A server may ask a client's user by a form when its capabilities declare
// elicitation empty (a form, before 2025-11-25) or with form.
func TestFormElicitation(t *testing.T) {
	for caps, want := range map[string]bool{
		``: false, `{}`: false, `{"roots":{}}`: false, `{"elicitation":null}`: false,
		`{"elicitation":{}}`: true, `{"elicitation":{"form":{}}}`: true, `{"elicitation":{"form":{},"url":{}}}`: true,
		`{"elicitation":{"url":{}}}`: false, `not json`: false,
	} {
		if got := FormElicitation(json.RawMessage(caps)); got != want {
			t.Errorf("%s: %v, want %v", caps, got, want)
		}
	}
	meta, ok := ReadRequestMeta(json.RawMessage(`{"_meta":{"` + MetaProtocolVersion + `":"2026-07-28","` + MetaClientCapabilities + `":{"elicitation":{"form":{}}}}}`))
	if !ok || !meta.FormElicitation {
		t.Errorf("%+v", meta)
	}
}

// TestHTTPUpstreamCancelsUnder2026: under 2026-07-28 a client's
// notifications/cancelled for a request in flight closes that request's
// POST, which is how that version cancels over HTTP (a Go SDK v1.8.0
// stateless server ends the call's handler), and is not sent itself; the
// answer, which will not come, is lost (the server may have acted). Any
// other notification goes with the headers the version asks for, and the
// server takes it (202).
func TestHTTPUpstreamCancelsUnder2026(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "new-only", Version: "1"},
		&mcp.ServerOptions{SupportedProtocolVersions: []string{StatelessVersion}})
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	server.AddTool(&mcp.Tool{Name: "block", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			ended <- ctx.Err()
		case <-time.After(20 * time.Second):
			ended <- nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	// The server ends a call's handler when its POST closes.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	var mu sync.Mutex
	var notes []string // each notification POST: its method, headers and the server's status
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		id, method, _ := Peek(body)
		if len(id) > 0 || method == "" {
			h.ServeHTTP(w, r)
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		mu.Lock()
		notes = append(notes, fmt.Sprintf("%s version=%s method=%s session=%s: %d", method, r.Header.Get("Mcp-Protocol-Version"),
			r.Header.Get("Mcp-Method"), r.Header.Get("Mcp-Session-Id"), rec.status))
		mu.Unlock()
	}))
	defer ts.Close()

	c := DialHTTP(ts.URL, nil, nil)
	defer c.Close()
	meta := fmt.Sprintf(`"_meta":{%q:%q,%q:{"name":"tester","version":"1"},%q:{}}`, MetaProtocolVersion, StatelessVersion, MetaClientInfo, MetaClientCapabilities)
	c.Write([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{` + meta + `}}`))
	readWithin(t, c)
	c.Write([]byte(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"block","arguments":{},` + meta + `}}`))
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not reach the server")
	}
	if err := c.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call-1","reason":"user"}}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the server's handler was not cancelled: the POST stayed open")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's handler was not cancelled")
	}
	read := make(chan error, 1)
	go func() {
		_, err := c.Read()
		read <- err
	}()
	select {
	case err := <-read:
		var lost *LostError
		if !errors.As(err, &lost) || string(lost.ID) != `"call-1"` || !strings.Contains(lost.Reason, "cancelled") {
			t.Fatalf("after the cancel, read %v; want the answer to call-1 lost, cancelled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call's answer was not reported lost")
	}

	// A notification under 2026 (here one naming no request in flight)
	// carries the version and method headers, and no session.
	c.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"gone"}}`))
	mu.Lock()
	defer mu.Unlock()
	want := "notifications/cancelled version=" + StatelessVersion + " method=notifications/cancelled session=: 202"
	if strings.Join(notes, "\n") != want {
		t.Fatalf("notifications the server got:\n%s\nwant only\n%s", strings.Join(notes, "\n"), want)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}
