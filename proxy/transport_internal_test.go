package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/policy"
)

// end is a test's side of a pipe pair: it writes lines, reads messages.
type end struct {
	t     *testing.T
	w     io.WriteCloser
	lines chan []byte
}

func newEnd(t *testing.T, w io.WriteCloser, r io.Reader) *end {
	e := &end{t: t, w: w, lines: make(chan []byte, 16)}
	go func() {
		defer close(e.lines)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			e.lines <- line
		}
	}()
	return e
}

func (e *end) send(s string) {
	e.t.Helper()
	if _, err := io.WriteString(e.w, s+"\n"); err != nil {
		e.t.Fatal(err)
	}
}

// next reads one line: a JSON value.
func (e *end) next() any {
	e.t.Helper()
	var line []byte
	select {
	case l, ok := <-e.lines:
		if !ok {
			e.t.Fatal("the proxy closed its side")
		}
		line = l
	case <-time.After(2 * time.Minute): // a guard against hanging, not a measure (64 MiB under -race on a loaded machine takes a while)
		e.t.Fatal("the proxy wrote nothing for 2 minutes")
	}
	var v any
	if err := json.Unmarshal(line, &v); err != nil {
		e.t.Fatalf("not one JSON message: %q", line)
	}
	return v
}

func (e *end) nextObject() map[string]any {
	e.t.Helper()
	v := e.next()
	m, ok := v.(map[string]any)
	if !ok {
		e.t.Fatalf("want one message, got %v", v)
	}
	return m
}

// inProcess serves a proxy between two pipe pairs: the test is the client
// on one and the upstream server on the other. The proxy's Serve error is
// sent on done once the client side closes.
func inProcess(t *testing.T, policyYAML string) (client, server *end, done chan error) {
	t.Helper()
	pol, err := policy.ParsePolicy([]byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	cr, cw := io.Pipe() // client -> proxy
	pr, pw := io.Pipe() // proxy -> client
	ur, uw := io.Pipe() // proxy -> server
	sr, sw := io.Pipe() // server -> proxy
	p := &Proxy{Log: logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{}), Session: "s", Policy: pol, ApprovalWait: time.Second}
	done = make(chan error, 1)
	go func() {
		done <- p.Serve(context.Background(), NewStdioConn(cr, pw), NewStdioConn(sr, uw))
		pw.Close()
		sw.Close()
	}()
	t.Cleanup(func() { cw.Close(); ur.Close() })
	return newEnd(t, cw, pr), newEnd(t, sw, ur), done
}

func errCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// TestClientMessageOverTheLimit: a client message over 64 MiB gets an error
// answer with its id, is not passed on, and the proxy goes on serving.
func TestClientMessageOverTheLimit(t *testing.T) {
	client, server, _ := inProcess(t, "tools: {}\n")
	big := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write","arguments":{"data":"` + strings.Repeat("x", maxLine) + `"}}}`
	go client.send(big)
	m := client.nextObject()
	if m["id"] != 7.0 || errCode(m) != codeInvalidRequest || !strings.Contains(m["error"].(map[string]any)["message"].(string), "over 64 MiB") {
		t.Fatalf("the oversize request's answer: %v", m)
	}
	// A notification over the limit gets no answer; the next request is passed on.
	go func() {
		client.send(`{"jsonrpc":"2.0","method":"notifications/x","params":{"p":"` + strings.Repeat("y", maxLine) + `"}}`)
		client.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	}()
	if m := server.nextObject(); m["id"] != 8.0 || m["method"] != "ping" {
		t.Fatalf("the server got %v, not the ping after the oversize message", m)
	}
	server.send(`{"jsonrpc":"2.0","id":8,"result":{}}`)
	if m := client.nextObject(); m["id"] != 8.0 {
		t.Fatalf("ping after the oversize message: %v", m)
	}
}

// TestServerMessageOverTheLimit: an answer over 64 MiB from the server
// becomes an error for that id, and the proxy goes on.
func TestServerMessageOverTheLimit(t *testing.T) {
	client, server, _ := inProcess(t, "tools: {}\n")
	client.send(`{"jsonrpc":"2.0","id":"r1","method":"resources/read","params":{"uri":"big://"}}`)
	server.nextObject()
	go server.send(`{"jsonrpc":"2.0","id":"r1","result":{"contents":[{"text":"` + strings.Repeat("z", maxLine) + `"}]}}`)
	if m := client.nextObject(); m["id"] != "r1" || errCode(m) != codeInternal {
		t.Fatalf("the oversize answer: %v", m)
	}
	client.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	server.nextObject()
	server.send(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	if m := client.nextObject(); m["id"] != 2.0 {
		t.Fatalf("ping after: %v", m)
	}
}

func initialize(t *testing.T, client, server *end, version string) {
	t.Helper()
	client.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := server.nextObject(); m["method"] != "initialize" {
		t.Fatalf("server got %v", m)
	}
	server.send(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"` + version + `","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`)
	if m := client.nextObject(); m["id"] != 0.0 {
		t.Fatalf("initialize answer: %v", m)
	}
}

// TestBatchUnderAProtocolThatHasThem: under MCP 2025-03-26 a batch is taken
// apart (a tools/call in it goes through the policy: a safe one reaches the
// server, an unknown one is logged first), and the answers come back as one
// array; an empty batch is an invalid request.
func TestBatchUnderAProtocolThatHasThem(t *testing.T) {
	client, server, _ := inProcess(t, "tools:\n  look: {tier: safe}\n")
	initialize(t, client, server, "2025-03-26")
	client.send(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},` +
		`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"look","arguments":{}}},5]`)
	got := map[string]bool{}
	for range 3 {
		m := server.nextObject()
		got[fmt.Sprint(m["method"])] = true
		if id, ok := m["id"]; ok {
			server.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"echo":%q}}`, mustJSON(id), m["method"]))
		}
	}
	if !got["ping"] || !got["notifications/initialized"] || !got["tools/call"] {
		t.Fatalf("the server got %v", got)
	}
	v := client.next()
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("want an array of 3 answers (2 requests, 1 invalid element), got %v", v)
	}
	ids := map[any]bool{}
	for _, a := range arr {
		m := a.(map[string]any)
		ids[m["id"]] = true
		if m["id"] == nil && errCode(m) != codeInvalidRequest {
			t.Fatalf("the element 5: %v", m)
		}
	}
	if !ids[1.0] || !ids["b"] || !ids[nil] {
		t.Fatalf("answers %v", arr)
	}
	client.send(`[]`)
	if m := client.nextObject(); m["id"] != nil || errCode(m) != codeInvalidRequest {
		t.Fatalf("empty batch: %v", m)
	}
	client.send(`[{"jsonrpc":"2.0","method":"notifications/x"}]`)
	client.send(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	if m := server.nextObject(); m["method"] != "notifications/x" {
		t.Fatalf("a batch of one notification: %v", m)
	}
	if m := server.nextObject(); m["id"] != 9.0 {
		t.Fatalf("after it: %v", m)
	}
	server.send(`{"jsonrpc":"2.0","id":9,"result":{}}`)
	if m := client.nextObject(); m["id"] != 9.0 {
		t.Fatalf("a batch of notifications got an answer: %v", m)
	}

	// Two requests with one id (however spelled), and one nested deeper
	// than the decoder goes: all answered in the one array, each with its
	// id; only the first of the two reaches the server.
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	client.send(`[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","id":7.0,"method":"ping"},` +
		`{"jsonrpc":"2.0","method":"ping","params":` + deep + `,"id":"deep"}]`)
	if m := server.nextObject(); m["id"] != 7.0 {
		t.Fatalf("the server got %v", m)
	}
	server.send(`{"jsonrpc":"2.0","id":7,"result":{}}`)
	arr, ok = client.next().([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("want one array of 3 answers, got %v", arr)
	}
	codes := map[any]int{}
	for _, a := range arr {
		m := a.(map[string]any)
		codes[m["id"]]++
		if m["id"] == "deep" && errCode(m) != codeInvalidRequest {
			t.Fatalf("the deep element: %v", m)
		}
	}
	if codes[7.0] != 2 || codes["deep"] != 1 {
		t.Fatalf("answers %v", arr)
	}
}

// TestBatchUnderAProtocolWithout: from MCP 2025-06-18 on there are no
// batches: each request of one gets -32600 (valid JSON is never -32700),
// and nothing of it reaches the server.
func TestBatchUnderAProtocolWithout(t *testing.T) {
	for _, version := range []string{"2025-06-18", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			client, server, _ := inProcess(t, "tools:\n  look: {tier: safe}\n")
			initialize(t, client, server, version)
			client.send(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"look"}}]`)
			v := client.next()
			arr, ok := v.([]any)
			if !ok || len(arr) != 2 {
				t.Fatalf("want an error for each of the 2 requests, got %v", v)
			}
			for i, a := range arr {
				m := a.(map[string]any)
				if m["id"] != float64(i+1) || errCode(m) != codeInvalidRequest || !strings.Contains(m["error"].(map[string]any)["message"].(string), "batches are not part of MCP protocol version "+version) {
					t.Fatalf("answer %d: %v", i, m)
				}
			}
			client.send(`[{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
			if m := client.nextObject(); m["id"] != nil || errCode(m) != codeInvalidRequest {
				t.Fatalf("a batch of a notification: %v", m)
			}
			client.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
			if m := server.nextObject(); m["id"] != 3.0 {
				t.Fatalf("something of the batches reached the server: %v", m)
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestBatchElementsAreReadOneWay: an element of a batch the server would
// read otherwise than the proxy (a key one but for case, an id with no
// method) is answered in the batch's array, and only the others reach the
// server.
func TestBatchElementsAreReadOneWay(t *testing.T) {
	client, server, _ := inProcess(t, "tools:\n  look: {tier: safe}\n")
	initialize(t, client, server, "2025-03-26")
	client.send(`[{"jsonrpc":"2.0","id":1,"method":"ping"},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"look","NAME":"x","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":3}]`)
	if m := server.nextObject(); m["id"] != 1.0 || m["method"] != "ping" {
		t.Fatalf("the server got %v", m)
	}
	server.send(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	arr, ok := client.next().([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("want one array of 3 answers, got %v", arr)
	}
	for _, a := range arr {
		m := a.(map[string]any)
		switch m["id"] {
		case 1.0:
			if m["result"] == nil {
				t.Fatalf("ping: %v", m)
			}
		case 2.0:
			if errCode(m) != codeInvalidParams || !strings.Contains(fmt.Sprint(m["error"]), `"NAME"`) {
				t.Fatalf("the call read two ways: %v", m)
			}
		case 3.0:
			if errCode(m) != codeInvalidRequest {
				t.Fatalf("the id with no method: %v", m)
			}
		default:
			t.Fatalf("answers %v", arr)
		}
	}
	client.send(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	if m := server.nextObject(); m["id"] != 9.0 {
		t.Fatalf("after the batch the server got %v", m)
	}
}

// TestServerRequestReadTwoWaysIsRefused: a request of the server's that the
// client may read otherwise than the proxy ("method" and "METHOD") gets
// -32600 from the proxy and does not reach the client; a plain one does,
// and the client's answer to it reaches the server.
func TestServerRequestReadTwoWaysIsRefused(t *testing.T) {
	client, server, _ := inProcess(t, "tools: {}\n")
	initialize(t, client, server, "2025-11-25")
	server.send(`{"jsonrpc":"2.0","id":"s1","method":"ping","METHOD":"roots/list"}`)
	if m := server.nextObject(); m["id"] != "s1" || errCode(m) != codeInvalidRequest || !strings.Contains(fmt.Sprint(m["error"]), `"METHOD"`) {
		t.Fatalf("the server got %v", m)
	}
	server.send(`{"jsonrpc":"2.0","id":"s2","method":"ping"}`)
	if m := client.nextObject(); m["id"] != "s2" {
		t.Fatalf("the client got %v, not the plain request", m)
	}
	client.send(`{"jsonrpc":"2.0","id":"s2","result":{}}`)
	if m := server.nextObject(); m["id"] != "s2" || m["result"] == nil {
		t.Fatalf("the server got %v, not the client's answer", m)
	}
}
