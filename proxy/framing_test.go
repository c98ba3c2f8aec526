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

	"github.com/undolog/undolog/engines"
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
// JSON-RPC messages, one a line (to the client, a batch's answers: an array).
func FuzzClientFraming(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		"not json\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n",
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t","arguments":{"a":1}}}`,
		`{"jsonrpc":"1.0","id":3}` + "\n\n\r\n" + `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"oops"}`,
		`[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},7]` + "\n[]\n[",
	} {
		f.Add([]byte(seed))
	}
	store := engines.File(filepath.Join(f.TempDir(), "u.db"), engines.Options{})
	f.Fuzz(func(t *testing.T, data []byte) {
		client, upstream := &lockedBuffer{}, &lockedBuffer{}
		p := &Proxy{Log: store, Session: "fuzz", ApprovalWait: time.Millisecond}
		in := newBatcher(NewStdioConn(bytes.NewReader(data), client)) // as Serve has it
		p.client, p.up, p.upGone = in, NewStdioConn(bytes.NewReader(nil), upstream), make(chan struct{})
		p.waiting, p.listIDs, p.annotations = map[string]chan message{}, map[string]bool{}, map[string]bool{}
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
