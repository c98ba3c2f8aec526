package mcpclient_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/mcpclient"
)

// TestMain lets the test binary act as a small fake MCP server when
// UNDOLOG_FAKE_SERVER is set.
func TestMain(m *testing.M) {
	testbin.QuickRaceExit()
	if os.Getenv("UNDOLOG_FAKE_SERVER") != "" {
		fakeServer()
		return
	}
	os.Exit(m.Run())
}

// fakeServer answers initialize, tools/list (in two pages: echo, then fail)
// and tools/call; the tool "fail" answers with a tool error, "ask" has the
// server ask the client a ping and a sampling request first and answers with
// what came back, "hang" is never answered, and "report" answers with the
// id of the last "hang" call and the request ids the client cancelled.
func fakeServer() {
	sc := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	send := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	reply := func(id json.RawMessage, result string) {
		send(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
	}
	text := func(id json.RawMessage, s string) {
		b, _ := json.Marshal(s)
		reply(id, `{"content":[{"type":"text","text":`+string(b)+`}]}`)
	}
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
		Args   json.RawMessage `json:"-"`
		Params struct {
			Arguments json.RawMessage `json:"arguments"`
			Name      string          `json:"name"`
			Cursor    string          `json:"cursor"`
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	var hung string
	var cancelled []string
	mode := os.Getenv("UNDOLOG_FAKE_SERVER")
	var discover json.RawMessage
	if mode == "late-2026" {
		time.Sleep(2 * discoverHedge) // a server slow to start
	}
	for sc.Scan() {
		var m message
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		m.Args = m.Params.Arguments
		if m.Method == "notifications/cancelled" {
			cancelled = append(cancelled, string(m.Params.RequestID))
		}
		if len(m.ID) == 0 || m.Method == "" {
			continue // notifications
		}
		switch {
		case m.Method == "server/discover" && mode == "silent-discover":
			continue // an older server that answers no unknown request
		case m.Method == "server/discover" && mode == "late-2026":
			discover = m.ID // answered after the initialize that went beside it
			continue
		case m.Method == "initialize" && mode == "late-2026":
			send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"initialize is not supported in the new protocol"}}`, m.ID)
			if discover != nil {
				reply(discover, `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`)
			}
			continue
		}
		switch m.Method {
		case "initialize":
			reply(m.ID, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`)
		case "tools/list":
			switch {
			case os.Getenv("UNDOLOG_FAKE_SERVER") == "loop":
				reply(m.ID, `{"tools":[],"nextCursor":"again"}`)
			case os.Getenv("UNDOLOG_FAKE_SERVER") == "endless":
				reply(m.ID, `{"tools":[],"nextCursor":"c`+m.Params.Cursor+`"}`)
			case m.Params.Cursor == "":
				reply(m.ID, `{"tools":[{"name":"echo","description":"says ok","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":false}}],"nextCursor":"page-2"}`)
			case m.Params.Cursor == "page-2":
				reply(m.ID, `{"tools":[{"name":"fail","inputSchema":{"type":"object"}}]}`)
			default:
				send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"bad cursor"}}`, m.ID)
			}
		case "tools/call":
			switch m.Params.Name {
			case "fail":
				reply(m.ID, `{"content":[{"type":"text","text":"it broke"}],"isError":true}`)
			case "ask":
				send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"asking"}}`)
				send(`{"jsonrpc":"2.0","id":"s1","method":"ping"}`)
				send(`{"jsonrpc":"2.0","id":"s2","method":"sampling/createMessage","params":{}}`)
				got := map[string]string{}
				for len(got) < 2 && sc.Scan() {
					var a message
					if json.Unmarshal(sc.Bytes(), &a) != nil || a.Method != "" {
						continue
					}
					if a.Error != nil {
						got[string(a.ID)] = fmt.Sprintf("error %d", a.Error.Code)
					} else {
						got[string(a.ID)] = "result " + string(a.Result)
					}
				}
				text(m.ID, fmt.Sprintf("ping: %s; sampling: %s", got[`"s1"`], got[`"s2"`]))
			case "hang":
				hung = string(m.ID)
			case "respell": // the id written back as a double: 7 as 7.0
				reply(json.RawMessage(string(m.ID)+".0"), `{"content":[{"type":"text","text":"respelled"}]}`)
			case "die":
				os.Exit(3)
			case "report":
				text(m.ID, fmt.Sprintf("hung %s, cancelled %v", hung, cancelled))
			case "odd": // an answer that says neither success nor failure
				var args struct{ Answer string }
				json.Unmarshal(m.Args, &args)
				send(strings.ReplaceAll(args.Answer, "ID", string(m.ID)))
			default:
				text(m.ID, "ok")
			}
		default:
			send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`, m.ID)
		}
	}
}

func dialFake(t *testing.T) *mcpclient.Client { return dialMode(t, "1") }

// dialLoop's server answers every tools/list with the same cursor.
func dialLoop(t *testing.T) *mcpclient.Client { return dialMode(t, "loop") }

func dialMode(t *testing.T, mode string) *mcpclient.Client {
	t.Helper()
	t.Setenv("UNDOLOG_FAKE_SERVER", mode)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Dial(ctx, []string{os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// discoverHedge is mcpclient's wait before initialize goes beside an
// unanswered server/discover.
const discoverHedge = time.Second

// TestDialAServerThatAnswersNoDiscover: a server of an older version that
// leaves server/discover unanswered is initialized after the hedge, not
// after the discover's whole bound (10 s); one slow to start that speaks
// only 2026-07-28 is still discovered, though initialize went beside it
// and was refused first.
func TestDialAServerThatAnswersNoDiscover(t *testing.T) {
	start := time.Now()
	c := dialMode(t, "silent-discover")
	if took := time.Since(start); took > 4*discoverHedge || c.ProtocolVersion != "2025-06-18" {
		t.Fatalf("connected in %s at %q, want within %s at 2025-06-18", took, c.ProtocolVersion, 4*discoverHedge)
	}
	if got, err := c.CallTool(t.Context(), "echo", nil); err != nil || mcpclient.ResultText(got) != "ok" {
		t.Fatalf("a call: %s, %v", got, err)
	}
	late := dialMode(t, "late-2026")
	if late.ProtocolVersion != "2026-07-28" {
		t.Fatalf("a server slow to start that speaks 2026-07-28 was spoken to at %q", late.ProtocolVersion)
	}
	if got, err := late.CallTool(t.Context(), "echo", nil); err != nil || mcpclient.ResultText(got) != "ok" {
		t.Fatalf("a call at 2026-07-28: %s, %v", got, err)
	}
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
	// Both pages: the second asked for with the first's cursor.
	if len(tools) != 2 || tools[0].Name != "echo" || tools[1].Name != "fail" {
		t.Fatalf("tools: %+v", tools)
	}
	a := tools[0].Annotations
	if a == nil || !a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint || tools[0].Description != "says ok" || string(tools[0].InputSchema) != `{"type":"object"}` || tools[1].Annotations != nil {
		t.Fatalf("tools[0]: %+v %+v", tools[0], a)
	}
	if c.ProtocolVersion != "2025-06-18" {
		t.Fatalf("protocol version %q: want the server's answer", c.ProtocolVersion)
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

// TestServerRequests: the server's ping is answered with an empty result,
// a request the client offers nothing for with "method not found", and a
// notification is dropped; the call waiting meanwhile gets its answer.
func TestServerRequests(t *testing.T) {
	c := dialFake(t)
	out, err := c.CallTool(context.Background(), "ask", nil)
	if err != nil || mcpclient.ResultText(out) != "ping: result {}; sampling: error -32601" {
		t.Fatalf("ask: %s, %v", out, err)
	}
}

// TestCallCancelled: a call whose context ends returns its error, and the
// server is told (notifications/cancelled with the call's id); the session
// goes on.
func TestCallCancelled(t *testing.T) {
	c := dialFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, "hang", nil)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("hang: %v, want context.Canceled", err)
	}
	out, err := c.CallTool(context.Background(), "report", nil)
	text := mcpclient.ResultText(out)
	if m := regexp.MustCompile(`^hung (\S+), cancelled \[(\S+)\]$`).FindStringSubmatch(text); err != nil || m == nil || m[1] != m[2] {
		t.Fatalf("report: %q, %v: want the hung call's id cancelled", text, err)
	}
}

// TestToolsRepeatedCursor: a server that hands out the same cursor again
// is an error, not a loop.
func TestToolsRepeatedCursor(t *testing.T) {
	c := dialLoop(t)
	if _, err := c.Tools(context.Background()); err == nil || !strings.Contains(err.Error(), `repeated the cursor "again"`) {
		t.Fatalf("Tools: %v", err)
	}
}

// TestToolsEndlessCursors: a server handing out new cursors for good is not
// followed for good.
func TestToolsEndlessCursors(t *testing.T) {
	c := dialMode(t, "endless")
	if _, err := c.Tools(context.Background()); err == nil || !strings.Contains(err.Error(), "over 1000 pages") {
		t.Fatalf("Tools: %v", err)
	}
}

// TestAnswersByValueAndNoAnswer: an answer whose id the server wrote its own
// way (7 as 7.0) finds its call; a call sent to a server that then dies got
// no answer, which may mean it ran (ErrNoAnswer).
func TestAnswersByValueAndNoAnswer(t *testing.T) {
	c := dialFake(t)
	if res, err := c.CallTool(context.Background(), "respell", json.RawMessage(`{}`)); err != nil || !strings.Contains(string(res), "respelled") {
		t.Fatalf("respell: %s %v", res, err)
	}
	if _, err := c.CallTool(context.Background(), "die", json.RawMessage(`{}`)); !errors.Is(err, mcpclient.ErrNoAnswer) {
		t.Fatalf("a call the server died on: %v, want ErrNoAnswer", err)
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

// An answer that is neither a tool result nor a well-formed error says
// neither that the call was done nor that it failed: ErrUnreadableAnswer (a
// compensation so answered is in doubt, not retried); a tool error and a
// JSON-RPC error are failures; a tool result is success.
func TestAnswersThatSayNeither(t *testing.T) {
	c := dialFake(t)
	for _, answer := range []string{
		`{"jsonrpc":"2.0","id":ID,"result":null}`,
		`{"jsonrpc":"2.0","id":ID,"result":[1,2]}`,
		`{"jsonrpc":"2.0","id":ID,"result":"done"}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":"true"}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"task":{"taskId":"t1","status":"working"}}}`,
		`{"jsonrpc":"2.0","id":ID}`,
		`{"id":ID,"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":ID,"error":"it broke"}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[]},"error":{"code":1,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"content":"zz"}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"content":null}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":null}}`,
		`{"jsonrpc":"2.0","id":ID,"error":{}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[],"task":{"taskId":"t"}}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"resultType":"task","content":[]}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"isError":true,"task":{"taskId":"t"}}}`,
	} {
		args, _ := json.Marshal(map[string]string{"answer": answer})
		_, err := c.CallTool(context.Background(), "odd", args)
		if !errors.Is(err, mcpclient.ErrUnreadableAnswer) || errors.Is(err, mcpclient.ErrNoAnswer) {
			t.Errorf("%s: %v, want ErrUnreadableAnswer", answer, err)
		}
	}
	for answer, want := range map[string]string{
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":true}}`:             "failed",
		`{"jsonrpc":"2.0","id":ID,"error":{"code":-32000,"message":"refused"}}`:        "failed",
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"ok"}]}}`: "done",
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":false}}`:            "done",
		`{"jsonrpc":"2.0","id":ID,"result":{"isError":true}}`:                          "failed",
		`{"jsonrpc":"2.0","id":ID,"result":{"structuredContent":{"ok":1}}}`:            "done",
		// An error the server could give no id (it could not read the
		// request): the one call waiting failed, at once.
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`: "failed",
	} {
		args, _ := json.Marshal(map[string]string{"answer": answer})
		_, err := c.CallTool(context.Background(), "odd", args)
		got := "done"
		if err != nil {
			got = "failed"
		}
		if got != want || errors.Is(err, mcpclient.ErrUnreadableAnswer) || errors.Is(err, mcpclient.ErrNoAnswer) {
			t.Errorf("%s: %v, want %s", answer, err, want)
		}
	}
}

// TestAnswerReadTwoWaysSaysNeither: an answer whose keys a reader that
// matches them exactly (the MCP SDK for JavaScript: the last of two) and
// one that folds case (encoding/json) read otherwise says neither that the
// call was done nor that it failed: ErrUnreadableAnswer, so a compensation
// so answered is in doubt, never recorded as done when the server's answer,
// read as sent, is a failure.
func TestAnswerReadTwoWaysSaysNeither(t *testing.T) {
	c := dialFake(t)
	for _, answer := range []string{
		// Read exactly: a tool error; folded, the last "Result": done.
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":true},"Result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":true},"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":ID,"error":{"code":-32000,"message":"refused"},"ERROR":null,"Result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":true,"isError":false}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[],"isError":true,"IsError":false}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[],"iſError":false,"isError":true}}`,
		`{"jsonrpc":"2.0","id":ID,"result":{"content":[]},"Error":{"code":-32000,"message":"refused"}}`,
		// Whose answer it is is unclear: the call waiting is in doubt.
		`{"jsonrpc":"2.0","Id":ID,"result":{"content":[]}}`,
	} {
		args, _ := json.Marshal(map[string]string{"answer": answer})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.CallTool(ctx, "odd", args)
		cancel()
		if !errors.Is(err, mcpclient.ErrUnreadableAnswer) {
			t.Errorf("%s: %v, want ErrUnreadableAnswer", answer, err)
		}
	}
	// Keys one but for case inside what a tool returns are its data.
	answer := `{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"ok"}],"structuredContent":{"a":1,"A":2}}}`
	args, _ := json.Marshal(map[string]string{"answer": answer})
	if _, err := c.CallTool(context.Background(), "odd", args); err != nil {
		t.Errorf("%s: %v, want done", answer, err)
	}
}
