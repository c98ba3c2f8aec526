// Package proxy owns `undolog proxy`: an MCP stdio proxy that puts an MCP
// server behind the effect log. Everything but tools/call passes through
// unchanged; each tools/call is classified by the policy, logged before it
// runs, replayed when repeated, held for approval when irreversible, and
// recorded with the compensation that undoes it.
package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/mcpwire"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/mcpclient"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// maxLine bounds one JSON-RPC message: the transports' bound, so that a
// message one lets through the other does not drop.
const maxLine = mcpwire.MaxMessage

// DefaultApprovalWait stays below the 60 s most MCP clients wait for a call.
const DefaultApprovalWait = 45 * time.Second

// JSON-RPC error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeInvalidParams  = -32602
	codeInternal       = -32603
)

var errUpstreamGone = errors.New("the upstream MCP server exited")

// message is a JSON-RPC 2.0 message; raw keeps the bytes it came as, so that
// what is passed through is passed through unchanged.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
	raw     []byte
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (m *message) isResponse() bool { return m.Method == "" && len(m.ID) > 0 }

// Proxy is one proxy run between a client (on in and out) and an upstream
// server it starts.
type Proxy struct {
	Log          effectlog.Log
	Session      string
	Policy       *Policy
	ApprovalWait time.Duration
	// Redact keeps matching fields of arguments and results out of the log.
	Redact []string
	// Dir is the directory the upstream runs in, where command
	// compensations run at undo; "": the proxy's own.
	Dir string
	// Diagnostics receives the proxy's own notes and the server's stderr.
	Diagnostics io.Writer
	// Now is the clock of owners and approval waits; nil: time.Now.
	Now func() time.Time
	// Lease is how long the lease of a running call's owner lasts unless
	// renewed (see lifecycle.Lifecycle.Lease); zero: model.DefaultLease.
	Lease time.Duration
	// CLI starts the commands that hints name ("undolog --log ADDR" when
	// the log is not the default); "" means "undolog".
	CLI string
	// StopGrace is how long the calls the server is running have to be
	// answered after a signal; zero: DefaultStopGrace.
	StopGrace time.Duration
	// SessionActor is who the records of the sessions the proxy makes name.
	SessionActor string
	// Upstream is what the sessions the proxy makes record as their
	// upstream: the server command, or an HTTP server's recorded address;
	// nil: the command Run starts.
	Upstream []string
	// StateEnv names the environment variables that locate the upstream's
	// state (a server started here inherits them): each session the proxy
	// makes records them, with their values or as unset, so that undo acts
	// on the same state or refuses.
	StateEnv []string

	glowMu sync.Mutex
	glow   *time.Timer // ends the log's afterglow (keepLogAWhile)

	sessMu  sync.Mutex
	current string // the session calls go in, once chosen (session.go)
	answers answerWaits

	life     lifeline
	clientMu sync.Mutex
	client   Conn
	upMu     sync.Mutex
	up       Conn
	upGone   chan struct{}

	waitMu  sync.Mutex
	waiting map[string]chan message
	seq     atomic.Int64
	idOnce  sync.Once
	idBase  string

	inflightMu sync.Mutex
	inflight   map[string]bool // ids of the client's requests not yet answered

	askedMu sync.Mutex
	asked   map[string]bool // ids of the server's requests the client has not answered

	infoMu      sync.Mutex
	clientName  string
	listIDs     map[string]bool
	annotations map[string]bool // tool -> readOnlyHint
	annotated   bool
	calls       sync.WaitGroup

	cancelMu sync.Mutex
	cancels  map[string]context.CancelCauseFunc // tools/call id -> its cancel
}

// errCancelledByClient is the cause of a call's context when the client sent
// notifications/cancelled for it: the call stops waiting, and nothing more
// is written to the client for it (the MCP rule for cancelled requests).
var errCancelledByClient = errors.New("cancelled by the client")

// Run starts the upstream server, serves the client until it closes its
// input (nil), ctx ends (ErrInterrupted) or the server exits
// (ErrUpstreamExited), then stops the server: the stdio transport on both
// sides.
func (p *Proxy) Run(ctx context.Context, upstream []string, in io.Reader, out io.Writer) error {
	if p.Diagnostics == nil {
		p.Diagnostics = io.Discard
	}
	up, err := StartCommand(upstream, p.Diagnostics)
	if err != nil {
		return err
	}
	if p.Upstream == nil {
		p.Upstream = upstream
	}
	return p.Serve(ctx, NewStdioConn(in, out), up)
}

// Serve relays between the client and the upstream server until the
// client's side ends, then closes the upstream. A Proxy serves once.
func (p *Proxy) Serve(ctx context.Context, client, up Conn) error {
	if p.ApprovalWait <= 0 {
		p.ApprovalWait = DefaultApprovalWait
	}
	if p.Diagnostics == nil {
		p.Diagnostics = io.Discard
	}
	client = newBatcher(client)
	p.client, p.up, p.upGone = client, up, make(chan struct{})
	p.waiting, p.listIDs, p.annotations = map[string]chan message{}, map[string]bool{}, map[string]bool{}
	go p.readUpstream(up)
	why := p.serve(ctx, func() { p.readClient(ctx, client) })
	why = p.drain(ctx, why)
	defer p.endAfterglow()
	return p.stopUpstream(why, up.Close)
}

func (p *Proxy) note(format string, args ...any) {
	if p.Diagnostics != nil {
		// Escaped whole: a note quotes what the client and the upstream sent.
		fmt.Fprintln(p.Diagnostics, "undolog proxy: "+textfmt.Escape(fmt.Sprintf(format, args...)))
	}
}

func (p *Proxy) writeClient(b []byte) error {
	p.clientMu.Lock()
	defer p.clientMu.Unlock()
	return p.client.Write(b)
}

// reply answers a tools/call, unless the client has cancelled it, and says
// whether the answer was written.
func (p *Proxy) reply(ctx context.Context, b []byte) bool {
	// The request is answered (or, cancelled, needs no answer): its id is
	// the client's to use again.
	if id, ok := ctx.Value(requestIDKey{}).(json.RawMessage); ok {
		p.releaseID(id)
	}
	if errors.Is(context.Cause(ctx), errCancelledByClient) {
		return false
	}
	return p.writeClient(b) == nil
}

func (p *Proxy) writeUpstream(b []byte) error {
	select {
	case <-p.upGone:
		return errUpstreamGone
	default:
	}
	p.upMu.Lock()
	defer p.upMu.Unlock()
	return p.up.Write(b)
}

func encode(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func errorResponse(id json.RawMessage, code int, msg string) []byte {
	return mcpwire.ErrorResponse(id, code, msg)
}

func resultResponse(id json.RawMessage, result json.RawMessage) []byte {
	return encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// toolError answers a tools/call with a tool error result: the agent sees it
// and can act on it.
func toolError(id json.RawMessage, text string) []byte {
	return resultResponse(id, toolErrorResult(text))
}

// toolErrorResult is the result of a tool error with text.
func toolErrorResult(text string) []byte {
	return encode(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}, "isError": true})
}

// parse reads a server's message. Read two ways (a *mcpwire.KeyError), it
// is read as encoding/json has it, with that error.
func parse(line []byte) (message, error) {
	var m message
	err := mcpwire.Unmarshal(line, &m)
	var ambiguous *mcpwire.KeyError
	if err != nil && !errors.As(err, &ambiguous) {
		return m, err
	}
	m.raw = line
	return m, err
}

// refuseParams answers a request whose params the server may read another
// way than the proxy: it is not passed on.
func (p *Proxy) refuseParams(m message, err error) {
	p.note("a client %s was not passed on: %v", m.Method, err)
	if len(m.ID) > 0 {
		p.releaseID(m.ID)
		p.writeClient(errorResponse(m.ID, codeInvalidParams, "invalid params: "+err.Error()+"; it was not passed on"))
	}
}

// serverAsks notes a request of the server's passed on to the client, which
// the client answers.
func (p *Proxy) serverAsks(id json.RawMessage) {
	p.askedMu.Lock()
	defer p.askedMu.Unlock()
	if p.asked == nil {
		p.asked = map[string]bool{}
	}
	p.asked[idKey(id)] = true
}

// answersServer tells whether id is that of a request of the server's the
// client has not answered yet, and forgets it: a response to nothing the
// server asked would be answered by nobody.
func (p *Proxy) answersServer(id json.RawMessage) bool {
	p.askedMu.Lock()
	defer p.askedMu.Unlock()
	if !p.asked[idKey(id)] {
		return false
	}
	delete(p.asked, idKey(id))
	return true
}

// ownIDs is the random part of the ids of the proxy's own requests to the
// server (captures, tool lists): the server's answers are routed by id, and
// a client that could send a request with the same id would have its answer
// taken for the proxy's (a capture that says a file did not exist).
func (p *Proxy) ownIDs() string {
	p.idOnce.Do(func() {
		var b [12]byte
		rand.Read(b[:])
		p.idBase = hex.EncodeToString(b[:])
	})
	return p.idBase
}

// claimID records the id of a client request in flight; false if a request
// with that id is in flight already (JSON-RPC ids must differ: two answers
// with one id would go to the wrong call, and the wrong result be logged).
func (p *Proxy) claimID(id json.RawMessage) bool {
	p.inflightMu.Lock()
	defer p.inflightMu.Unlock()
	if p.inflight == nil {
		p.inflight = map[string]bool{}
	}
	if p.inflight[idKey(id)] {
		return false
	}
	p.inflight[idKey(id)] = true
	return true
}

// requestIDKey is the context key of the id of the client request a
// tools/call goroutine answers.
type requestIDKey struct{}

// releaseID forgets a client request's id once it is answered.
func (p *Proxy) releaseID(id json.RawMessage) {
	p.inflightMu.Lock()
	delete(p.inflight, idKey(id))
	p.inflightMu.Unlock()
}

// readClient handles the client's messages until it closes its input.
func (p *Proxy) readClient(ctx context.Context, in Conn) {
	err := eachMessage(in, func(line []byte) {
		m, refused := readClientMessage(line)
		if refused == nil && m.Method == "" && !p.answersServer(m.ID) {
			refused = &refusal{note: "a response to no request of the server's, id " + oneLineID(m.ID)}
		}
		switch {
		case refused != nil:
			p.note("a client message was not passed on: %s", refused.note)
			if refused.answer != nil {
				p.writeClient(refused.answer)
			}
			return
		case m.Method != "" && len(m.ID) > 0 && !p.claimID(m.ID):
			p.writeClient(errorResponse(m.ID, codeInvalidRequest, "invalid request: the id "+string(m.ID)+" is used by a request still in flight"))
			return
		case m.Method == "tools/call" && len(m.ID) == 0:
			// A notification is not answered, and so its call would be
			// made unlogged: it is not passed on.
			p.note("a tools/call without an id (a notification) was not passed on")
			return
		}
		switch m.Method {
		case "initialize":
			var params struct {
				ClientInfo struct {
					Name string `json:"name"`
				} `json:"clientInfo"`
			}
			if err := decodeParams(m.Params, &params); err != nil {
				p.refuseParams(m, err)
				return
			}
			p.infoMu.Lock()
			p.clientName = params.ClientInfo.Name
			p.infoMu.Unlock()
		case "tools/list":
			p.infoMu.Lock()
			p.listIDs[idKey(m.ID)] = true
			p.infoMu.Unlock()
		case "tools/call":
			if len(m.ID) > 0 {
				if !p.admit() {
					p.writeClient(errorResponse(m.ID, codeInternal, "undolog: the proxy is stopping; the call was not made"))
					return
				}
				callCtx, cancel := context.WithCancelCause(context.WithValue(ctx, requestIDKey{}, m.ID))
				key := idKey(m.ID)
				p.cancelMu.Lock()
				if p.cancels == nil {
					p.cancels = map[string]context.CancelCauseFunc{}
				}
				p.cancels[key] = cancel
				p.cancelMu.Unlock()
				go func() {
					defer p.calls.Done()
					defer func() {
						p.cancelMu.Lock()
						delete(p.cancels, key)
						p.cancelMu.Unlock()
						cancel(nil)
					}()
					if !p.toolCall(callCtx, m) {
						p.releaseID(m.ID) // answered by the proxy
					}
				}()
				return
			}
		case "notifications/cancelled":
			// Stop a call still waiting here (for approval, say); the
			// notification goes on to the server too, which may be running it.
			var params struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if err := decodeParams(m.Params, &params); err != nil {
				p.refuseParams(m, err)
				return
			}
			p.cancelMu.Lock()
			if cancel := p.cancels[idKey(params.RequestID)]; cancel != nil {
				cancel(errCancelledByClient)
			}
			p.cancelMu.Unlock()
		}
		if err := p.writeUpstream(line); err != nil && len(m.ID) > 0 && m.Method != "" {
			p.writeClient(errorResponse(m.ID, codeInternal, err.Error()))
		}
	}, p.clientTooBig)
	if err != nil {
		p.note("reading the client: %v", err)
	}
}

// readUpstream handles the server's messages until it exits.
func (p *Proxy) readUpstream(r Conn) {
	eachMessage(r, func(line []byte) {
		m, err := parse(line)
		var ambiguous *mcpwire.KeyError
		if errors.As(err, &ambiguous) {
			// Read one way by the proxy and another by the client: an
			// answer is passed on but read as saying nothing (a logged
			// call so answered is in doubt, a tool list teaches nothing); a
			// request or notification is not passed on.
			p.note("a server message the client may read otherwise: %v", ambiguous)
			switch {
			case ambiguous.TopLevel() && strings.EqualFold(ambiguous.Key, "id"):
				return // whose answer it is is unclear
			case m.isResponse():
				m = message{ID: m.ID, raw: m.raw}
			default:
				if len(m.ID) > 0 {
					p.writeUpstream(errorResponse(m.ID, codeInvalidRequest, "invalid request: "+ambiguous.Error()))
				}
				return
			}
		} else if err != nil || m.JSONRPC != "2.0" && !m.isResponse() {
			// An answer to a request (an id, no method) goes to whoever
			// asked even when it is not JSON-RPC 2.0: a logged call so
			// answered is left in doubt (record), a client's request gets
			// what the server said; dropped, either would wait for good.
			p.note("malformed message from the server: %.200s", line)
			if err != nil {
				p.writeUpstream(errorResponse(nil, codeParse, "parse error: "+err.Error()))
			} else {
				p.writeUpstream(errorResponse(m.ID, codeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`))
			}
			return
		}
		if m.isResponse() {
			key := idKey(m.ID)
			p.waitMu.Lock()
			ch, ours := p.waiting[key]
			delete(p.waiting, key)
			p.waitMu.Unlock()
			if ours {
				ch <- m
				return
			}
			p.infoMu.Lock()
			isList := p.listIDs[key]
			delete(p.listIDs, key)
			p.infoMu.Unlock()
			if isList {
				p.learnAnnotations(m.Result, false)
			}
			p.releaseID(m.ID) // a client request's answer, passed on
		}
		if m.Method != "" && len(m.ID) > 0 {
			p.serverAsks(m.ID)
		}
		p.toolsChanged(m)
		p.writeClient(line)
	}, p.upstreamSkipped)
	close(p.upGone)
	p.waitMu.Lock()
	for key, ch := range p.waiting {
		close(ch)
		delete(p.waiting, key)
	}
	p.waitMu.Unlock()
}

// learnAnnotations keeps each tool's readOnlyHint from a tools/list result.
func (p *Proxy) learnAnnotations(result json.RawMessage, complete bool) string {
	var r struct {
		Tools []struct {
			Name        string `json:"name"`
			Annotations *struct {
				ReadOnlyHint bool `json:"readOnlyHint"`
			} `json:"annotations"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	if err := mcpwire.Unmarshal(result, &r); err != nil {
		if errors.As(err, new(*mcpwire.KeyError)) {
			p.note("a tool list the client may read otherwise was not learned from: %v", err)
		}
		return ""
	}
	p.infoMu.Lock()
	defer p.infoMu.Unlock()
	for _, t := range r.Tools {
		p.annotations[t.Name] = t.Annotations != nil && t.Annotations.ReadOnlyHint
	}
	if complete || r.NextCursor == "" {
		p.annotated = true
	}
	return r.NextCursor
}

// request sends the proxy's own request upstream and waits for the answer.
func (p *Proxy) request(ctx context.Context, method string, params any) (message, error) {
	id := json.RawMessage(strconv.Quote("undolog-" + p.ownIDs() + "-" + strconv.FormatInt(p.seq.Add(1), 10)))
	ch := p.expect(id)
	if err := p.writeUpstream(encode(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})); err != nil {
		p.forget(id)
		return message{}, err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return message{}, errUpstreamGone
		}
		if m.Error != nil {
			return m, fmt.Errorf("%s: %s (code %d)", method, m.Error.Message, m.Error.Code)
		}
		return m, nil
	case <-ctx.Done():
		p.forget(id)
		return message{}, ctx.Err()
	}
}

func (p *Proxy) expect(id json.RawMessage) chan message {
	ch := make(chan message, 1)
	p.waitMu.Lock()
	p.waiting[idKey(id)] = ch
	p.waitMu.Unlock()
	return ch
}

func (p *Proxy) forget(id json.RawMessage) {
	p.waitMu.Lock()
	delete(p.waiting, idKey(id))
	p.waitMu.Unlock()
}

// readOnly tells whether the server annotates the tool readOnlyHint, asking
// for the tool list once if the client has not yet.
func (p *Proxy) readOnly(ctx context.Context, tool string) (readOnly, known bool) {
	p.infoMu.Lock()
	annotated := p.annotated
	p.infoMu.Unlock()
	if !annotated {
		cursor := ""
		for {
			params := map[string]any{}
			if cursor != "" {
				params["cursor"] = cursor
			}
			m, err := p.request(ctx, "tools/list", params)
			if err != nil {
				p.note("tools/list for annotations: %v", err)
				break
			}
			if cursor = p.learnAnnotations(m.Result, false); cursor == "" {
				break
			}
		}
	}
	p.infoMu.Lock()
	defer p.infoMu.Unlock()
	ro, ok := p.annotations[tool]
	return ro, ok
}

func (p *Proxy) actor() string {
	p.infoMu.Lock()
	defer p.infoMu.Unlock()
	if p.clientName == "" {
		return "mcp-client"
	}
	return "mcp:" + textfmt.Escape(p.clientName) // the client names itself: no NUL or control bytes reach the log
}

// toolCall runs one tools/call through the effect log.
func (p *Proxy) toolCall(ctx context.Context, m message) (forwarded bool) {
	var params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := decodeParams(m.Params, &params); err != nil {
		p.reply(ctx, errorResponse(m.ID, codeInvalidParams, "invalid params: "+err.Error()+"; it was not passed on"))
		return false
	}
	if params.Name == "" {
		p.reply(ctx, errorResponse(m.ID, codeInvalidParams, "invalid params: tools/call needs a name"))
		return false
	}
	cls := p.Policy.Classify(params.Name, func() (bool, bool) { return p.readOnly(ctx, params.Name) })
	cls, err := tierOf(cls, params.Arguments)
	if err != nil {
		p.reply(ctx, toolError(m.ID, "undolog: the policy's tier cases for "+params.Name+" failed, so the call was not made: "+err.Error()))
		return false
	}
	if cls.Tier == sm.Safe || p.serverLacks(ctx, params.Name) {
		if err := p.writeUpstream(m.raw); err != nil {
			p.reply(ctx, errorResponse(m.ID, codeInternal, err.Error()))
			return false
		}
		return true // its id is in flight until the server's answer passes
	}
	m = p.plainCall(m)
	args := params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	req := effectlog.InterceptRequest{Session: p.Session, Tool: params.Name, Tier: cls.Tier, Args: args,
		CreateSession: true, Actor: p.actor(), Reason: cls.Reason, Redact: p.Redact,
		RunAgainAnswered: cls.Rule == nil || !cls.Rule.ReplayAlways}
	ctx = withAnswerKey(ctx, params.Name, args)
	lc := p.lifecycle()
	call, failed, err := p.intercept(ctx, lc, req, cls.Rule)
	if failed != nil {
		p.reply(ctx, resultResponse(m.ID, failed))
		return false
	}
	if err != nil {
		p.reply(ctx, toolError(m.ID, "undolog: the call was not made: "+err.Error()))
		return false
	}
	e := call.Effect
	switch call.Verdict {
	case lifecycle.Replayed:
		p.replyAnswer(ctx, resultResponse(m.ID, e.Result), e)
		return false
	case lifecycle.Rejected:
		p.reply(ctx, toolError(m.ID, p.rejection(ctx, e.ID, params.Name)))
		return false
	case lifecycle.InProgress:
		p.reply(ctx, toolError(m.ID, fmt.Sprintf("undolog: the same call (effect %d) is executing; retry it later", e.ID)))
		return false
	case lifecycle.InDoubt:
		// No reclaim here: the client cannot say it checked what happened.
		p.reply(ctx, toolError(m.ID, p.inDoubt(call)))
		return false
	}
	if call.NeedsDecision() {
		wait, done := p.approvalContext(ctx)
		msg := p.awaitApproval(wait, lc, call)
		done()
		if msg != "" {
			if errors.Is(context.Cause(ctx), errCancelledByClient) {
				p.note("the client cancelled %s (effect %d); its approval request stands", e.Tool, e.ID)
			}
			p.reply(ctx, toolError(m.ID, msg))
			return false
		}
	}
	return p.execute(ctx, lc, call, m)
}

func (p *Proxy) lifecycle() *lifecycle.Lifecycle {
	return &lifecycle.Lifecycle{Log: p.Log, Now: p.Now, Lease: p.Lease, Hold: true, Unavailable: func(err error) {
		if err != nil {
			p.note("%s; a call waiting for approval waits on, trying again until it answers", textfmt.OneLine(err.Error()))
		} else {
			p.note("the log's server answers again")
		}
	}}
}

func (p *Proxy) rejection(ctx context.Context, id uint64, tool string) string {
	d, err := p.Log.GetEffect(ctx, id)
	if err == nil && d.Approval != nil {
		a := d.Approval
		if a.Outcome == model.ApprovalTimedOut {
			return fmt.Sprintf("undolog: %s (effect %d) was not approved in time; it will not run", tool, id)
		}
		why := ""
		if a.Decision != "" {
			why = ": " + a.Decision
		}
		msg := fmt.Sprintf("undolog: %s (effect %d) was rejected by %s%s; it will not run", tool, id, a.DecidedBy, why)
		if s, err := p.Log.GetSession(ctx, d.Effect.Session); err == nil && s.State == sm.SessionHalted {
			msg += fmt.Sprintf(", and session %s is halted until a person resumes it: `%s session resume %s --as NAME --reason TEXT`", s.ID, p.cli(), s.ID)
		}
		return msg
	}
	return fmt.Sprintf("undolog: %s (effect %d) was rejected; it will not run", tool, id)
}

func (p *Proxy) cli() string {
	if p.CLI == "" {
		return "undolog"
	}
	return p.CLI
}

// awaitApproval waits up to ApprovalWait for a decision. It returns "" once
// approved, or the text of the tool error to answer with.
func (p *Proxy) awaitApproval(ctx context.Context, lc *lifecycle.Lifecycle, call *lifecycle.Call) string {
	e := call.Effect
	if e.State == sm.Pending {
		// One approved already (before a halt, say) goes ahead at once.
		p.note("effect %d (%s, irreversible) awaits approval: %s approve %d", e.ID, e.Tool, p.cli(), e.ID)
	}
	w, err := lc.Wait(ctx, call, p.ApprovalWait, nil)
	if err != nil {
		return "undolog: " + err.Error()
	}
	switch w.Outcome {
	case lifecycle.Approved:
		return ""
	case lifecycle.Refused:
		return p.rejection(ctx, e.ID, e.Tool)
	case lifecycle.Taken:
		return fmt.Sprintf("undolog: the same call (effect %d) is %s elsewhere; retry it later", e.ID, w.Detail.Effect.State)
	case lifecycle.Abandoned:
		return fmt.Sprintf("undolog: %s (effect %d) will not run: its session stopped accepting calls (%s) and closed the approval request", e.Tool, e.ID, w.Detail.Approval.Decision)
	case lifecycle.TimedOut:
		return fmt.Sprintf("undolog: %s is irreversible and waits for a person's approval (effect %d). "+
			"Ask them to run `%s approve %d` (or reject it), then call %s again with the same arguments: "+
			"the retry goes ahead once approved.", e.Tool, e.ID, p.cli(), e.ID, e.Tool)
	}
	if errors.Is(context.Cause(ctx), errCancelledByClient) {
		return "undolog: cancelled by the client"
	}
	return p.stoppedWaiting(ctx, e)
}

// execute starts the effect (unless its intercept did), forwards the call
// and records its outcome, also for a call the client has cancelled since:
// the server may have run it all the same.
//
// It returns whether the call's id stays in flight: a call the client
// cancelled and the server has not answered yet keeps its id, so that a
// request reusing it cannot take the answer the server still owes.
func (p *Proxy) execute(ctx context.Context, lc *lifecycle.Lifecycle, call *lifecycle.Call, m message) (idInFlight bool) {
	e := call.Effect
	if err := lc.Start(ctx, call); err != nil {
		p.reply(ctx, toolError(m.ID, fmt.Sprintf("undolog: effect %d could not start: %v", e.ID, err)))
		return false
	}
	ch := p.expect(m.ID)
	if err := p.writeUpstream(m.raw); errors.Is(err, errUpstreamGone) {
		p.forget(m.ID) // never sent: a retry runs it
		if ferr := lc.Fail(ctx, call, "not sent: the upstream MCP server had exited"); ferr != nil {
			p.note("effect %d: recording that it was not sent failed, it stays in doubt: %v", e.ID, ferr)
		}
		p.reply(ctx, errorResponse(m.ID, codeInternal, fmt.Sprintf("undolog: %v; %s (effect %d) was not sent", err, e.Tool, e.ID)))
		return false
	} else if err != nil {
		call.StopRenewing() // left executing: other hosts find it in doubt once its lease lapses
		p.forget(m.ID)
		p.reply(ctx, errorResponse(m.ID, codeInternal, fmt.Sprintf("undolog: %v; effect %d is executing (in doubt)", err, e.ID)))
		return false
	}
	resp, ok, gaveUp := p.awaitAnswer(ctx, ch)
	if gaveUp {
		// Cancelled, and no answer yet (servers on the MCP SDKs send none):
		// the call ends, in doubt, but its id and its wait stay, so that an
		// answer coming late is recorded, not taken by another request.
		call.StopRenewing()
		p.note("effect %d (%s): no answer %s after the client cancelled it; it stays executing (in doubt): %s", e.ID, e.Tool, p.cancelGrace(), p.resolveHint(e.ID))
		go p.lateAnswer(lc, call, m.ID, ch)
		return true
	}
	if !ok {
		call.StopRenewing()
		p.reply(ctx, errorResponse(m.ID, codeInternal, fmt.Sprintf("undolog: the upstream MCP server exited during %s; effect %d stays executing (in doubt): %s", e.Tool, e.ID, p.resolveHint(e.ID))))
		return false
	}
	if resp.Error == nil && taskHandle(resp.Result) {
		p.taskAnswer(ctx, call, resp)
		return false
	}
	committed, err := record(ctx, lc, call, resp)
	if err != nil {
		p.note("effect %d: recording the outcome failed, it stays in doubt: %v", e.ID, err)
	}
	p.keepLogAWhile()
	if committed {
		p.replyAnswer(ctx, resp.raw, call.Effect)
		return false
	}
	p.reply(ctx, resp.raw)
	return false
}

// afterglow is how long the proxy keeps the file log after a logged call,
// while nobody waits for it: an agent's calls often come in bursts, and the
// next one then neither reopens the log nor replays its journal (an
// intercept took 1.0 ms after a reopen, 0.47 ms with the log kept). Any
// process that waits for the log gets it within about a millisecond.
const afterglow = 100 * time.Millisecond

// keepLogAWhile keeps the log for afterglow from now.
func (p *Proxy) keepLogAWhile() {
	p.glowMu.Lock()
	defer p.glowMu.Unlock()
	if p.glow != nil {
		if p.glow.Reset(afterglow) {
			return // still kept: kept longer
		}
		p.glow.Stop() // it had ended; Reset scheduled it again
	}
	done := lifecycle.ExpectWrite(p.Log)
	if done == nil {
		return
	}
	p.glow = time.AfterFunc(afterglow, done)
}

// endAfterglow lets the log go now, when the proxy ends.
func (p *Proxy) endAfterglow() {
	p.glowMu.Lock()
	defer p.glowMu.Unlock()
	if p.glow != nil && p.glow.Stop() {
		p.glow.Reset(0) // runs done at once
	}
}

// record logs the outcome the server's answer says: committed with its
// result, or failed (a JSON-RPC error, a tool error). An answer that says
// neither (not JSON-RPC 2.0, an error that says nothing, a result that is
// no tool result) leaves the call in doubt, its lease stopped: the server
// may have acted on it.
func record(ctx context.Context, lc *lifecycle.Lifecycle, call *lifecycle.Call, resp message) (committed bool, err error) {
	unreadable := func(why error) (bool, error) {
		return false, errors.Join(fmt.Errorf("the server's answer: %w", why), call.StopRenewing())
	}
	switch {
	case resp.JSONRPC != "2.0" || (resp.Error == nil) == (resp.Result == nil):
		return unreadable(fmt.Errorf("%w: not a JSON-RPC 2.0 answer with a result or an error", mcpclient.ErrUnreadableAnswer))
	case resp.Error != nil && !mcpclient.WellFormedError(resp.Error.Code, resp.Error.Message):
		return unreadable(fmt.Errorf("%w: an error of no code or message", mcpclient.ErrUnreadableAnswer))
	case resp.Error != nil:
		return false, lc.Fail(ctx, call, fmt.Sprintf("JSON-RPC error %d: %s", resp.Error.Code, resp.Error.Message))
	}
	failed, err := mcpclient.ToolResult(resp.Result)
	switch {
	case err != nil:
		return unreadable(err)
	case failed:
		return false, lc.Fail(ctx, call, "tool error: "+mcpclient.ResultText(resp.Result))
	}
	err = lc.Commit(ctx, call, resp.Result)
	return err == nil, err
}

// lateAnswer records the outcome of a cancelled call the server answers
// after the proxy stopped waiting, and then frees its id; the server gone,
// it frees the id, the call left in doubt.
func (p *Proxy) lateAnswer(lc *lifecycle.Lifecycle, call *lifecycle.Call, id json.RawMessage, ch chan message) {
	defer p.releaseID(id)
	resp, ok := <-ch
	if !ok {
		return
	}
	if _, err := record(context.Background(), lc, call, resp); err != nil {
		p.note("effect %d: recording the late answer failed, it stays in doubt: %v", call.Effect.ID, err)
		return
	}
	p.note("effect %d (%s): the server answered it after all; its outcome is recorded", call.Effect.ID, call.Effect.Tool)
}

// awaitAnswer waits for the server's answer to a call it runs. Once the
// client has cancelled the call, the server has the cancel grace to answer
// still (it may have run it: the answer is recorded); then the wait gives up.
func (p *Proxy) awaitAnswer(ctx context.Context, ch chan message) (resp message, ok, gaveUp bool) {
	select {
	case resp, ok = <-ch:
		return resp, ok, false
	case <-ctx.Done():
	}
	if !errors.Is(context.Cause(ctx), errCancelledByClient) {
		resp, ok = <-ch // a signal: drain bounds the wait, stopping the server
		return resp, ok, false
	}
	t := time.NewTimer(p.cancelGrace())
	defer t.Stop()
	select {
	case resp, ok = <-ch:
		return resp, ok, false
	case <-t.C:
		return message{}, false, true
	}
}

// cancelGrace is how long a call the client cancelled waits for the
// server's answer: the stop grace.
func (p *Proxy) cancelGrace() time.Duration {
	if p.StopGrace > 0 {
		return p.StopGrace
	}
	return DefaultStopGrace
}
