// Package mcpclient is the MCP client undolog uses for the calls it makes
// itself (compensations during undo, policy init): it starts a server command
// and talks to it over stdio, or reaches a server over Streamable HTTP, lists
// and calls tools. It is a small JSON-RPC client over internal/mcpwire's
// transports (the proxy's own), so that the binary links no MCP SDK; it
// depends on no other undolog package, so the layers above (saga's callers,
// proxy, cmd) can all use it.
package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/undolog/undolog/internal/child"
	"github.com/undolog/undolog/internal/mcpwire"
)

// protocolVersions are the MCP protocol versions the client speaks, newest
// first: it asks for the first, and accepts any of them in the answer.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Client is an MCP client session with an upstream server, for the calls
// undolog makes itself: compensations during undo, and policy init.
type Client struct {
	conn mcpwire.Conn
	// ProtocolVersion is the version the server answered to initialize,
	// or mcpwire.StatelessVersion when it said in server/discover that it
	// speaks that (every request then says so in its _meta).
	ProtocolVersion string
	stateless       bool

	mu      sync.Mutex
	nextID  int64
	pending map[string]chan reply // request id (its JSON) -> who waits for the answer

	done    chan struct{} // closed when the connection has ended
	readErr error         // why it ended; set before done is closed

	// Messages go out in the order they were sent, by one goroutine: a
	// Write may block (an HTTP POST waits for its answer, a pipe the server
	// does not read fills), and no caller waits on it past its context.
	qmu   sync.Mutex
	queue []outgoing
	wake  chan struct{}

	closeOnce sync.Once
	closeErr  error
}

type outgoing struct {
	msg     []byte
	written chan error
}

type reply struct {
	result json.RawMessage
	err    error
	lost   bool // the answer was lost on the way (the transport says so)
}

// RPCError is a JSON-RPC error the server answered.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("MCP error %d: %s", e.Code, e.Message) }

// Tool is one tool a server lists.
type Tool struct {
	Name        string           `json:"name"`
	Description string           `json:"description,omitempty"`
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
	InputSchema json.RawMessage  `json:"inputSchema,omitempty"`
}

// ToolAnnotations are a tool's hints, as MCP defines them (an unset
// destructiveHint or openWorldHint means true).
type ToolAnnotations struct {
	ReadOnlyHint    bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool `json:"openWorldHint,omitempty"`
}

// Dial starts the server command and connects to it; an HTTP upstream
// (see Remote) is connected to over Streamable HTTP, its headers read from
// the environment again.
func Dial(ctx context.Context, argv []string) (*Client, error) { return DialIn(ctx, argv, "") }

// DialIn is Dial with the server command started in dir ("": this
// process's directory).
func DialIn(ctx context.Context, argv []string, dir string) (*Client, error) {
	if len(argv) == 0 {
		return nil, errors.New("no MCP server command")
	}
	var conn mcpwire.Conn
	name := strings.Join(argv, " ")
	if r, ok, err := ParseRemote(argv); ok {
		if err != nil {
			return nil, err
		}
		header, err := r.Header(os.Getenv)
		if err != nil {
			return nil, err
		}
		name = r.URL
		conn = mcpwire.DialHTTP(r.URL, header, nil)
	} else {
		// The server's stderr is dropped, as the SDK's command transport did:
		// its banner is no part of undo's output.
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		// Killed outright, undo leaves the compensation in doubt: a server
		// finishing it meanwhile would make it beside the retry.
		child.Prepare(cmd)
		if conn, err = mcpwire.Start(cmd); err != nil {
			return nil, fmt.Errorf("connect to MCP server %s: %w", name, err)
		}
	}
	c := newClient(conn)
	if err := c.connect(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("connect to MCP server %s: %w", name, err)
	}
	return c, nil
}

func newClient(conn mcpwire.Conn) *Client {
	c := &Client{conn: conn, pending: map[string]chan reply{}, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	go c.read()
	go c.write()
	return c
}

// connect discovers the server as a client of 2026-07-28 does, and falls
// back to initialize when the server does not speak that version (any
// error: an older server knows no server/discover). A server of an older
// version may leave server/discover unanswered: with no answer after
// discoverHedge, initialize goes too, and the first of the two to succeed
// says how the server is spoken to.
func (c *Client) connect(ctx context.Context) error {
	dctx, cancelDiscover := context.WithTimeout(ctx, discoverWait)
	defer cancelDiscover()
	discovered := make(chan error, 1) // nil: the server speaks StatelessVersion
	go func() { discovered <- c.discover(dctx) }()
	hedge := time.NewTimer(discoverHedge)
	defer hedge.Stop()
	select {
	case err := <-discovered:
		if err == nil {
			c.ProtocolVersion, c.stateless = mcpwire.StatelessVersion, true
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		version, err := c.initializeCall(ctx)
		if err != nil {
			return err
		}
		return c.initialized(ctx, version)
	case <-hedge.C:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	ictx, cancelInitialize := context.WithCancel(ctx)
	defer cancelInitialize()
	type answer struct {
		version string
		err     error
	}
	initialized := make(chan answer, 1)
	go func() {
		v, err := c.initializeCall(ictx)
		initialized <- answer{v, err}
	}()
	var initErr error
	for discovered != nil || initialized != nil {
		select {
		case err := <-discovered:
			if err == nil {
				// Its session, if the server makes one, is abandoned.
				if cancelInitialize(); initialized != nil {
					<-initialized
				}
				c.ProtocolVersion, c.stateless = mcpwire.StatelessVersion, true
				return nil
			}
			discovered = nil
		case a := <-initialized:
			if a.err == nil {
				if cancelDiscover(); discovered != nil {
					<-discovered
				}
				return c.initialized(ctx, a.version)
			}
			initErr, initialized = a.err, nil
		}
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return initErr
}

// discover asks the server whether it speaks StatelessVersion: nil if it
// says so.
func (c *Client) discover(ctx context.Context) error {
	res, err := c.call(ctx, "server/discover", map[string]any{metaKey: statelessMeta()})
	if err != nil {
		return err
	}
	var r struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	if !slices.Contains(r.SupportedVersions, mcpwire.StatelessVersion) {
		return fmt.Errorf("it speaks %s, not %s", strings.Join(r.SupportedVersions, ", "), mcpwire.StatelessVersion)
	}
	return nil
}

// discoverWait bounds the wait for an answer to server/discover, and
// discoverHedge is how long it goes alone before initialize goes too (a
// server started a moment ago, npx say, answers late, and in order).
const (
	discoverWait  = 10 * time.Second
	discoverHedge = time.Second
)

// metaKey is the member of a request's params that holds its _meta.
const metaKey = "_meta"

// statelessMeta is the _meta each request says who the client is in under
// 2026-07-28.
func statelessMeta() map[string]any {
	return map[string]any{
		mcpwire.MetaProtocolVersion:    mcpwire.StatelessVersion,
		mcpwire.MetaClientInfo:         clientInfo,
		mcpwire.MetaClientCapabilities: map[string]any{},
	}
}

// clientInfo is how undolog names itself to a server.
var clientInfo = map[string]any{"name": "undolog", "version": "1"}

// initializeCall asks the server to initialize, and returns the version
// it answered.
func (c *Client) initializeCall(ctx context.Context) (string, error) {
	res, err := c.call(ctx, "initialize", map[string]any{
		"protocolVersion": protocolVersions[0],
		"capabilities":    map[string]any{},
		"clientInfo":      clientInfo,
	})
	if err != nil {
		return "", err
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return "", fmt.Errorf("its answer to initialize: %w", err)
	}
	if !slices.Contains(protocolVersions, r.ProtocolVersion) {
		return "", fmt.Errorf("it speaks MCP protocol version %q; undolog speaks %s", r.ProtocolVersion, strings.Join(protocolVersions, ", "))
	}
	return r.ProtocolVersion, nil
}

// initialized ends the initialization the server answered with version.
func (c *Client) initialized(ctx context.Context, version string) error {
	c.ProtocolVersion = version
	select {
	case err := <-c.notify("notifications/initialized", nil):
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-c.done:
		return c.readErr
	}
}

// CallTool calls a tool; a tool error result is an error.
func (c *Client) CallTool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	params := map[string]any{"name": name}
	if len(args) > 0 {
		params["arguments"] = args
	}
	out, err := c.call(ctx, "tools/call", params)
	if err != nil {
		return nil, err
	}
	failed, err := ToolResult(out)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", name, err)
	case failed:
		return out, fmt.Errorf("%s: %s", name, ResultText(out))
	}
	return out, nil
}

// ToolResult reads a tools/call answer's result: a tool error (isError
// true) failed. Only a tool result says what happened: anything else the
// server answered (null, an array, neither a content array nor structured
// content, isError not a boolean, a task it was not asked for) says
// neither, and the call may have acted: ErrUnreadableAnswer.
func ToolResult(result json.RawMessage) (failed bool, err error) {
	var r map[string]json.RawMessage
	if json.Unmarshal(result, &r) != nil || r == nil {
		return false, fmt.Errorf("%w: %.200s", ErrUnreadableAnswer, result)
	}
	var members struct {
		IsError           json.RawMessage `json:"isError"`
		Content           json.RawMessage `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Task              json.RawMessage `json:"task"`
		ResultType        json.RawMessage `json:"resultType"`
	}
	if err := mcpwire.Unmarshal(result, &members); err != nil {
		// isError twice, or "IsError": read as sent or with case folded,
		// it says otherwise.
		return false, fmt.Errorf("%w: %v", ErrUnreadableAnswer, err)
	}
	var resultType string
	json.Unmarshal(r["resultType"], &resultType)
	if _, task := r["task"]; task || resultType == "task" {
		return false, fmt.Errorf("%w: a task handle, which was not asked for", ErrUnreadableAnswer)
	}
	if v, ok := r["isError"]; ok && (json.Unmarshal(v, &failed) != nil || string(v) == "null") {
		return false, fmt.Errorf("%w: isError is %.50s", ErrUnreadableAnswer, v)
	}
	if failed {
		return true, nil // it says it failed, whatever else it holds
	}
	var content []json.RawMessage
	var structured map[string]json.RawMessage
	if v, ok := r["content"]; ok && json.Unmarshal(v, &content) == nil && content != nil {
		return false, nil
	}
	if v, ok := r["structuredContent"]; ok && json.Unmarshal(v, &structured) == nil && structured != nil {
		return false, nil // a result of structured content alone, as some servers give
	}
	return false, fmt.Errorf("%w: no content array: %.200s", ErrUnreadableAnswer, result)
}

// WellFormedError says whether a JSON-RPC error object says something: a
// code or a message (an empty object says neither what failed nor that it
// did).
func WellFormedError(code int, message string) bool { return code != 0 || message != "" }

// ErrUnreadableAnswer is in the error of a request whose answer came but
// says neither that it was done nor that it failed (not a JSON-RPC answer, a
// tools/call answer that is no tool result): the server may have acted on it.
var ErrUnreadableAnswer = errors.New("its answer says neither success nor failure: the server may have acted on it")

// Tools lists the server's tools, every page of them.
func (c *Client) Tools(ctx context.Context) ([]*Tool, error) {
	var tools []*Tool
	seen := map[string]bool{}
	cursor := ""
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := c.call(ctx, "tools/list", params)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []*Tool `json:"tools"`
			NextCursor string  `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		tools = append(tools, page.Tools...)
		if page.NextCursor == "" {
			return tools, nil
		}
		// A server that hands out a cursor again, or new ones for good,
		// would have us loop.
		if seen[page.NextCursor] {
			return nil, fmt.Errorf("tools/list: the server repeated the cursor %q", page.NextCursor)
		}
		if len(seen) >= maxToolPages {
			return nil, fmt.Errorf("tools/list: the server gave over %d pages of tools", maxToolPages)
		}
		seen[page.NextCursor] = true
		cursor = page.NextCursor
	}
}

// Close ends the session: a started server's stdin is closed, it is waited
// for (5 s at most) and then killed; an HTTP session is ended with a DELETE.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.conn.Close() })
	return c.closeErr
}

// maxToolPages bounds the pages of tools/list followed.
const maxToolPages = 1000

// ErrNoAnswer is in the error of a request that was sent and got no answer
// (the connection ended, the answer was lost, ctx ended): the server may
// have acted on it.
var ErrNoAnswer = errors.New("sent, and no answer came: the server may have acted on it")

// call sends a request and waits for its answer. When ctx ends first, the
// server is told (notifications/cancelled) and the call returns ctx's error.
func (c *Client) call(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	if c.stateless {
		params[metaKey] = statelessMeta()
	}
	c.mu.Lock()
	c.nextID++
	id := strconv.FormatInt(c.nextID, 10)
	ch := make(chan reply, 1)
	c.pending[mcpwire.IDKey(json.RawMessage(id))] = ch
	c.mu.Unlock()
	defer c.forget(mcpwire.IDKey(json.RawMessage(id)))
	msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	written := c.send(msg)
	sent := false
	// noAnswer is the error of a request written that got no answer.
	noAnswer := func(err error) error {
		if sent {
			return fmt.Errorf("%s: %w (%w)", method, ErrNoAnswer, err)
		}
		return fmt.Errorf("%s: %w", method, err)
	}
	for {
		select {
		case err := <-written:
			if err != nil {
				return nil, fmt.Errorf("%s: %w", method, err)
			}
			written, sent = nil, true
		case r := <-ch:
			if errors.Is(r.err, ErrUnreadableAnswer) {
				return nil, fmt.Errorf("%s: %w", method, r.err)
			}
			if r.lost {
				sent = true
				return nil, noAnswer(r.err)
			}
			if r.err != nil {
				return nil, fmt.Errorf("%s: %w", method, r.err)
			}
			return r.result, nil
		case <-ctx.Done():
			// initialize is never cancelled (MCP says so): the session is
			// abandoned instead. The cancellation goes out after the request.
			if method != "initialize" {
				c.notify("notifications/cancelled", map[string]any{"requestId": json.RawMessage(id), "reason": context.Cause(ctx).Error()})
			}
			return nil, noAnswer(context.Cause(ctx))
		case <-c.done:
			// An answer may have come just before the end.
			select {
			case r := <-ch:
				if r.err == nil {
					return r.result, nil
				}
				return nil, fmt.Errorf("%s: %w", method, r.err)
			default:
			}
			return nil, noAnswer(c.readErr)
		}
	}
}

func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// notify sends a notification; the channel has the Write's error.
func (c *Client) notify(method string, params any) chan error {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	msg, _ := json.Marshal(m)
	return c.send(msg)
}

// send queues msg to go out after those sent before it; the channel has
// the Write's error once it is written.
func (c *Client) send(msg []byte) chan error {
	written := make(chan error, 1)
	c.qmu.Lock()
	c.queue = append(c.queue, outgoing{msg, written})
	c.qmu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // already woken
	}
	return written
}

// write writes the queued messages, in order, until the connection ends.
func (c *Client) write() {
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		for {
			c.qmu.Lock()
			if len(c.queue) == 0 {
				c.qmu.Unlock()
				break
			}
			o := c.queue[0]
			c.queue = c.queue[1:]
			c.qmu.Unlock()
			o.written <- c.conn.Write(o.msg)
		}
	}
}

// answer hands the answer to request id to its caller, if it still waits.
func (c *Client) answer(id json.RawMessage, r reply) {
	c.mu.Lock()
	ch, ok := c.pending[mcpwire.IDKey(id)]
	c.mu.Unlock()
	if ok {
		select {
		case ch <- r:
		default: // answered twice: the first stands
		}
	}
}

// answerAll answers every waiting call: with r if one waits, as lost if
// more do (an answer of no id may be any one's).
func (c *Client) answerAll(r reply) {
	c.mu.Lock()
	waiting := make([]chan reply, 0, len(c.pending))
	for _, ch := range c.pending {
		waiting = append(waiting, ch)
	}
	c.mu.Unlock()
	if len(waiting) > 1 {
		r = reply{err: fmt.Errorf("%w: an error of no id, with %d calls waiting", ErrUnreadableAnswer, len(waiting)), lost: true}
	}
	for _, ch := range waiting {
		select {
		case ch <- r:
		default:
		}
	}
}

// read takes each message the server sends until the connection ends.
func (c *Client) read() {
	defer close(c.done)
	for {
		msg, err := c.conn.Read()
		var big *mcpwire.TooLargeError
		var lost *mcpwire.LostError
		switch {
		case errors.As(err, &big):
			if len(big.ID) > 0 && !big.Request {
				c.answer(big.ID, reply{err: fmt.Errorf("%w: it is over 64 MiB and was dropped", ErrUnreadableAnswer)})
			}
			continue
		case errors.As(err, &lost):
			c.answer(lost.ID, reply{err: errors.New(lost.Reason), lost: true})
			continue
		case errors.Is(err, io.EOF):
			c.readErr = errors.New("the MCP server closed the connection")
			return
		case err != nil:
			c.readErr = fmt.Errorf("the connection to the MCP server: %w", err)
			return
		}
		if msg = bytes.TrimSpace(msg); len(msg) > 0 && msg[0] == '[' {
			var batch []json.RawMessage
			if json.Unmarshal(msg, &batch) == nil {
				for _, m := range batch {
					c.handle(m)
				}
			}
			continue
		}
		c.handle(msg)
	}
}

// handle takes one message: an answer goes to its caller, a request from
// the server is answered (ping, and "no such method" to the rest: the client
// offers no capabilities), a notification is dropped.
func (c *Client) handle(msg []byte) {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	err := mcpwire.Unmarshal(msg, &m)
	var ambiguous *mcpwire.KeyError
	if errors.As(err, &ambiguous) {
		// Read as sent (the last of two keys, case kept) and as
		// encoding/json reads it (case folded), the message differs: an
		// answer says neither that its call was done nor that it failed,
		// and every call waiting is in doubt when its id is what differs.
		unreadable := reply{err: fmt.Errorf("%w: %v", ErrUnreadableAnswer, ambiguous), lost: true}
		switch {
		case ambiguous.TopLevel() && strings.EqualFold(ambiguous.Key, "id"):
			c.answerAll(unreadable)
		case m.Method == nil && len(m.ID) > 0:
			c.answer(m.ID, unreadable)
		}
		return
	}
	if err != nil {
		return
	}
	if string(m.ID) == "null" {
		m.ID = nil
		if m.Method == nil && m.Error != nil {
			// An error the server could give no request's id: it could not
			// read one (a parse error). With one call waiting it is that
			// call's, which was not run; with more, none can be told.
			var rpcErr *RPCError
			if json.Unmarshal(m.Error, &rpcErr) != nil || rpcErr == nil || !WellFormedError(rpcErr.Code, rpcErr.Message) {
				c.answerAll(reply{err: fmt.Errorf("%w: %.200s", ErrUnreadableAnswer, msg), lost: true})
			} else {
				c.answerAll(reply{err: rpcErr})
			}
			return
		}
	}
	if m.Method == nil && len(m.ID) > 0 {
		// An answer to one of ours must be JSON-RPC 2.0 with a result or a
		// well-formed error: one that is neither is unreadable, and the
		// request may have been acted on (it is not a failure to retry).
		var rpcErr *RPCError
		switch {
		case m.JSONRPC != "2.0", m.Result == nil && m.Error == nil, m.Result != nil && m.Error != nil,
			m.Error != nil && (json.Unmarshal(m.Error, &rpcErr) != nil || rpcErr == nil || !WellFormedError(rpcErr.Code, rpcErr.Message)):
			c.answer(m.ID, reply{err: fmt.Errorf("%w: %.200s", ErrUnreadableAnswer, msg), lost: true})
		case m.Error != nil:
			c.answer(m.ID, reply{err: rpcErr})
		default:
			c.answer(m.ID, reply{result: m.Result})
		}
		return
	}
	method := ""
	if m.Method != nil {
		method = *m.Method
	}
	switch {
	case method != "" && len(m.ID) > 0:
		var out map[string]any
		if method == "ping" {
			out = map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{}}
		} else {
			out = map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": &RPCError{Code: -32601, Message: "method not found: " + method}}
		}
		b, _ := json.Marshal(out)
		c.send(b)
	}
}

// ResultText is the text content of a tools/call result, cut to 300 bytes:
// what an error message quotes of a tool's failure.
func ResultText(result json.RawMessage) string {
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	json.Unmarshal(result, &r)
	var b bytes.Buffer
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	s := b.String()
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
