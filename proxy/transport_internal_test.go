package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/engines"
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
	case <-time.After(30 * time.Second): // a guard against hanging, not a measure
		e.t.Fatal("the proxy wrote nothing for 30 s")
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
func inProcess(t *testing.T, policy string) (client, server *end, done chan error) {
	t.Helper()
	pol, err := ParsePolicy([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	cr, cw := io.Pipe() // client -> proxy
	pr, pw := io.Pipe() // proxy -> client
	ur, uw := io.Pipe() // proxy -> server
	sr, sw := io.Pipe() // server -> proxy
	p := &Proxy{Log: engines.File(filepath.Join(t.TempDir(), "u.db"), engines.Options{}), Session: "s", Policy: pol, ApprovalWait: time.Second}
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
