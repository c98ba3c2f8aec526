package mcpwire

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func readWithin(t *testing.T, c Conn) map[string]any {
	t.Helper()
	got := make(chan []byte, 1)
	go func() {
		m, _ := c.Read()
		got <- m
	}()
	select {
	case m := <-got:
		var v map[string]any
		if err := json.Unmarshal(m, &v); err != nil {
			t.Fatalf("not one message: %q", m)
		}
		return v
	case <-time.After(30 * time.Second): // a guard against hanging
		t.Fatal("nothing read for 30 s")
	}
	return nil
}

// TestHTTPUpstream: the client side of Streamable HTTP passes the server's
// bytes on, keeps the session id and protocol version, passes a JSON-RPC
// error from an HTTP error body as the answer, resumes a stream the server
// ended before its answer (GET with Last-Event-ID), and turns an
// unreachable server into an error answer for the request.
func TestHTTPUpstream(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Method+" "+m.Method+" "+r.Header.Get("Mcp-Session-Id")+" "+r.Header.Get("Mcp-Protocol-Version")+" "+r.Header.Get("X-Key"))
		switch {
		case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == "ev-1":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: ev-2\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"resumed\":true}}\n\n")
		case r.Method == http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "sess-9")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25",  "odd spacing":true}}`, m.ID)
		case m.Method == "bad":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no"}}`, m.ID)
		case m.Method == "boom":
			w.WriteHeader(http.StatusBadGateway)
		case m.Method == "poll":
			// Ends the stream before the answer (2025-11-25 SSE polling).
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: ev-1\nretry: 10\ndata: \n\n")
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer ts.Close()
	c := DialHTTP(ts.URL, http.Header{"X-Key": {"k1"}}, nil)
	defer c.Close()
	c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if m, err := c.Read(); err != nil || string(m) != `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25",  "odd spacing":true}}` {
		t.Fatalf("initialize answer not passed on as sent: %q %v", m, err)
	}
	c.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	c.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"bad"}`))
	if m := readWithin(t, c); m["id"] != 2.0 || errCode(m) != -32602 {
		t.Fatalf("the server's error answer: %v", m)
	}
	c.Write([]byte(`{"jsonrpc":"2.0","id":3,"method":"poll"}`))
	if m := readWithin(t, c); m["id"] != 3.0 || m["result"].(map[string]any)["resumed"] != true {
		t.Fatalf("the resumed answer: %v", m)
	}
	// A 5xx may come after the server acted: the answer is lost, not failed.
	c.Write([]byte(`{"jsonrpc":"2.0","id":4,"method":"boom"}`))
	if _, err := c.Read(); err == nil || string(err.(*LostError).ID) != "4" {
		t.Fatalf("a 502: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "POST bad sess-9 2025-11-25 k1"; !contains(seen, want) {
		t.Fatalf("requests %q lack %q", seen, want)
	}

	gone := DialHTTP("http://127.0.0.1:1/mcp", nil, nil)
	defer gone.Close()
	gone.Write([]byte(`{"jsonrpc":"2.0","id":"x","method":"tools/call"}`))
	if m := readWithin(t, gone); m["id"] != "x" || errCode(m) != codeInternal {
		t.Fatalf("an unreachable server: %v", m)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func errCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// TestHTTPUpstreamKeepsConnections: requests in flight together, round
// after round, and through two connections to one server (two clients of
// a proxy), reuse the HTTP connections the earlier rounds opened, rather
// than dialling again past a pool of two.
func TestHTTPUpstreamKeepsConnections(t *testing.T) {
	const inFlight, rounds = 12, 5
	var mu sync.Mutex
	opened := 0
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		time.Sleep(20 * time.Millisecond) // the round's requests are in flight together
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			opened++
			mu.Unlock()
		}
	}
	ts.Start()
	defer ts.Close()
	conns := []Conn{DialHTTP(ts.URL, nil, nil), DialHTTP(ts.URL, nil, nil)}
	defer conns[0].Close()
	defer conns[1].Close()
	id := 0
	for range rounds {
		for _, c := range conns {
			for range inFlight / len(conns) {
				id++
				if err := c.Write(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, c := range conns {
			for range inFlight / len(conns) {
				if m := readWithin(t, c); m["result"] == nil {
					t.Fatalf("answer: %v", m)
				}
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if opened > 2*inFlight {
		t.Fatalf("%d HTTP connections opened for %d rounds of %d requests in flight, want at most %d", opened, rounds, inFlight, 2*inFlight)
	}
}
