package proxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
)

// stdioClient is a raw client of `undolog proxy ARGS...` over its stdin and
// stdout: it sends what no SDK would.
type stdioClient struct {
	t     *testing.T
	in    io.WriteCloser
	lines chan []byte
}

func startStdioClient(t *testing.T, h *harness, args ...string) *stdioClient {
	t.Helper()
	cmd := exec.Command(testbin.Undolog(t), append([]string{"proxy"}, args...)...)
	cmd.Env = append(h.env, "REMOTE_AUTH="+remoteToken)
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	c := &stdioClient{t: t, lines: make(chan []byte, 100)}
	c.in, _ = cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.in.Close(); cmd.Wait() })
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	c.send(rawInitialize)
	if m := c.next(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

func (c *stdioClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// next is the proxy's next message to the client; none within 20 s fails.
func (c *stdioClient) next() map[string]any {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatal("the proxy closed its output")
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			c.t.Fatalf("the proxy wrote %q", line)
		}
		return m
	case <-time.After(20 * time.Second):
		c.t.Fatal("no answer in 20 s")
	}
	return nil
}

// readTwoWays are tools/call messages (a %d for the id) that a server
// matching keys exactly (the npm memory server) reads otherwise than a
// reader that folds case or keeps the first of two keys, each with the key
// the refusal names. Read Go's way, the first ones are the safe read_graph,
// or create_entities with decoy arguments, while the server would delete
// alice or create bob.
var readTwoWays = []struct{ msg, key string }{
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"delete_entities","NAME":"read_graph","arguments":{"entityNames":["alice"]}}}`, `"NAME"`},
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"delete_entities","nAmE":"read_graph","arguments":{"entityNames":["alice"]}}}`, `"nAmE"`},
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"Name":"read_graph","name":"delete_entities","arguments":{"entityNames":["alice"]}}}`, `"Name"`},
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"delete_entities","name":"read_graph","arguments":{"entityNames":["alice"]}}}`, `"name"`},
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"NAME":"delete_entities","arguments":{"entityNames":["alice"]}}}`, `"NAME"`},
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"name":"bob","entityType":"person","observations":[]}]},"Arguments":{"entities":[{"name":"carol","entityType":"person","observations":[]}]}}}`, `"Arguments"`},
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"name":"bob","entityType":"person","observations":[]}]},"argumentſ":{"entities":[{"name":"carol","entityType":"person","observations":[]}]}}}`, `"argumentſ"`},
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"create_entities","Arguments":{"entities":[{"name":"bob","entityType":"person","observations":[]}]}}}`, `"Arguments"`},
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"name":"bob","entityType":"person","observations":[]}],"entities":[]}}}`, `"entities"`},
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","METHOD":"tools/list","params":{"name":"delete_entities","arguments":{"entityNames":["alice"]}}}`, `"METHOD"`},
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","method":"tools/call","params":{"name":"delete_entities","arguments":{"entityNames":["alice"]}}}`, `"method"`},
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","Params":{"name":"read_graph","arguments":{}},"params":{"name":"delete_entities","arguments":{"entityNames":["alice"]}}}`, `"Params"`},
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"delete_entities","arguments":{"entityNames":["alice"]},"_meta":{"k":1,"\u212a":2}}}`, "\"\u212a\""}, // U+212A, the Kelvin sign
	{`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"delete_entities","arguments":{"entityNames":["alice"]},"_meta":{"progressToken":1,"progressToken":2}}}`, `"progressToken"`},
}

// TestProxyReadsEachClientMessageOneWay: over stdio, in front of the real
// memory server, a tools/call the server would read otherwise than the
// proxy (a key twice, or two keys one but for case, ASCII or ſ or K) is
// refused with a JSON-RPC error naming the key; the server runs none of
// them (alice stays, bob and carol are never made) and the log holds only
// the call made plainly.
func TestProxyReadsEachClientMessageOneWay(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	c := startStdioClient(t, h, "--session", "one-way", "--policy", h.policy, "--", memoryServer(t))
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"name":"alice","entityType":"person","observations":[]}]}}}`)
	if m := c.next(); m["id"] != 2.0 || m["result"] == nil {
		t.Fatalf("create alice: %v", m)
	}
	for i, v := range readTwoWays {
		id := 10 + i
		c.send(fmt.Sprintf(v.msg, id))
		m := c.next()
		e, _ := m["error"].(map[string]any)
		code, _ := e["code"].(float64)
		if e == nil || code != -32600 && code != -32602 || !strings.Contains(fmt.Sprint(e["message"]), v.key) {
			t.Fatalf("%s: %v", v.msg, m)
		}
		if m["id"] != float64(id) {
			t.Fatalf("%s: answered with id %v", v.msg, m["id"])
		}
	}
	// The id itself read two ways: answered with id null (which is it?).
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":30,"ID":31,"method":"tools/call","params":{"name":"delete_entities","arguments":{"entityNames":["alice"]}}}`,
		`{"jsonrpc":"2.0","id":32,"id":33,"method":"tools/call","params":{"name":"delete_entities","arguments":{"entityNames":["alice"]}}}`,
		`{"jsonrpc":"2.0","ID":34,"method":"tools/call","params":{"name":"delete_entities","arguments":{"entityNames":["alice"]}}}`,
	} {
		c.send(msg)
		if m := c.next(); m["id"] != nil || !strings.Contains(fmt.Sprint(m["error"]), "-32600") {
			t.Fatalf("%s: %v", msg, m)
		}
	}
	c.send(`{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"read_graph","arguments":{}}}`)
	m := c.next()
	got := fmt.Sprint(m["result"])
	if m["id"] != 40.0 || !strings.Contains(got, "alice") || strings.Contains(got, "bob") || strings.Contains(got, "carol") {
		t.Fatalf("the graph after the refusals: %v", m)
	}
	if got := states(t, store, "one-way"); got != "1:create_entities:committed" {
		t.Fatalf("logged %s", got)
	}
}

// TestProxyListenReadsEachClientMessageOneWay: the same over --listen,
// each refused on its own POST.
func TestProxyListenReadsEachClientMessageOneWay(t *testing.T) {
	h := newHarness(t)
	url, _, _ := listening(t, h, "--policy", h.policy, "--", memoryServer(t))
	_, sid, _ := postMCP(t, url, "", initializeLine)
	if sid == "" {
		t.Fatal("no session")
	}
	if status, _, body := postMCP(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != 202 {
		t.Fatalf("initialized: %d %s", status, body)
	}
	if status, _, body := postMCP(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"name":"alice","entityType":"person","observations":[]}]}}}`); status != 200 || !strings.Contains(body, "alice") {
		t.Fatalf("create alice: %d %s", status, body)
	}
	for i, v := range readTwoWays {
		status, _, body := postMCP(t, url, sid, fmt.Sprintf(v.msg, 10+i))
		var m map[string]any
		json.Unmarshal([]byte(sseData(body)), &m)
		if status != 400 && status != 200 || m["error"] == nil || !strings.Contains(fmt.Sprint(m["error"]), v.key) || m["id"] != float64(10+i) {
			t.Fatalf("%s: %d %s", v.msg, status, body)
		}
	}
	status, _, body := postMCP(t, url, sid, `{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"read_graph","arguments":{}}}`)
	if status != 200 || !strings.Contains(body, "alice") || strings.Contains(body, "bob") || strings.Contains(body, "carol") {
		t.Fatalf("the graph after the refusals: %d %s", status, body)
	}
	list := h.cli("list")
	if strings.Count(list, "create_entities") != 1 || strings.Contains(list, "delete_entities") {
		t.Fatalf("logged:\n%s", list)
	}
}

// TestProxyToAnHTTPServerReadsEachMessageOneWay: in front of a server over
// --url (the Go SDK's, which matches keys exactly), put read as the safe
// remove is refused, and the server puts nothing.
func TestProxyToAnHTTPServerReadsEachMessageOneWay(t *testing.T) {
	h := newHarness(t)
	r := newRemote(t)
	policy := filepath.Join(h.dir, "remote.yaml")
	os.WriteFile(policy, []byte(remotePolicy), 0o644)
	c := startStdioClient(t, h, "--session", "remote-one-way", "--policy", policy, "--url", r.url, "--header", "Authorization=REMOTE_AUTH")
	for i, msg := range []string{
		`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"put","NAME":"remove","arguments":{"name":"x"}}}`,
		`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"put","arguments":{"name":"x"},"ARGUMENTS":{"name":"y"}}}`,
	} {
		c.send(fmt.Sprintf(msg, 2+i))
		if m := c.next(); m["error"] == nil || m["id"] != float64(2+i) {
			t.Fatalf("%s: %v", msg, m)
		}
	}
	c.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"remove","arguments":{"name":"z"}}}`)
	if m := c.next(); m["result"] == nil {
		t.Fatalf("remove: %v", m)
	}
	if r.has("x") || r.has("y") {
		t.Fatal("the server put a name the proxy refused")
	}
	if list := h.cli("list"); strings.Contains(list, "put") {
		t.Fatalf("logged:\n%s", list)
	}
}

// sseData is the data of the one event of a text/event-stream body, or the
// body itself when it is JSON.
func sseData(body string) string {
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			return d
		}
	}
	return body
}

// readTwoTexts are tools/call messages (a %d for the id) that are not
// UTF-8, each with what the refusal names: Go reads each bad byte as
// U+FFFD and Node.js (the server) a whole bad sequence as one, so the
// server would read other text than the proxy classified (a safe call) or
// logged.
var readTwoTexts = []struct{ msg, says string }{
	{"{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":\"create_entities\",\"arguments\":{\"entities\":[{\"name\":\"cut\xe2\x82\",\"entityType\":\"person\",\"observations\":[]}]}}}", "not UTF-8"},
	{"{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":\"search_nodes\",\"arguments\":{\"query\":\"\xff\"}}}", "not UTF-8"},
}

// TestProxyReadsEachStringOneWay: over stdio and --listen, in front of the
// real memory server, a message not UTF-8 is refused with -32600 saying
// where; the server runs none of them (its
// graph gains no entity) and the log holds nothing.
func TestProxyReadsEachStringOneWay(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	c := startStdioClient(t, h, "--session", "texts", "--policy", h.policy, "--", memoryServer(t))
	for i, v := range readTwoTexts {
		id := 10 + i
		c.send(fmt.Sprintf(v.msg, id))
		m := c.next()
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != -32600.0 || !strings.Contains(fmt.Sprint(e["message"]), v.says) || m["id"] != float64(id) {
			t.Fatalf("%q: %v", v.msg, m)
		}
	}
	url, _, _ := listening(t, h, "--session", "texts-http", "--policy", h.policy, "--", memoryServer(t))
	_, sid, _ := postMCP(t, url, "", initializeLine)
	if status, _, body := postMCP(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != 202 {
		t.Fatalf("initialized: %d %s", status, body)
	}
	for i, v := range readTwoTexts {
		status, _, body := postMCP(t, url, sid, fmt.Sprintf(v.msg, 20+i))
		var m map[string]any
		json.Unmarshal([]byte(sseData(body)), &m)
		if status != 400 && status != 200 || !strings.Contains(fmt.Sprint(m["error"]), v.says) || m["id"] != float64(20+i) {
			t.Fatalf("%q over --listen: %d %s", v.msg, status, body)
		}
	}
	c.send(`{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"read_graph","arguments":{}}}`)
	if m := c.next(); m["id"] != 40.0 || !strings.Contains(fmt.Sprint(m["result"]), `entities:[]`) {
		t.Fatalf("the graph after the refusals: %v", m)
	}
	for _, session := range []string{"texts", "texts-http"} {
		if got := states(t, store, session); got != "" {
			t.Fatalf("session %s logged %s", session, got)
		}
	}
}

// TestProxyListenPassesAMessageOnManyLines: over --listen, a request
// pretty-printed on many lines (JSON all the same) reaches the real memory
// server, which reads its stdin a line a message, as one line: it is
// answered, and its call logged as done, rather than waiting for good.
func TestProxyListenPassesAMessageOnManyLines(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	url, _, _ := listening(t, h, "--session", "lines", "--policy", h.policy, "--", memoryServer(t))
	_, sid, _ := postMCP(t, url, "", initializeLine)
	if status, _, body := postMCP(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != 202 {
		t.Fatalf("initialized: %d %s", status, body)
	}
	for i, body := range []string{
		"{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 2,\n  \"method\": \"tools/call\",\n  \"params\": {\"name\": \"create_entities\", \"arguments\": {\"entities\": [{\"name\": \"alice\", \"entityType\": \"person\", \"observations\": [\"a\\nb\"]}]}}\n}",
		"{\"jsonrpc\":\"2.0\",\"id\":3,\r\"method\":\"tools/call\",\"params\":{\"name\":\"read_graph\",\"arguments\":{}}\r\n}",
	} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		client := &http.Client{Timeout: 20 * time.Second}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var m map[string]any
		json.Unmarshal([]byte(sseData(string(answer))), &m)
		if resp.StatusCode != 200 || m["id"] != float64(2+i) || !strings.Contains(fmt.Sprint(m["result"]), "alice") {
			t.Fatalf("%q: %d %s", body, resp.StatusCode, answer)
		}
	}
	if got := states(t, store, "lines"); got != "1:create_entities:committed" {
		t.Fatalf("logged %s", got)
	}
}

// droppedByTheServer are requests (a %d for the id) whose _meta the MCP SDK
// for JavaScript reads as no message at all: it answers nothing, and a
// client sent them on would wait for good (a logged call executing).
var droppedByTheServer = []string{
	`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"_meta":5}}`,
	`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_graph","arguments":{},"_meta":null}}`,
	`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_graph","arguments":{},"_meta":[]}}`,
	`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"name":"bob","entityType":"person","observations":[]}]},"_meta":{"progressToken":true}}}`,
	`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"name":"bob","entityType":"person","observations":[]}]},"_meta":{"progressToken":1.5}}}`,
	`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"name":"bob","entityType":"person","observations":[]}]},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":7}}}}`,
	`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/related-task":{"TaskId":"t"}}}}`,
}

// TestProxyAnswersWhatTheServerWouldDrop: over stdio and --listen, in
// front of the real memory server, each request it would drop unanswered
// for its _meta is answered by the proxy with -32602 naming the member, and
// none runs (bob is never made, nothing logged); a _meta it reads passes.
func TestProxyAnswersWhatTheServerWouldDrop(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	c := startStdioClient(t, h, "--session", "meta", "--policy", h.policy, "--", memoryServer(t))
	for i, msg := range droppedByTheServer {
		id := 10 + i
		c.send(fmt.Sprintf(msg, id))
		m := c.next()
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != -32602.0 || !strings.Contains(fmt.Sprint(e["message"]), "params._meta") || m["id"] != float64(id) {
			t.Fatalf("%s: %v", msg, m)
		}
	}
	url, _, _ := listening(t, h, "--session", "meta-http", "--policy", h.policy, "--", memoryServer(t))
	_, sid, _ := postMCP(t, url, "", initializeLine)
	if status, _, body := postMCP(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != 202 {
		t.Fatalf("initialized: %d %s", status, body)
	}
	for i, msg := range droppedByTheServer {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(fmt.Sprintf(msg, 20+i)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s over --listen: %v", msg, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var m map[string]any
		json.Unmarshal([]byte(sseData(string(body))), &m)
		if !strings.Contains(fmt.Sprint(m["error"]), "params._meta") || m["id"] != float64(20+i) {
			t.Fatalf("%s over --listen: %d %s", msg, resp.StatusCode, body)
		}
	}
	c.send(`{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"read_graph","arguments":{},"_meta":{"progressToken":"p","io.modelcontextprotocol/related-task":{"taskId":"t"}}}}`)
	if m := c.next(); m["id"] != 40.0 || !strings.Contains(fmt.Sprint(m["result"]), `entities:[]`) {
		t.Fatalf("the graph after the refusals: %v", m)
	}
	for _, session := range []string{"meta", "meta-http"} {
		if got := states(t, store, session); got != "" {
			t.Fatalf("session %s logged %s", session, got)
		}
	}
}

// TestProxyListenAnswersEveryRequestOfABatch: over --listen, on a session
// of a protocol version with batches, in front of the real memory server:
// a batch with a message refused is answered with one array holding an
// error for each of its requests (none waits for good) and none of it is
// passed on (bob is never made, nothing logged); a batch answered as JSON
// (the client accepts no event stream) is an array of the answers.
func TestProxyListenAnswersEveryRequestOfABatch(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	url, _, _ := listening(t, h, "--session", "batches", "--policy", h.policy, "--", memoryServer(t))
	_, sid, _ := postMCP(t, url, "", strings.Replace(initializeLine, "2025-06-18", "2025-03-26", 1))
	if status, _, body := postMCP(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != 202 {
		t.Fatalf("initialized: %d %s", status, body)
	}
	post := func(body string) []map[string]any {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var arr []map[string]any
		if err := json.Unmarshal(answer, &arr); err != nil {
			t.Fatalf("%s: want an array of answers, got %d %s", body, resp.StatusCode, answer)
		}
		return arr
	}
	byID := func(arr []map[string]any) map[float64]string {
		out := map[float64]string{}
		for _, m := range arr {
			id, _ := m["id"].(float64)
			out[id] = fmt.Sprint(m["error"], m["result"])
		}
		return out
	}
	for _, batch := range []string{
		`[{"jsonrpc":"2.0","id":2,"method":"tools/list"},{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_graph","NAME":"delete_entities","arguments":{}}}]`,
		`[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"name":"bob","entityType":"person","observations":[]}]}}},{"jsonrpc":"2.0","method":"notifications/x","params":{"a":1,"A":2}},{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":5}}]`,
	} {
		got := byID(post(batch))
		if len(got) != 2 || !strings.Contains(got[2], "-32600") || !strings.Contains(got[2], "batch was refused") || !strings.Contains(got[3], "-32602") {
			t.Fatalf("%s: %v", batch, got)
		}
	}
	got := byID(post(`[{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_graph","arguments":{}}},{"jsonrpc":"2.0","id":7,"method":"tools/list"}]`))
	if len(got) != 2 || !strings.Contains(got[6], "entities:[]") || !strings.Contains(got[7], "create_entities") {
		t.Fatalf("a batch answered as JSON: %v", got)
	}
	if got := states(t, store, "batches"); got != "" {
		t.Fatalf("logged %s", got)
	}
}
