package proxy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// malformed are client messages no server answers (the MCP SDK for
// JavaScript reads none of them as a request), each with the id the
// proxy's -32600 answer has (nil: null).
var malformed = []struct {
	msg string
	id  any
}{
	{`{"jsonrpc":"2.0","id":50}`, 50.0}, // an id, no method: neither request nor response
	{`{"jsonrpc":"2.0","id":51,"result":{},"error":{"code":1,"message":"x"}}`, 51.0},
	{`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil},
	{`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil},
	{`{"jsonrpc":"2.0","id":9007199254740992,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil},
	{`{"jsonrpc":"2.0","id":52,"method":"tools/call","params":{"name":"echo","arguments":{}},"extra":1}`, 52.0},
	{`{"id":53,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, 53.0},
	{`{"jsonrpc":"1.0","id":54,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, 54.0},
	{`{"jsonrpc":2.0,"id":55,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, 55.0},
	{`{"jsonrpc":"2.0","id":56,"method":5}`, 56.0},
	{`{"jsonrpc":"2.0","id":57,"method":""}`, 57.0},
	{`{"jsonrpc":"2.0","id":58,"method":"tools/list","params":"x"}`, 58.0},
	{`{"jsonrpc":"2.0","id":59,"method":"tools/list","params":null}`, 59.0},
	{`{"jsonrpc":"2.0","id":63,"method":"tools/list","params":[]}`, 63.0},
	{`{"jsonrpc":"2.0","id":60,"method":"tools/list","result":{}}`, 60.0},
	{`{"jsonrpc":"2.0"}`, nil},
	{`5`, nil},
	{`[]`, nil},
}

// TestProxyAnswersMalformedMessages: over stdio each gets a -32600 from
// the proxy, none is passed on (so none waits for good, and none is
// logged); a response to nothing the server asked and a tools/call
// notification are not passed on either.
func TestProxyAnswersMalformedMessages(t *testing.T) {
	h := newHarness(t)
	w := wire(t, h, "tools:\n  echo: {tier: compensable}\n")
	for _, c := range malformed {
		w.send(c.msg)
		m := w.next()
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != -32600.0 || m["id"] != c.id {
			t.Fatalf("%s: %v", c.msg, m)
		}
	}
	w.send(`{"jsonrpc":"2.0","id":61,"result":{}}`) // answers nothing the server asked
	w.send(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`)
	w.send(`{"jsonrpc":"2.0","id":62,"method":"tools/call","params":{"name":"echo","arguments":{"n":2}}}`)
	if m := w.next(); m["id"] != 62.0 || m["result"] == nil {
		t.Fatalf("a call after them: %v", m)
	}
	if list := h.cli("list"); strings.Count(list, "echo") != 1 {
		t.Fatalf("logged:\n%s", list)
	}
	for _, note := range []string{"a response to no request of the server's, id 61", "a tools/call without an id"} {
		if !strings.Contains(w.errText(), note) {
			t.Errorf("no note %q in:\n%s", note, w.errText())
		}
	}
}

// TestProxyListenAnswersMalformedMessages: the same over --listen, each
// answered on its POST (400), none delivered to wait. (A response or a
// notification is accepted, 202, as the transport has it, and then not
// passed on by the same rules.)
func TestProxyListenAnswersMalformedMessages(t *testing.T) {
	h := newHarness(t)
	h.env = append(h.env, "UNDOLOG_FAKE_SERVER=1")
	policy := filepath.Join(h.dir, "echo.yaml")
	os.WriteFile(policy, []byte("tools:\n  echo: {tier: compensable}\n"), 0o644)
	url, _, _ := listening(t, h, "--policy", policy, "--", os.Args[0])
	_, sid, _ := postMCP(t, url, "", initializeLine)
	for _, c := range malformed {
		status, _, body := postMCP(t, url, sid, c.msg)
		var m map[string]any
		json.Unmarshal([]byte(sseData(body)), &m)
		e, _ := m["error"].(map[string]any)
		if status != 400 || e == nil || e["code"] != -32600.0 || m["id"] != c.id {
			t.Fatalf("%s: %d %s", c.msg, status, body)
		}
	}
	if status, _, body := postMCP(t, url, sid, `{"jsonrpc":"2.0","id":62,"method":"tools/call","params":{"name":"echo","arguments":{"n":2}}}`); status != 200 || !strings.Contains(body, "result") {
		t.Fatalf("a call after them: %d %s", status, body)
	}
	if list := h.cli("list"); strings.Count(list, "echo") != 1 {
		t.Fatalf("logged:\n%s", list)
	}
}
