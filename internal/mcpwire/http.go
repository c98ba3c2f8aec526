package mcpwire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// httpConn is the client side of MCP's Streamable HTTP transport (protocol
// 2025-03-26 and later), in front of a remote server: each message is a
// POST (a request of 2026-07-28 or later with the headers that version
// asks for: stateless.go), answered by nothing (202), one JSON body, or a stream of server-sent
// events; a GET stream carries what the server sends unasked. Messages pass
// as the bytes the server sent. Under 2026-07-28 a request is cancelled by
// closing its POST, not by notifications/cancelled, and a notification goes
// under the version of the requests before it.
type httpConn struct {
	url    string
	header http.Header
	client *http.Client
	diag   io.Writer

	ctx      context.Context
	cancel   context.CancelFunc
	incoming chan item
	closed   chan struct{}
	once     sync.Once
	getOnce  sync.Once

	mu        sync.Mutex
	sessionID string
	version   string
	// stateless is the version of the latest request sent under
	// StatelessVersion or later ("" once an older one was): the
	// notifications that follow go under it.
	stateless string
	// inflight cancels, by IDKey, the POST of each request of
	// StatelessVersion or later not answered yet: closing it is how that
	// version cancels a request over HTTP.
	inflight map[string]context.CancelCauseFunc

	params paramHeaders
	listMu sync.Mutex // held while the connection lists tools of its own accord
}

// DialHTTP is the Streamable HTTP transport to the MCP server at url; header
// goes with every request (authentication, read from the environment by the
// caller). Nothing is sent until the first message.
func DialHTTP(url string, header http.Header, diag io.Writer) Conn {
	if diag == nil {
		diag = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &httpConn{url: url, header: header, client: &http.Client{Transport: upstreamTransport}, diag: diag,
		ctx: ctx, cancel: cancel, incoming: make(chan item, 16), closed: make(chan struct{})}
}

// upstreamTransport is every connection's: requests in flight together
// (calls run concurrently, and clients of one proxy share a server) keep
// their HTTP connections for the next ones, where Go's default keeps two
// per host and dials again past them.
var upstreamTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 64
	return t
}()

// item is what Read returns next: a message, or a *LostError.
type item struct {
	msg []byte
	err error
}

func (c *httpConn) Read() ([]byte, error) {
	select {
	case it := <-c.incoming:
		return it.msg, it.err
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *httpConn) push(msg []byte) { c.pushItem(item{msg: msg}) }

func (c *httpConn) pushItem(it item) {
	select {
	case c.incoming <- it:
	case <-c.closed:
	}
}

// fail answers request id with a JSON-RPC error, as if the server had: for
// a request the server never got.
func (c *httpConn) fail(id json.RawMessage, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	fmt.Fprintln(c.diag, "undolog proxy: "+text)
	if len(id) > 0 {
		c.push(ErrorResponse(id, codeInternal, text))
	}
}

// lose reports the answer to request id lost: for a request the server got,
// or may have (see LostError).
func (c *httpConn) lose(id json.RawMessage, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	if len(id) == 0 {
		fmt.Fprintln(c.diag, "undolog proxy: "+text)
		return
	}
	c.pushItem(item{err: &LostError{ID: id, Reason: text}})
}

// Write sends one message. The initialize request is answered before Write
// returns (its answer carries the session id every later message needs);
// notifications and responses are sent before Write returns, in order;
// other requests run concurrently, their answers arriving through Read.
func (c *httpConn) Write(msg []byte) error {
	select {
	case <-c.closed:
		return ErrClosed
	default:
	}
	id, method, _ := Peek(msg)
	msg = append([]byte(nil), msg...)
	if method == "notifications/cancelled" && len(id) == 0 && c.cancelInFlight(msg) {
		return nil // its POST closed: the cancellation itself, nothing to send
	}
	switch {
	case method == "initialize" || method == "" || len(id) == 0:
		c.post(msg, id, method)
		if method == "notifications/initialized" {
			// The GET stream is open before the client's next message goes:
			// a server may send what a request makes it ask (sampling, say)
			// on that stream, and drops it when no stream is open.
			c.getOnce.Do(func() {
				ready := make(chan struct{})
				go c.listen(ready)
				select {
				case <-ready:
				case <-time.After(10 * time.Second):
				}
			})
		}
	default:
		ctx, done := c.ctx, func() {}
		if statelessRequest(msg) {
			// Tracked before Write returns: a cancellation the client sends
			// next finds it.
			ctx, done = c.track(ctx, id)
		}
		go func() {
			defer done()
			c.postIn(ctx, msg, id, method)
		}()
	}
	return nil
}

// statelessRequest tells whether msg is a request under StatelessVersion
// or later.
func statelessRequest(msg []byte) bool {
	var m struct {
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return false
	}
	_, ok := ReadRequestMeta(m.Params)
	return ok
}

// errCancelled is the cause of a request's POST closed because the client
// cancelled the request.
var errCancelled = errors.New("cancelled by the client")

// CancelGrace is how long a request of StatelessVersion or later the client
// cancelled keeps its POST open: an answer already on its way is still read,
// so that a call the server ran is recorded, and a client that re-sends it
// (2026-07-28 has no stream resumption: a broken stream looks like a
// cancellation) gets it from the log; then the POST closes, which is how that
// version cancels.
const CancelGrace = 5 * time.Second

// cancelInFlight closes, after CancelGrace, the POST of the request a
// notifications/cancelled names, if it is one of StatelessVersion or later
// not answered yet, and says whether it was.
func (c *httpConn) cancelInFlight(msg []byte) bool {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &n) != nil || len(n.Params.RequestID) == 0 {
		return false
	}
	c.mu.Lock()
	cancel := c.inflight[IDKey(n.Params.RequestID)]
	c.mu.Unlock()
	if cancel == nil {
		return false
	}
	time.AfterFunc(CancelGrace, func() { cancel(errCancelled) })
	return true
}

// track makes ctx the context of the POST of request id, one of
// StatelessVersion or later, until done.
func (c *httpConn) track(ctx context.Context, id json.RawMessage) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	key := IDKey(id)
	c.mu.Lock()
	if c.inflight == nil {
		c.inflight = map[string]context.CancelCauseFunc{}
	}
	c.inflight[key] = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		cancel(nil)
	}
}

func (c *httpConn) request(ctx context.Context, method string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, r)
	if err != nil {
		return nil, err
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	c.mu.Lock()
	if c.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", c.sessionID)
	}
	if c.version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	stateless := c.stateless
	c.mu.Unlock()
	id, m, _ := Peek(body)
	if body != nil && m != "" && len(id) > 0 {
		stateless = setStatelessHeaders(req.Header, body, &c.params)
		c.mu.Lock()
		c.stateless = stateless
		c.mu.Unlock()
	} else if body != nil && m != "" && stateless != "" {
		// A notification says no version of its own: it goes under that of
		// the requests before it, with its method, as the version asks.
		req.Header.Set("Mcp-Protocol-Version", stateless)
		req.Header.Set("Mcp-Method", m)
	} else {
		stateless = ""
	}
	// A message of 2026-07-28 or later belongs to no session.
	if stateless != "" {
		req.Header.Del("Mcp-Session-Id")
		// A name that no header can carry (a line break, say) is refused
		// here: Go's client would refuse it after the call was counted
		// as sent, and leave it in doubt.
		for _, k := range []string{"Mcp-Method", "Mcp-Name"} {
			if v := req.Header.Get(k); strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
				return nil, fmt.Errorf("the %s header cannot carry %q, as 2026-07-28 asks", k, v)
			}
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
	return req, nil
}

// post sends one message and passes on what the server answers.
func (c *httpConn) post(msg []byte, id json.RawMessage, method string) {
	c.postIn(c.ctx, msg, id, method)
}

// postIn is post in ctx, which closes the POST when it ends: the
// connection's, or one the client's cancellation of the request ends
// (errCancelled), and then the answer is lost, for the server may have
// acted on it.
func (c *httpConn) postIn(ctx context.Context, msg []byte, id json.RawMessage, method string) {
	// Only a request is answered; for a notification or a response the
	// server's 202 is all, and a failure has no one to tell but the notes.
	asks := method != "" && len(id) > 0
	if !asks {
		id = nil
	}
	if method == "tools/call" {
		c.listToolsFor(msg)
	}
	req, err := c.request(ctx, http.MethodPost, msg)
	if err != nil {
		c.fail(id, "the upstream server %s: %v", c.url, err)
		return
	}
	cancelled := func() bool {
		if !errors.Is(context.Cause(ctx), errCancelled) {
			return false
		}
		c.lose(id, "the client cancelled %s: its POST to the upstream server %s was closed", describe(method), c.url)
		return true
	}
	resp, err := c.client.Do(req)
	if err != nil {
		var op *net.OpError
		switch {
		case cancelled():
		case c.ctx.Err() != nil:
		case errors.As(err, &op) && op.Op == "dial":
			c.fail(id, "the upstream server %s could not be reached: %v", c.url, err)
		default: // the request may have reached it
			c.lose(id, "the exchange with the upstream server %s broke: %v", c.url, err)
		}
		return
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && method == "initialize" {
		c.mu.Lock()
		c.sessionID = sid
		c.mu.Unlock()
	}
	if resp.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		// A JSON-RPC error the server put in the body is its answer.
		if rid, m, ok := Peek(body); ok && m == "" && asks && IDKey(rid) == IDKey(id) {
			c.push(bytes.TrimSpace(body))
			return
		}
		switch {
		case !asks:
			fmt.Fprintf(c.diag, "undolog proxy: the upstream server %s answered HTTP %d to %s\n", c.url, resp.StatusCode, describe(method))
		case resp.StatusCode >= 500: // it may have acted on the request
			c.lose(id, "the upstream server %s answered HTTP %d to %s: %.300s", c.url, resp.StatusCode, describe(method), bytes.TrimSpace(body))
		default:
			c.fail(id, "the upstream server %s answered HTTP %d to %s: %.300s", c.url, resp.StatusCode, describe(method), bytes.TrimSpace(body))
		}
		return
	}
	got := false
	deliver := func(m []byte) {
		if rid, mm, ok := Peek(m); ok && mm == "" && len(id) > 0 && IDKey(rid) == IDKey(id) {
			got = true
			switch method {
			case "initialize":
				c.learnVersion(m)
			case "tools/list":
				c.learnParamHeaders(m)
			}
		}
		c.push(m)
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "text/event-stream":
		lastID, retry := c.events(resp.Body, deliver)
		// A server may end a stream before its answer and have the client
		// resume it (2025-11-25 polling): GET with the last event's id.
		for tries := 0; !got && asks && lastID != "" && tries < 5 && ctx.Err() == nil; tries++ {
			select {
			case <-time.After(retry):
			case <-ctx.Done():
				cancelled()
				return
			}
			var ok bool
			if lastID, retry, ok = c.resume(lastID, retry, deliver); !ok {
				break
			}
		}
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxLine+1))
		switch {
		case err != nil:
		case len(body) > maxLine:
			c.lose(id, "the upstream server's answer is over 64 MiB, the proxy's limit; it was dropped")
			return
		case len(bytes.TrimSpace(body)) > 0 && bytes.TrimSpace(body)[0] == '[':
			var elems []json.RawMessage
			if json.Unmarshal(body, &elems) == nil {
				for _, e := range elems {
					deliver(e)
				}
			}
		case len(bytes.TrimSpace(body)) > 0:
			deliver(bytes.TrimSpace(body))
		}
	}
	if !got && asks && !cancelled() && c.ctx.Err() == nil {
		c.lose(id, "the upstream server %s ended its answer to %s without a JSON-RPC response", c.url, describe(method))
	}
}

func describe(method string) string {
	if method == "" {
		return "a message"
	}
	return method
}

func (c *httpConn) learnVersion(resp []byte) {
	var r struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(resp, &r) == nil && r.Result.ProtocolVersion != "" {
		c.mu.Lock()
		c.version = r.Result.ProtocolVersion
		c.mu.Unlock()
	}
}

// listToolsFor lists the server's tools (every page) before a tools/call
// of 2026-07-28 or later of a tool no list named yet, so that the call
// carries the headers its tool asks for (x-mcp-header): a client over
// stdio, which sends no headers, need not have listed them. The list goes
// with the call's own _meta, and its answer to no one.
func (c *httpConn) listToolsFor(call []byte) {
	var m struct {
		Params json.RawMessage `json:"params"`
	}
	var p struct {
		Name string          `json:"name"`
		Meta json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(call, &m) != nil || json.Unmarshal(m.Params, &p) != nil {
		return
	}
	if _, ok := ReadRequestMeta(m.Params); !ok {
		return
	}
	c.listMu.Lock()
	defer c.listMu.Unlock()
	if !c.params.unlisted(p.Name) {
		return
	}
	cursor := ""
	for range maxOwnListPages {
		params := map[string]any{"_meta": p.Meta}
		if cursor != "" {
			params["cursor"] = cursor
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": ownListID, "method": "tools/list", "params": params})
		result := c.exchange(body, ownListID)
		if cursor = c.params.learn(result); cursor == "" {
			return
		}
	}
}

// ownListID is the id of the connection's own tools/list requests (each
// one POST, whose answer comes in its own response).
const ownListID = "undolog-tools-list"

// maxOwnListPages bounds the pages of the connection's own tool lists.
const maxOwnListPages = 100

// exchange POSTs a request of the connection's own and returns the result
// of its answer; nil if none came.
func (c *httpConn) exchange(body []byte, id string) json.RawMessage {
	req, err := c.request(c.ctx, http.MethodPost, body)
	if err != nil {
		return nil
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var result json.RawMessage
	take := func(msg []byte) {
		var r struct {
			ID     string          `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(msg, &r) == nil && r.ID == id {
			result = r.Result
		}
	}
	switch {
	case resp.StatusCode >= 300:
	case mediaType(resp.Header.Get("Content-Type")) == "text/event-stream":
		c.events(resp.Body, take)
	default:
		if b, err := io.ReadAll(io.LimitReader(resp.Body, maxLine+1)); err == nil {
			take(b)
		}
	}
	return result
}

func (c *httpConn) learnParamHeaders(resp []byte) {
	var r struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(resp, &r) == nil {
		c.params.learn(r.Result)
	}
}

// resume reopens an event stream after lastID.
func (c *httpConn) resume(lastID string, retry time.Duration, deliver func([]byte)) (string, time.Duration, bool) {
	req, err := c.request(c.ctx, http.MethodGet, nil)
	if err != nil {
		return lastID, retry, false
	}
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := c.client.Do(req)
	if err != nil {
		return lastID, retry, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		return lastID, retry, false
	}
	last, r := c.events(resp.Body, deliver)
	if last == "" {
		last = lastID
	}
	return last, r, true
}

// listen holds the GET stream open for the server's own requests and
// notifications, reopening it while the server keeps it; ready is closed
// once the server has answered the first GET (or it failed).
func (c *httpConn) listen(ready chan struct{}) {
	var once sync.Once
	isReady := func() { once.Do(func() { close(ready) }) }
	defer isReady()
	lastID, retry, failures := "", time.Second, 0
	for c.ctx.Err() == nil && failures < 5 {
		req, err := c.request(c.ctx, http.MethodGet, nil)
		if err != nil {
			return
		}
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := c.client.Do(req)
		isReady()
		if err != nil {
			failures++
		} else {
			ok := resp.StatusCode == http.StatusOK && mediaType(resp.Header.Get("Content-Type")) == "text/event-stream"
			if resp.StatusCode == http.StatusMethodNotAllowed {
				resp.Body.Close()
				return // the server offers no such stream
			}
			if ok {
				failures = 0
				var last string
				last, retry = c.events(resp.Body, c.push)
				if last != "" {
					lastID = last
				}
			} else {
				failures++
			}
			resp.Body.Close()
		}
		select {
		case <-time.After(retry):
		case <-c.ctx.Done():
		}
	}
}

// events reads server-sent events, passing each message event's data on;
// it returns the last event id and the retry delay the server asked for.
func (c *httpConn) events(r io.Reader, deliver func([]byte)) (lastID string, retry time.Duration) {
	retry = time.Second
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine+16)
	var data bytes.Buffer
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data.Len() > 0 && (event == "" || event == "message") {
				deliver(append([]byte(nil), bytes.TrimSpace(data.Bytes())...))
			}
			data.Reset()
			event = ""
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		case "event":
			event = value
		case "id":
			lastID = value
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
				retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		fmt.Fprintln(c.diag, "undolog proxy: an event over 64 MiB from the upstream server was dropped")
	}
	return lastID, retry
}

// Close ends the session (a DELETE, as the transport asks of a client that
// is done) and stops every stream.
func (c *httpConn) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		sid := c.sessionID
		c.mu.Unlock()
		c.cancel()
		if sid != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if req, err := c.request(ctx, http.MethodDelete, nil); err == nil {
				if resp, err := c.client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
			cancel()
		}
		close(c.closed)
	})
	return nil
}

func mediaType(v string) string {
	t, _, _ := strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(t))
}
