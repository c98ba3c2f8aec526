package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	sm "github.com/undolog/undolog/statemachine"
)

// TestProxyURLCancelsByClosingThePOST: a Go SDK v1.8.0 client at
// 2026-07-28 cancels a logged call through `undolog proxy --url`; the proxy
// closes the call's POST to the Go SDK server (2026-07-28's cancellation
// over HTTP), whose handler ends, and sends no notifications/cancelled of
// its own. The effect stays executing, in doubt: the server may have acted.
func TestProxyURLCancelsByClosingThePOST(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	server.AddTool(&mcp.Tool{Name: "slow_write", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			ended <- ctx.Err()
		case <-time.After(20 * time.Second):
			ended <- nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote"}}}, nil
	})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	var mu sync.Mutex
	var cancels []string // the notifications/cancelled the server got, by their version header
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "notifications/cancelled" {
			mu.Lock()
			cancels = append(cancels, r.Header.Get("Mcp-Protocol-Version"))
			mu.Unlock()
		}
		handler.ServeHTTP(w, r)
	}))
	defer ts.Close()

	h, _ := cancelledThroughURL(t, ts.URL, started)
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the server's handler ran to its end: the proxy did not close its POST")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's handler was not cancelled")
	}
	store := logaddr.File(h.logPath, logaddr.Options{})
	if d, err := store.GetEffect(t.Context(), 1); err != nil || d.Effect.State != sm.Executing {
		t.Fatalf("effect 1: %s %v, want executing (in doubt)", d.Effect.State, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(cancels) != 0 {
		t.Fatalf("the server got notifications/cancelled (versions %q): under 2026-07-28 closing the POST is the cancellation", cancels)
	}
}

// TestProxyURLReSentCallAfterABrokenStreamIsReplayed: under 2026-07-28 a
// client whose stream broke (to the proxy, a cancellation) re-sends the
// call, there being no stream resumption. The server's answer, on its way
// within the cancel grace, is read and recorded, and the re-sent call is
// answered from the log: the server ran it once.
func TestProxyURLReSentCallAfterABrokenStreamIsReplayed(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	started := make(chan struct{}, 2)
	var mu sync.Mutex
	writes := 0
	server.AddTool(&mcp.Tool{Name: "slow_write", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		time.Sleep(time.Second) // past the client's hang-up, well within the grace
		mu.Lock()
		writes++
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote"}}}, nil
	})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	ts := httptest.NewServer(handler)
	defer ts.Close()

	h, s := cancelledThroughURL(t, ts.URL, started)
	store := logaddr.File(h.logPath, logaddr.Options{})
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		d, err := store.GetEffect(t.Context(), 1)
		if err == nil && d.Effect.State == sm.Committed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("effect 1: %s %v, want committed: the answer on its way was not recorded", d.Effect.State, err)
		}
	}
	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow_write", Arguments: map[string]any{}})
	if err != nil || res.IsError || text(res) != "wrote" {
		t.Fatalf("the re-sent call: %+v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if writes != 1 {
		t.Fatalf("the server wrote %d times, want once", writes)
	}
	if out := h.cli("list", "-o", "json"); strings.Count(out, `"state": "committed"`) != 1 || !strings.Contains(out, `"replay_of": 1`) {
		t.Fatalf("want effect 1 committed and the re-sent call its replay: %s", out)
	}
}

// cancelledThroughURL connects a Go SDK v1.8.0 client at 2026-07-28 through
// `undolog proxy --url` (slow_write compensable, session slow-1) to the
// server at url, calls slow_write, and cancels the call once the server's
// handler has it (started); the call must end unanswered.
func cancelledThroughURL(t *testing.T, url string, started <-chan struct{}) (*harness, *mcp.ClientSession) {
	t.Helper()
	h := newHarness(t)
	policy := filepath.Join(h.dir, "slow.yaml")
	if err := os.WriteFile(policy, []byte("tools:\n  slow_write: {tier: compensable}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testbin.Undolog(t), "proxy", "--session", "slow-1", "--policy", policy, "--url", url)
	cmd.Env = h.env
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	s, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: protocol2026})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	called := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "slow_write", Arguments: map[string]any{}})
		called <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not reach the server")
	}
	cancel() // to 2026-07-28 over HTTP, a cancellation and a broken stream are one
	if err := <-called; err == nil {
		t.Fatal("the cancelled call was answered")
	}
	return h, s
}
