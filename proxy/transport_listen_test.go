package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer serves HTTP clients with a fake server behind the batcher (as
// Serve has it): each request is answered with its method; initialize with
// version. ended gets each session's end.
func echoServer(t *testing.T, version string) (url string, ended chan struct{}) {
	ended = make(chan struct{}, 4)
	s := &HTTPServer{Start: func(ctx context.Context, client Conn) {
		go func() { <-ctx.Done(); client.Close() }() // as a proxy's Serve ends with ctx
		c := newBatcher(client)
		for {
			msg, err := c.Read()
			if err != nil {
				ended <- struct{}{}
				return
			}
			id, method, _ := peek(msg)
			if method == "" || len(id) == 0 {
				continue
			}
			result := `{"method":"` + method + `"}`
			if method == "initialize" {
				result = `{"protocolVersion":"` + version + `","capabilities":{},"serverInfo":{"name":"echo","version":"1"}}`
			}
			c.Write(resultResponse(id, json.RawMessage(result)))
		}
	}}
	return serveOnLoopback(t, s), ended
}

// serveOnLoopback serves s until the test ends, and returns its URL.
func serveOnLoopback(t *testing.T, s *HTTPServer) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String() + "/mcp"
}

type httpReply struct {
	status  int
	session string
	msgs    []any // the JSON body, or each event's data
}

func postTo(t *testing.T, url, session, accept, body string) httpReply {
	t.Helper()
	header := http.Header{}
	if session != "" {
		header.Set("Mcp-Session-Id", session)
	}
	return postWith(t, url, accept, header, body)
}

// postWith POSTs body with the headers in header besides its own.
func postWith(t *testing.T, url, accept string, header http.Header, body string) httpReply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := httpReply{status: resp.StatusCode, session: resp.Header.Get("Mcp-Session-Id")}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var v any
				if err := json.Unmarshal([]byte(data), &v); err != nil {
					t.Fatalf("event data %q", data)
				}
				r.msgs = append(r.msgs, v)
			}
		}
		return r
	}
	b, _ := io.ReadAll(resp.Body)
	var v any
	if json.Unmarshal(b, &v) == nil {
		r.msgs = append(r.msgs, v)
	}
	return r
}

const both = "application/json, text/event-stream"

func initBody(version string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
}

// TestHTTPServerSessions: initialize opens a session (its id in the
// header); a request names it or is refused (400 without, 404 unknown); a
// notification is accepted (202); a client that accepts only JSON gets a
// JSON body; DELETE ends the session, and its Conn reads EOF.
func TestHTTPServerSessions(t *testing.T) {
	url, ended := echoServer(t, "2025-11-25")
	r := postTo(t, url, "", both, initBody("2025-11-25"))
	if r.status != 200 || r.session == "" || len(r.msgs) != 1 || r.msgs[0].(map[string]any)["id"] != 1.0 {
		t.Fatalf("initialize: %+v", r)
	}
	sid := r.session
	if r := postTo(t, url, "", both, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); r.status != 400 {
		t.Fatalf("no session: %+v", r)
	}
	if r := postTo(t, url, "nope", both, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); r.status != 404 {
		t.Fatalf("unknown session: %+v", r)
	}
	if r := postTo(t, url, sid, both, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != 202 {
		t.Fatalf("notification: %+v", r)
	}
	r = postTo(t, url, sid, "application/json", `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	if m, ok := r.msgs[0].(map[string]any); r.status != 200 || !ok || m["id"] != "p" || m["result"].(map[string]any)["method"] != "ping" {
		t.Fatalf("JSON answer: %+v", r)
	}
	if r := postTo(t, url, sid, both, `not json`); r.status != 400 || errCode(r.msgs[0].(map[string]any)) != codeParse {
		t.Fatalf("not JSON: %+v", r)
	}
	deep := `{"jsonrpc":"2.0","method":"ping","params":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `,"id":"deep"}`
	if r := postTo(t, url, sid, both, deep); r.status != 400 || errCode(r.msgs[0].(map[string]any)) != codeInvalidRequest || r.msgs[0].(map[string]any)["id"] != "deep" {
		t.Fatalf("nested deeper than the decoder's limit: %+v", r)
	}
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	<-ended
	if r := postTo(t, url, sid, both, `{"jsonrpc":"2.0","id":3,"method":"ping"}`); r.status != 404 {
		t.Fatalf("after DELETE: %+v", r)
	}
}

// TestHTTPServerBatchesAndLimits: under 2025-03-26 a POSTed batch is
// answered as a batch; from 2025-06-18 it is refused with -32600 for each
// request (HTTP 400); a body over 64 MiB gets 413 with the request's id.
func TestHTTPServerBatchesAndLimits(t *testing.T) {
	url, _ := echoServer(t, "2025-03-26")
	sid := postTo(t, url, "", both, initBody("2025-03-26")).session
	r := postTo(t, url, sid, "application/json", `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":2,"method":"b"}]`)
	arr, ok := r.msgs[0].([]any)
	if r.status != 200 || !ok || len(arr) != 2 {
		t.Fatalf("batch under 2025-03-26: %+v", r)
	}
	r = postTo(t, url, sid, both, `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}]`)
	if r.status != 200 || len(r.msgs) != 2 {
		t.Fatalf("batch as events: %+v", r)
	}

	url, _ = echoServer(t, "2025-11-25")
	sid = postTo(t, url, "", both, initBody("2025-11-25")).session
	r = postTo(t, url, sid, both, `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}]`)
	arr, ok = r.msgs[0].([]any)
	if r.status != 400 || !ok || len(arr) != 2 || errCode(arr[1].(map[string]any)) != codeInvalidRequest || arr[1].(map[string]any)["id"] != 2.0 {
		t.Fatalf("batch under 2025-11-25: %+v", r)
	}
	big := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"x":"` + strings.Repeat("x", maxLine) + `"}}`
	r = postTo(t, url, sid, both, big)
	if r.status != http.StatusRequestEntityTooLarge || r.msgs[0].(map[string]any)["id"] != 9.0 {
		t.Fatalf("oversize body: %d %v", r.status, r.msgs)
	}
}

// TestHTTPServerEndsIdleSessions: a session with no request and no open
// stream for IdleTimeout ends (its upstream with it); one with its GET
// stream open does not.
func TestHTTPServerEndsIdleSessions(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1e9, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ended := make(chan struct{}, 2)
	s := &HTTPServer{IdleTimeout: time.Hour, Now: clock, Start: func(ctx context.Context, client Conn) {
		for {
			msg, err := client.Read()
			if err != nil {
				ended <- struct{}{}
				return
			}
			if id, method, _ := peek(msg); method == "initialize" {
				client.Write(resultResponse(id, json.RawMessage(`{"protocolVersion":"2025-11-25"}`)))
			}
		}
	}}
	url := serveOnLoopback(t, s)
	idle := postTo(t, url, "", both, initBody("2025-11-25")).session
	listening := postTo(t, url, "", both, initBody("2025-11-25")).session
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", listening)
	resp, err := http.DefaultClient.Do(req) // headers come once the stream is open
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	mu.Lock()
	now = now.Add(59 * time.Minute)
	mu.Unlock()
	s.sweep()
	if r := postTo(t, url, idle, both, `{"jsonrpc":"2.0","method":"notifications/x"}`); r.status != 202 {
		t.Fatalf("a session idle for less than the timeout: %+v", r)
	}
	mu.Lock()
	now = now.Add(61 * time.Minute)
	mu.Unlock()
	s.sweep()
	<-ended
	if r := postTo(t, url, idle, both, `{"jsonrpc":"2.0","method":"notifications/x"}`); r.status != 404 {
		t.Fatalf("an idle session: %+v", r)
	}
	if r := postTo(t, url, listening, both, `{"jsonrpc":"2.0","method":"notifications/x"}`); r.status != 202 {
		t.Fatalf("a session with its GET stream open: %+v", r)
	}
}

// statelessMeta is the _meta of a 2026-07-28 request of the client name.
func statelessMeta(client string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"` + client + `","version":"1"}}`
}

// postStateless POSTs a 2026-07-28 request (or notification) of method
// with params, without a session, with the headers it needs.
func postStateless(t *testing.T, url, accept, id, method, params string) httpReply {
	t.Helper()
	h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {method}}
	body := `{"jsonrpc":"2.0","method":"` + method + `","params":` + params + `}`
	if id != "" {
		body = `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`
	}
	return postWith(t, url, accept, h, body)
}

// statelessPing POSTs a ping of the client name.
func statelessPing(t *testing.T, url, accept, id, client string) httpReply {
	t.Helper()
	return postStateless(t, url, accept, id, "ping", `{`+statelessMeta(client)+`}`)
}

// TestHTTPServerStatelessLanes: requests without a session at 2026-07-28
// go in one lane per client name (begun once, its requests under ids of
// its own, answered under theirs); at MaxStatelessClients a new name ends
// the lane idle the longest, and a lane idle past StatelessIdleTimeout
// ends; an older client's request without a session is refused with its id.
func TestHTTPServerStatelessLanes(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1e9, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	later := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	started, ended := make(chan string, 8), make(chan string, 8)
	s := &HTTPServer{MaxStatelessClients: 2, StatelessIdleTimeout: time.Hour, Now: clock,
		Start: func(context.Context, Conn) { t.Error("a stateless request began a session") },
		StartStateless: func(ctx context.Context, client Conn, name string) {
			started <- name
			for {
				msg, err := client.Read()
				if err != nil {
					ended <- name
					return
				}
				if id, method, _ := peek(msg); method != "" && len(id) > 0 {
					client.Write(resultResponse(id, encode(map[string]any{"lane": name, "id": id})))
				}
			}
		}}
	url := serveOnLoopback(t, s)

	answer := func(r httpReply) (id any, lane, seen string) {
		t.Helper()
		m, ok := r.msgs[0].(map[string]any)
		res, _ := m["result"].(map[string]any)
		if r.status != 200 || !ok || res == nil || r.session != "" {
			t.Fatalf("a stateless request: %+v", r)
		}
		return m["id"], res["lane"].(string), fmt.Sprint(res["id"])
	}
	end := func() string {
		t.Helper()
		select {
		case name := <-ended:
			return name
		case <-time.After(5 * time.Second):
			t.Fatal("no lane ended")
			return ""
		}
	}
	var seen []string
	for _, accept := range []string{both, "application/json"} {
		id, lane, lid := answer(statelessPing(t, url, accept, `"x"`, "a"))
		if id != "x" || lane != "a" {
			t.Fatalf("answered as %v in lane %q", id, lane)
		}
		seen = append(seen, lid)
	}
	if seen[0] == seen[1] || seen[0] == "x" {
		t.Fatalf("the lane saw the ids %v: not ids of its own", seen)
	}
	if name := <-started; name != "a" || len(started) != 0 {
		t.Fatalf("lanes begun: %q and %d more", name, len(started))
	}
	later(time.Minute)
	if _, lane, _ := answer(statelessPing(t, url, both, "1", "b")); lane != "b" || <-started != "b" {
		t.Fatalf("another name went in lane %q", lane)
	}
	later(time.Minute)
	if _, lane, _ := answer(statelessPing(t, url, both, "1", "c")); lane != "c" || <-started != "c" {
		t.Fatalf("a third name went in lane %q", lane)
	}
	if name := end(); name != "a" {
		t.Fatalf("past the bound the lane of %q ended, not the one idle the longest", name)
	}
	later(59 * time.Minute)
	s.sweep()
	select {
	case name := <-ended:
		t.Fatalf("the lane of %q ended before its idle timeout", name)
	case <-time.After(200 * time.Millisecond):
	}
	if r := postTo(t, url, "", both, `{"jsonrpc":"2.0","id":7,"method":"ping"}`); r.status != 400 || r.msgs[0].(map[string]any)["id"] != 7.0 {
		t.Fatalf("an older client's request without a session: %+v", r)
	}
	if r := postTo(t, url, "", both, `{"jsonrpc":"2.0","id":8,"method":"ping","params":{"a":`); r.status != 400 || r.msgs[0].(map[string]any)["id"] != 8.0 {
		t.Fatalf("a request cut short: %+v", r)
	}
	// Headers that say other than the body: refused with the request's id,
	// no lane begun.
	meta := `{` + statelessMeta("e") + `}`
	call := `{"name":"put",` + statelessMeta("e") + `}`
	for what, r := range map[string]httpReply{
		"no version header": postWith(t, url, both, http.Header{}, `{"jsonrpc":"2.0","id":9,"method":"ping","params":`+meta+`}`),
		"another version":   postWith(t, url, both, http.Header{"Mcp-Protocol-Version": {"2027-01-01"}, "Mcp-Method": {"ping"}}, `{"jsonrpc":"2.0","id":9,"method":"ping","params":`+meta+`}`),
		"another method":    postWith(t, url, both, http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/list"}}, `{"jsonrpc":"2.0","id":9,"method":"ping","params":`+meta+`}`),
		"no name":           postWith(t, url, both, http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}}, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":`+call+`}`),
		"another name":      postWith(t, url, both, http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"get"}}, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":`+call+`}`),
		// An older header on a 2026 body is the headers' mismatch, not a
		// request that lost its session.
		"an older version header": postWith(t, url, both, http.Header{"Mcp-Protocol-Version": {"2025-11-25"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"put"}}, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":`+call+`}`),
	} {
		if m, _ := r.msgs[0].(map[string]any); r.status != 400 || m["id"] != 9.0 || errCode(m) != codeHeaderMismatch {
			t.Errorf("%s: %+v", what, r)
		}
	}
	// A 2026 request must say its version in _meta too: refused by the
	// proxy, not sent to an unnamed lane for the server to refuse.
	noMeta := postWith(t, url, both, http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"put"}}, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"put"}}`)
	if m, _ := noMeta.msgs[0].(map[string]any); noMeta.status != 400 || m["id"] != 9.0 || errCode(m) != codeInvalidParams {
		t.Errorf("a 2026 request without _meta: %+v", noMeta)
	}
	if r := postWith(t, url, both, http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"put"}}, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":`+call+`}`); r.status != 200 || <-started != "e" {
		t.Fatalf("a call whose headers match: %+v", r)
	}
	if len(started) != 0 {
		t.Fatalf("lanes begun for refused requests: %d", len(started))
	}
	if name := end(); name != "b" {
		t.Fatalf("past the bound the lane of %q ended, not the one idle the longest", name)
	}
	later(61 * time.Minute)
	s.sweep()
	if a, b := end(), end(); a+b != "ce" && a+b != "ec" {
		t.Fatalf("idle lanes ended: %q %q", a, b)
	}
}

// TestHTTPServerStatelessLaneBound: 24 client names at once never have
// more than MaxStatelessClients (16) lanes, and so upstreams, live: a
// name past the bound waits for a lane to end, and once it has waited
// StatelessLaneWait with every lane busy it is answered 503, Retry-After,
// and a JSON-RPC error with its id.
func TestHTTPServerStatelessLaneBound(t *testing.T) {
	var live, most atomic.Int64
	hold := make(chan struct{})
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(hold) }) }) // a failure must not leave the lanes held
	s := &HTTPServer{StatelessLaneWait: 5 * time.Second,
		Start: func(context.Context, Conn) { t.Error("a stateless request began a session") },
		StartStateless: func(ctx context.Context, client Conn, name string) {
			n := live.Add(1)
			defer live.Add(-1)
			go func() { <-ctx.Done(); client.Close() }()
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			for {
				msg, err := client.Read()
				if err != nil {
					return
				}
				if id, method, _ := peek(msg); method != "" && len(id) > 0 {
					<-hold
					client.Write(resultResponse(id, encode(map[string]any{"lane": name})))
				}
			}
		}}
	url := serveOnLoopback(t, s)
	const clients = 24
	replies := make(chan httpReply, clients)
	for i := range clients {
		go func() { replies <- statelessPing(t, url, "application/json", "1", fmt.Sprintf("client-%d", i)) }()
	}
	time.Sleep(500 * time.Millisecond) // 16 lanes begun, 8 names waiting
	if n := live.Load(); n != DefaultMaxStatelessClients {
		t.Fatalf("%d lanes live while all are busy, want %d", n, DefaultMaxStatelessClients)
	}
	release.Do(func() { close(hold) }) // the lanes' requests end: the waiting names take their places
	for range clients {
		if r := <-replies; r.status != 200 {
			t.Fatalf("a client waiting for a lane: %+v", r)
		}
	}
	if m := most.Load(); m > DefaultMaxStatelessClients {
		t.Fatalf("%d lanes were live at once, over the bound %d", m, DefaultMaxStatelessClients)
	}

	// Every lane busy for longer than the wait: 503, with the request's id.
	busy := &HTTPServer{MaxStatelessClients: 1, StatelessLaneWait: 200 * time.Millisecond,
		StartStateless: func(ctx context.Context, client Conn, name string) {
			msg, err := client.Read()
			if err != nil {
				return
			}
			<-ctx.Done() // the request stays in flight till the server stops
			id, _, _ := peek(msg)
			client.Write(resultResponse(id, encode(map[string]any{})))
		}}
	busyURL := serveOnLoopback(t, busy)
	go statelessPing(t, busyURL, "application/json", "1", "holder")
	time.Sleep(200 * time.Millisecond)
	req, _ := http.NewRequest(http.MethodPost, busyURL, strings.NewReader(`{"jsonrpc":"2.0","id":"late","method":"ping","params":{`+statelessMeta("newcomer")+`}}`))
	req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}, "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"ping"}}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		ID    string `json:"id"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&answer)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || answer.ID != "late" || !strings.Contains(answer.Error.Message, "busy") {
		t.Fatalf("status %d, Retry-After %q, answer %+v", resp.StatusCode, resp.Header.Get("Retry-After"), answer)
	}
}

// cancelRecordingLane is a fake lane that sends each "hold" request's id on
// held and each cancellation's request id on cancelled, answers pings, and
// answers a held request once cancelled when answerCancelled says so.
func cancelRecordingLane(held, cancelled chan<- json.RawMessage, answerCancelled bool) func(context.Context, Conn, string) {
	return func(ctx context.Context, client Conn, name string) {
		go func() { <-ctx.Done(); client.Close() }()
		for {
			msg, err := client.Read()
			if err != nil {
				return
			}
			var m message
			json.Unmarshal(msg, &m)
			switch m.Method {
			case "hold":
				held <- m.ID
			case "ping":
				client.Write(resultResponse(m.ID, json.RawMessage(`{}`)))
			case "notifications/cancelled":
				var p struct{ RequestID json.RawMessage }
				json.Unmarshal(m.Params, &p)
				cancelled <- p.RequestID
				if answerCancelled {
					client.Write(resultResponse(p.RequestID, json.RawMessage(`{}`)))
				}
			}
		}
	}
}

// TestHTTPServerStatelessCancel: a stateless client's cancellation reaches
// its lane naming the request by the lane's id for it; one naming no
// request in flight is not passed on.
func TestHTTPServerStatelessCancel(t *testing.T) {
	held, cancelled := make(chan json.RawMessage, 2), make(chan json.RawMessage, 2)
	s := &HTTPServer{StartStateless: cancelRecordingLane(held, cancelled, true)}
	url := serveOnLoopback(t, s)

	meta := statelessMeta("d")
	answered := make(chan httpReply, 1)
	go func() {
		answered <- postStateless(t, url, both, "5", "hold", `{`+meta+`}`)
	}()
	lid := <-held
	if r := postStateless(t, url, both, "", "notifications/cancelled", `{"requestId":6,`+meta+`}`); r.status != 202 {
		t.Fatalf("a cancellation of no request: %+v", r)
	}
	if r := postStateless(t, url, both, "", "notifications/cancelled", `{"requestId":5,`+meta+`}`); r.status != 202 {
		t.Fatalf("a cancellation: %+v", r)
	}
	if got := <-cancelled; string(got) != string(lid) {
		t.Fatalf("the lane got the cancellation of %s, its id for the request is %s", got, lid)
	}
	if r := <-answered; r.status != 200 || r.msgs[0].(map[string]any)["id"] != 5.0 {
		t.Fatalf("the held request: %+v", r)
	}
	if len(cancelled) != 0 {
		t.Fatalf("a cancellation of no request was passed on: %s", <-cancelled)
	}
}

// TestHTTPServerStatelessHangupCancels: a stateless client that closes its
// POST before the answer (2026-07-28's cancellation over HTTP) cancels the
// request: its lane gets notifications/cancelled naming it by the lane's
// id; one whose answer came sends none.
func TestHTTPServerStatelessHangupCancels(t *testing.T) {
	held, cancelled := make(chan json.RawMessage, 2), make(chan json.RawMessage, 2)
	s := &HTTPServer{StartStateless: cancelRecordingLane(held, cancelled, false)}
	url := serveOnLoopback(t, s)
	if r := statelessPing(t, url, both, "1", "e"); r.status != 200 {
		t.Fatalf("ping: %+v", r)
	}
	for _, accept := range []string{both, "application/json"} {
		ctx, hangUp := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url,
			strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"hold","params":{`+statelessMeta("e")+`}}`))
		req.Header = http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"hold"},
			"Content-Type": {"application/json"}, "Accept": {accept}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		lid := <-held
		hangUp()
		<-done
		select {
		case got := <-cancelled:
			if string(got) != string(lid) {
				t.Fatalf("%s: the lane got the cancellation of %s, its id for the request is %s", accept, got, lid)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: closing the POST cancelled nothing", accept)
		}
	}
	if len(cancelled) != 0 {
		t.Fatalf("an answered request was cancelled: %s", <-cancelled)
	}
}

// TestHTTPServerLaneAwaitingARoundIsNotIdle: a stateless lane whose call
// awaits the client's next input round (its proxy holds it, roundHolder)
// does not end as idle; once the round ends (the input wait passed) it
// does, idle past the timeout from then.
func TestHTTPServerLaneAwaitingARoundIsNotIdle(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1e9, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	later := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ended, held := make(chan string, 2), make(chan roundHolder, 1)
	s := &HTTPServer{StatelessIdleTimeout: time.Hour, Now: clock,
		StartStateless: func(ctx context.Context, client Conn, name string) {
			for {
				msg, err := client.Read()
				if err != nil {
					ended <- name
					return
				}
				if id, method, _ := peek(msg); method == "ping" {
					h := client.(roundHolder)
					h.HoldForRound(1) // as the proxy does once a call asks for input
					held <- h
					client.Write(resultResponse(id, json.RawMessage(`{}`)))
				}
			}
		}}
	url := serveOnLoopback(t, s)
	if r := statelessPing(t, url, both, "1", "a"); r.status != 200 {
		t.Fatalf("a stateless ping: %+v", r)
	}
	h := <-held
	later(2 * time.Hour)
	s.sweep()
	select {
	case name := <-ended:
		t.Fatalf("the lane of %q, awaiting a round, ended as idle", name)
	case <-time.After(200 * time.Millisecond):
	}
	h.HoldForRound(-1) // the round ended: the input wait passed
	later(59 * time.Minute)
	s.sweep()
	select {
	case name := <-ended:
		t.Fatalf("the lane of %q ended before its idle timeout from the round's end", name)
	case <-time.After(200 * time.Millisecond):
	}
	later(2 * time.Minute)
	s.sweep()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the lane, idle past the timeout since its round ended, did not end")
	}
}
