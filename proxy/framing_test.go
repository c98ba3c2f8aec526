package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/undolog/undolog/logaddr"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Close() error { return nil }

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// FuzzClientFraming feeds arbitrary bytes to the proxy as the client's
// stream: it never panics, and everything it writes to either side is whole
// JSON-RPC messages, one a line (to the client, a batch's answers: an array),
// and what reaches the server passes the proxy's door for client messages.
func FuzzClientFraming(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		"not json\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n",
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t","arguments":{"a":1}}}`,
		`{"jsonrpc":"1.0","id":3}` + "\n\n\r\n" + `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"oops"}`,
		`[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},7]` + "\n[]\n[",
		`{"jsonrpc":"2.0","id":6,"method":"ping","params":{"_meta":{"a":1,"A":2}}}` + "\n" + `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","NAME":"u"}}`,
		`{"jsonrpc":"2.0","id":8,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":9}` + "\n" + `{"jsonrpc":"2.0","method":"x","Method":"y"}`,
	} {
		f.Add([]byte(seed))
	}
	store := logaddr.File(filepath.Join(f.TempDir(), "u.db"), logaddr.Options{})
	f.Fuzz(func(t *testing.T, data []byte) {
		client, upstream := &lockedBuffer{}, &lockedBuffer{}
		p := &Proxy{Log: store, Session: "fuzz", ApprovalWait: time.Millisecond}
		in := newBatcher(NewStdioConn(bytes.NewReader(data), client)) // as Serve has it
		p.client, p.up, p.upGone = in, NewStdioConn(bytes.NewReader(nil), upstream), make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // nothing answers upstream: calls give up at once
		p.readClient(ctx, in)
		p.calls.Wait()
		for side, out := range map[string]string{"client": client.String(), "upstream": upstream.String()} {
			for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				if line == "" && out == "" {
					continue
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err == nil {
					// What reaches the server is read one way.
					if _, refused := readClientMessage([]byte(line)); side == "upstream" && refused != nil {
						t.Fatalf("the server got %q, which the proxy refuses: %s", line, refused.note)
					}
					continue
				}
				// Or the answers to a batch: a non-empty array of messages.
				var batch []map[string]any
				if err := json.Unmarshal([]byte(line), &batch); err != nil || len(batch) == 0 || side != "client" {
					t.Fatalf("%s got a line that is not one JSON message: %q", side, line)
				}
			}
		}
	})
}

// TestTopLevelID reads the id of a message whatever its other members hold.
func TestTopLevelID(t *testing.T) {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for msg, want := range map[string]string{
		`{"jsonrpc":"2.0","method":"tools/call","params":` + deep + `,"id":7}`: `7`,
		`{"id":"a\"}b","params":{"s":"}]\\\"` + deep + `"}}`:                   `"a\"}b"`,
		` { "params" : [1,{"id":2}] , "id" : -3.5e1 } `:                        `-3.5e1`,
		`{"id":1,"id":"last"}`:     `"last"`,
		`{"id":{"x":1}}`:           ``,
		`{"id":null}`:              ``,
		`[{"id":1}]`:               ``,
		`{"params":[` + deep[:100]: ``,
		`{"id":7`:                  `7`,
		`{"id"`:                    ``,
		`{"a":1,,"id":2}`:          ``,
		`{"id":8,"params":{"a":`:   `8`,
		`{"id":9,"a":1,,"id":2}`:   `9`,
		`{"\u0069d":10}`:           `10`,
	} {
		if got := string(topLevelID([]byte(msg))); got != want {
			t.Errorf("topLevelID(%.60q) = %q, want %q", msg, got, want)
		}
	}
}

// TestWithID: the id of a message is replaced where it is, and nothing
// else of it changes (nested ids, key order, spacing, escapes); a message
// without an id gets one, and one that is not JSON is refused.
func TestWithID(t *testing.T) {
	for msg, want := range map[string]string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"id":1,"a":"<\u00e9>"}}`: `{"jsonrpc":"2.0","id":"L1","method":"tools/call","params":{"id":1,"a":"<\u00e9>"}}`,
		` { "result" : {"content":[{"id":2}]} , "id" : "x" } `:                            ` { "result" : {"content":[{"id":2}]} , "id" : "L1" } `,
		`{"\u0069d":3,"result":{}}`:                                                       `{"\u0069d":"L1","result":{}}`,
		`{"result":{}}`:                                                                   `{"id":"L1","result":{}}`,
	} {
		got, err := withID([]byte(msg), json.RawMessage(`"L1"`))
		if err != nil || string(got) != want {
			t.Errorf("withID(%s) = %s, %v; want %s", msg, got, err, want)
		}
	}
	for _, msg := range []string{`{"id":1,`, `[{"id":1}]`, `{"id":1} x`} {
		if got, err := withID([]byte(msg), json.RawMessage(`"L1"`)); err == nil {
			t.Errorf("withID(%s) = %s, want an error", msg, got)
		}
	}
}

// TestClientMessageNestedTooDeep: a request nested deeper than the JSON
// decoder's limit is answered with its own id (-32600), not -32700 with id
// null, so its caller does not wait for good; the next request is served.
func TestClientMessageNestedTooDeep(t *testing.T) {
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	input := `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t","arguments":{"a":` + deep + `}},"id":"deep-1"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"
	client, upstream := &lockedBuffer{}, &lockedBuffer{}
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	p := &Proxy{Log: store, Session: "deep", ApprovalWait: time.Millisecond}
	in := newBatcher(NewStdioConn(strings.NewReader(input), client))
	p.client, p.up, p.upGone = in, NewStdioConn(bytes.NewReader(nil), upstream), make(chan struct{})
	p.readClient(t.Context(), in)
	p.calls.Wait()
	var first struct {
		ID    json.RawMessage    `json:"id"`
		Error struct{ Code int } `json:"error"`
	}
	line, _, _ := strings.Cut(client.String(), "\n")
	if err := json.Unmarshal([]byte(line), &first); err != nil || string(first.ID) != `"deep-1"` || first.Error.Code != codeInvalidRequest {
		t.Fatalf("answer to the deep request: %s (%v)", line, err)
	}
	if !strings.Contains(upstream.String(), `"method":"ping"`) || strings.Contains(upstream.String(), "deep-1") {
		t.Fatalf("upstream got %q", upstream.String())
	}
}

// FuzzTopLevelID: never panics, and on JSON the decoder reads it agrees
// with the decoder about a string or number id.
func FuzzTopLevelID(f *testing.F) {
	for _, seed := range []string{`{"id":1}`, `{"a":[{"id":2}],"id":"x\"y"}`, `{"id":1,"id":2}`, `{"id":{}}`, `{ "id" : -0.5 }`, `[1]`, `{"id`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		got := topLevelID(msg)
		var m map[string]json.RawMessage
		if json.Unmarshal(msg, &m) != nil {
			return
		}
		want := m["id"]
		if len(want) > 0 && want[0] != '"' && want[0] != '-' && (want[0] < '0' || want[0] > '9') {
			want = nil
		}
		if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
			t.Fatalf("topLevelID(%q) = %q, the decoder reads %q", msg, got, want)
		}
	})
}
