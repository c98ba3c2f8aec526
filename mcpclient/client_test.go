package mcpclient_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/mcpclient"
)

// TestMain lets the test binary act as a small fake MCP server when
// UNDOLOG_FAKE_SERVER is set.
func TestMain(m *testing.M) {
	if os.Getenv("UNDOLOG_FAKE_SERVER") != "" {
		fakeServer()
		return
	}
	os.Exit(m.Run())
}

// fakeServer answers initialize, tools/list and tools/call; the tool "fail"
// answers with a tool error, the others with "ok".
func fakeServer() {
	sc := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	reply := func(id json.RawMessage, result string) {
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id, result)
		out.Flush()
	}
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || len(m.ID) == 0 || m.Method == "" {
			continue // notifications
		}
		switch m.Method {
		case "initialize":
			reply(m.ID, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`)
		case "tools/list":
			reply(m.ID, `{"tools":[{"name":"echo","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},{"name":"fail","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			if m.Params.Name == "fail" {
				reply(m.ID, `{"content":[{"type":"text","text":"it broke"}],"isError":true}`)
				continue
			}
			reply(m.ID, `{"content":[{"type":"text","text":"ok"}]}`)
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`+"\n", m.ID)
			out.Flush()
		}
	}
}

func dialFake(t *testing.T) *mcpclient.Client {
	t.Helper()
	t.Setenv("UNDOLOG_FAKE_SERVER", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Dial(ctx, []string{os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestDialNeedsACommand(t *testing.T) {
	if _, err := mcpclient.Dial(context.Background(), nil); err == nil || err.Error() != "no MCP server command" {
		t.Fatalf("Dial(nil): %v", err)
	}
}

func TestDialAMissingCommandNamesIt(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-server")
	_, err := mcpclient.Dial(context.Background(), []string{missing, "--flag"})
	if err == nil || !strings.Contains(err.Error(), "connect to MCP server "+missing+" --flag") {
		t.Fatalf("Dial(missing): %v", err)
	}
}

func TestToolsAndCalls(t *testing.T) {
	c := dialFake(t)
	ctx := context.Background()
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || tools[0].Name != "echo" || tools[0].Annotations == nil || !tools[0].Annotations.ReadOnlyHint || tools[1].Name != "fail" {
		t.Fatalf("tools: %+v", tools)
	}
	out, err := c.CallTool(ctx, "echo", json.RawMessage(`{}`))
	if err != nil || mcpclient.ResultText(out) != "ok" {
		t.Fatalf("echo: %s, %v", out, err)
	}
	// A tool error is an error naming the tool and quoting it; the result
	// comes back too.
	out, err = c.CallTool(ctx, "fail", json.RawMessage(`{}`))
	if err == nil || err.Error() != "fail: it broke" || mcpclient.ResultText(out) != "it broke" {
		t.Fatalf("fail: %s, %v", out, err)
	}
}

func TestResultText(t *testing.T) {
	long := strings.Repeat("x", 400)
	for _, tc := range []struct{ result, want string }{
		{`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`, "ab"},
		{`{"content":[{"type":"text","text":"` + long + `"}]}`, long[:300] + "…"},
		{`not json`, ""},
	} {
		if got := mcpclient.ResultText(json.RawMessage(tc.result)); got != tc.want {
			t.Errorf("ResultText(%.40s) = %q, want %q", tc.result, got, tc.want)
		}
	}
}

// The real memory server, when installed: what policy init and undo's
// compensations talk to.
func TestMemoryServer(t *testing.T) {
	path := os.Getenv("UNDOLOG_MCP_MEMORY")
	if path == "" {
		if os.Getenv("UNDOLOG_REQUIRE_MCP") != "" {
			t.Fatal("UNDOLOG_MCP_MEMORY is not set but UNDOLOG_REQUIRE_MCP is")
		}
		t.Skip("UNDOLOG_MCP_MEMORY not set: the real MCP server is not installed")
	}
	t.Setenv("MEMORY_FILE_PATH", filepath.Join(t.TempDir(), "memory.jsonl"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := mcpclient.Dial(ctx, []string{path})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range tools {
		names[tool.Name] = true
	}
	if !names["create_entities"] || !names["delete_entities"] || !names["read_graph"] {
		t.Fatalf("tools: %v", names)
	}
	if _, err := c.CallTool(ctx, "create_entities", json.RawMessage(`{"entities":[{"name":"ada","entityType":"person","observations":[]}]}`)); err != nil {
		t.Fatal(err)
	}
	out, err := c.CallTool(ctx, "read_graph", json.RawMessage(`{}`))
	if err != nil || !strings.Contains(mcpclient.ResultText(out), `"ada"`) {
		t.Fatalf("read_graph: %s, %v", out, err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}
