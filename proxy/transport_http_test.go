package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/policy"
	sm "github.com/undolog/undolog/statemachine"
)

// TestLoggedCallWhoseHTTPAnswerIsLost: a logged call whose HTTP exchange
// ends in a 5xx stays executing (in doubt: the server may have run it), and
// the client gets an error; a call the server never got (connection
// refused) is failed, so that a retry runs it.
func TestLoggedCallWhoseHTTPAnswerIsLost(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		switch m.Method {
		case "tools/call":
			w.WriteHeader(http.StatusInternalServerError)
		case "":
			w.WriteHeader(http.StatusAccepted)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		}
	}))
	defer ts.Close()
	for _, c := range []struct {
		url  string
		want sm.State
	}{{ts.URL, sm.Executing}, {"http://127.0.0.1:1/mcp", sm.Pending}} {
		pol, _ := policy.ParsePolicy([]byte("tools:\n  put: {tier: compensable}\n"))
		store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
		p := &Proxy{Log: store, Session: "s", Policy: pol}
		cr, cw := io.Pipe()
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- p.Serve(context.Background(), NewStdioConn(cr, pw), DialHTTP(c.url, nil, nil))
			pw.Close()
		}()
		client := newEnd(t, cw, pr)
		client.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"put","arguments":{"k":1}}}`)
		if m := client.nextObject(); m["id"] != 1.0 || m["error"] == nil {
			t.Fatalf("%s: the answer %v", c.url, m)
		}
		cw.Close()
		<-done
		d, err := store.GetEffect(context.Background(), 1)
		if err != nil || d.Effect.State != c.want {
			t.Fatalf("%s: the effect is %s, want %s (%v)", c.url, d.Effect.State, c.want, err)
		}
	}
}
