// Package proxy owns `undolog proxy`: an MCP stdio proxy that puts an MCP
// server behind the effect log. Everything but tools/call passes through
// unchanged; each tools/call is classified by the policy, logged before it
// runs, replayed when repeated, held for approval when irreversible, and
// recorded with the compensation that undoes it.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/undolog/undolog/policy"
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
	Policy       *policy.Policy
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
	// InputWait is how long a call whose server asked the client for input
	// (input_required) waits for the client's next round before it is
	// failed; zero: DefaultInputWait.
	InputWait time.Duration

	nextCallMu   sync.Mutex
	nextCallHold *time.Timer // lets the log go that holdLogForNextCall holds

	chosen  sessionChoice // the session calls go in, once chosen (session.go)
	answers answerWaits
	rounds  inputRounds // the logged calls awaiting the client's next round (rounds.go)

	end      runEnd
	clientMu sync.Mutex
	client   Conn
	upMu     sync.Mutex
	up       Conn
	upGone   chan struct{}

	// awaited routes the server's answers the proxy takes itself.
	awaited awaitedAnswers
	// clientRequests are the ids of the client's requests not yet
	// answered: a request may not reuse one (two answers with one id would
	// go to the wrong call, and the wrong result be logged).
	clientRequests idSet
	// serverRequests are the ids of the server's requests the client has
	// not answered: a response to anything else would be answered by nobody.
	serverRequests idSet
	// toolLists are the ids of the client's tools/list requests not yet
	// answered: their answers teach tools.
	toolLists idSet
	tools     toolAnnotations
	running   runningCalls // the tools/calls the proxy runs
	calls     sync.WaitGroup

	nameMu     sync.Mutex
	clientName string // as the client's initialize, or its requests' _meta (2026-07-28), names it
	// statelessVersion is the protocol version the client's latest request
	// named in its _meta (2026-07-28 or later); "" once it sent initialize:
	// the proxy's own requests speak as the client does.
	statelessVersion string
	// clientElicits: the client's initialize declared form elicitation,
	// so its user can be asked to decide a call (window.go).
	clientElicits bool

	// clientAnswers routes the client's answers to the proxy's own
	// requests (its questions in the client's window).
	clientAnswers awaitedAnswers
	asks          windowAsks  // the requestStates given for questions under 2026-07-28
	windowDenied  atomic.Bool // the log refused a decision made in the window: the proxy's role may not decide
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
	if h, ok := client.(roundHolder); ok {
		p.rounds.held = h.HoldForRound
	}
	client = newBatcher(client)
	p.client, p.up, p.upGone = client, up, make(chan struct{})
	go p.readUpstream(up)
	why := p.serve(ctx, func() { p.readClient(ctx, client) })
	why = p.drain(ctx, why)
	p.abandonAllRounds()
	defer p.stopHoldingLogForNextCall()
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
		p.clientRequests.remove(id)
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
		p.clientRequests.remove(m.ID)
		p.writeClient(errorResponse(m.ID, codeInvalidParams, "invalid params: "+err.Error()+"; it was not passed on"))
	}
}

// requestIDKey is the context key of the id of the client request a
// tools/call goroutine answers.
type requestIDKey struct{}

// readClient handles the client's messages until it closes its input.
func (p *Proxy) readClient(ctx context.Context, in Conn) {
	err := eachClientMessage(in, func(m message, refused *refusal) {
		line := m.raw
		if refused == nil && m.Method == "" {
			if ch, ours := p.clientAnswers.take(m.ID); ours {
				ch <- m
				return
			}
		}
		if refused == nil && m.Method == "" && !p.serverRequests.take(m.ID) {
			refused = &refusal{note: "a response to no request of the server's, id " + oneLineID(m.ID)}
		}
		switch {
		case refused != nil:
			p.note("a client message was not passed on: %s", refused.note)
			if refused.answer != nil {
				p.writeClient(refused.answer)
			}
			return
		case m.Method != "" && len(m.ID) > 0 && !p.clientRequests.add(m.ID):
			p.writeClient(errorResponse(m.ID, codeInvalidRequest, "invalid request: the id "+string(m.ID)+" is used by a request still in flight"))
			return
		case m.Method == "tools/call" && len(m.ID) == 0:
			// A notification is not answered, and so its call would be
			// made unlogged: it is not passed on.
			p.note("a tools/call without an id (a notification) was not passed on")
			return
		}
		if m.Method != "" && len(m.ID) > 0 {
			p.learnClient(m)
		}
		switch m.Method {
		case "initialize":
			var params struct {
				ClientInfo struct {
					Name string `json:"name"`
				} `json:"clientInfo"`
				Capabilities json.RawMessage `json:"capabilities"`
			}
			if err := decodeParams(m.Params, &params); err != nil {
				p.refuseParams(m, err)
				return
			}
			p.nameMu.Lock()
			p.clientName = params.ClientInfo.Name
			p.clientElicits = mcpwire.FormElicitation(params.Capabilities)
			p.statelessVersion = ""
			p.nameMu.Unlock()
		case "tools/list":
			p.toolLists.add(m.ID)
		case "tools/call":
			if len(m.ID) > 0 {
				if !p.admit() {
					p.writeClient(errorResponse(m.ID, codeInternal, "undolog: the proxy is stopping; the call was not made"))
					return
				}
				callCtx, cancel := context.WithCancelCause(context.WithValue(ctx, requestIDKey{}, m.ID))
				p.running.add(m.ID, cancel)
				go func() {
					defer p.calls.Done()
					defer func() {
						p.running.remove(m.ID)
						cancel(nil)
					}()
					if !p.toolCall(callCtx, m) {
						p.clientRequests.remove(m.ID) // answered by the proxy
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
			p.running.cancel(params.RequestID, errCancelledByClient)
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
			if ch, ours := p.awaited.take(m.ID); ours {
				ch <- m
				return
			}
			if p.toolLists.take(m.ID) {
				p.learnAnnotations(m.Result)
			}
			p.clientRequests.remove(m.ID) // a client request's answer, passed on
		}
		if m.Method != "" && len(m.ID) > 0 {
			p.serverRequests.add(m.ID)
		}
		p.toolsChanged(m)
		p.writeClient(line)
	}, p.upstreamSkipped)
	close(p.upGone)
	p.awaited.endAll()
}

// learnClient keeps what a request of 2026-07-28 or later says of the
// client in its _meta: that version, and its name. (Under older versions
// initialize says it, once.)
func (p *Proxy) learnClient(m message) {
	meta, ok := mcpwire.ReadRequestMeta(m.Params)
	if !ok {
		return
	}
	p.nameMu.Lock()
	defer p.nameMu.Unlock()
	p.statelessVersion = meta.Version
	if meta.ClientName != "" {
		p.clientName = meta.ClientName
	}
}

// request sends the proxy's own request upstream and waits for the answer.
// Under 2026-07-28 or later it says in its _meta what that version asks of
// every request, naming undolog as its client, which can answer no request
// of the server's.
func (p *Proxy) request(ctx context.Context, method string, params map[string]any) (message, error) {
	p.nameMu.Lock()
	version := p.statelessVersion
	p.nameMu.Unlock()
	if version != "" {
		params[metaKey] = map[string]any{
			mcpwire.MetaProtocolVersion:    version,
			mcpwire.MetaClientInfo:         map[string]string{"name": "undolog", "version": "1"},
			mcpwire.MetaClientCapabilities: map[string]any{},
		}
	}
	id, ch := p.awaited.own()
	if err := p.writeUpstream(encode(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})); err != nil {
		p.awaited.forget(id)
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
		p.awaited.forget(id)
		return message{}, ctx.Err()
	}
}

// metaKey is the member of a request's params that holds its _meta.
const metaKey = "_meta"

func (p *Proxy) actor() string {
	p.nameMu.Lock()
	defer p.nameMu.Unlock()
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
	cls, err := cls.ForArgs(params.Arguments)
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
	next := continuation(m.Params)
	args := params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	req := effectlog.InterceptRequest{Session: p.Session, Tool: params.Name, Tier: cls.Tier, Args: args,
		CreateSession: true, Actor: p.actor(), Reason: cls.Reason, Redact: p.Redact,
		// A next round whose call committed (re-sent, stale) is answered
		// from the log: it is that call's, not a new one.
		RunAgainAnswered: (cls.Rule == nil || !cls.Rule.ReplayAlways) && !next}
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
	m, answered := p.windowAnswer(call, m)
	if call.Executing() && next {
		if w := p.rounds.take(call.Effect.ID, false); w != nil {
			return p.nextRound(ctx, w, m)
		}
	}
	way := noWindow
	if answered != "" {
		p.decideInWindow(ctx, call, answered) // the flow below finds the decision that stands
	} else if way = p.windowWay(cls.Rule, call, m); way == byRound {
		p.reply(ctx, resultResponse(m.ID, p.windowRound(call, cls.Reason)))
		return false
	}
	wait, done := p.approvalContext(ctx)
	asked := func() {}
	if way == byRequest {
		asked = p.askWindow(wait, call, cls.Reason)
	}
	end, err := lc.Begin(wait, call, lifecycle.Ask{Door: p.door(), Wait: p.ApprovalWait, Note: func(text string) { p.note("%s", text) }})
	done()
	asked()
	switch {
	case err != nil:
		p.reply(ctx, toolError(m.ID, "undolog: "+err.Error()))
		return false
	case end.Ending == lifecycle.Replay:
		p.replyAnswer(ctx, resultResponse(m.ID, call.Effect.Result), call.Effect)
		return false
	case end.Ending == lifecycle.Interrupted && errors.Is(end.Cause, errCancelledByClient):
		p.note("the client cancelled %s (effect %d); its approval request stands", call.Effect.Tool, call.Effect.ID)
		return false // nothing more is written for a call the client cancelled
	case end.Ending != lifecycle.Ran:
		// No reclaim of a call in doubt here: the client cannot say it
		// checked what happened.
		p.reply(ctx, toolError(m.ID, "undolog: "+end.Text(p.door())))
		return false
	}
	return p.execute(ctx, lc, call, m)
}

func (p *Proxy) lifecycle() *lifecycle.Lifecycle {
	return &lifecycle.Lifecycle{Log: p.Log, Now: p.Now, Lease: p.Lease, Hold: true, Unavailable: func(err error) {
		p.note("%s", textfmt.OneLine(lifecycle.UnavailableNote(err)))
	}}
}

// door is how the proxy is named in the call flow's texts.
func (p *Proxy) door() lifecycle.Door {
	return lifecycle.Door{CLI: p.cli(), Bound: p.ApprovalWait.String(), Stopped: stopCause,
		Again: func(e model.Effect) string { return "call " + e.Tool + " again with the same arguments" }}
}

func (p *Proxy) cli() string {
	if p.CLI == "" {
		return "undolog"
	}
	return p.CLI
}

// execute forwards a call the flow has started and records its outcome
// (lifecycle's Finish), also for a call the client has cancelled since:
// the server may have run it all the same.
//
// It returns whether the call's id stays in flight: a call the client
// cancelled and the server has not answered yet keeps its id, so that a
// request reusing it cannot take the answer the server still owes.
func (p *Proxy) execute(ctx context.Context, lc *lifecycle.Lifecycle, call *lifecycle.Call, m message) (idInFlight bool) {
	e := call.Effect
	ch := p.awaited.expect(m.ID)
	if err := p.writeUpstream(m.raw); errors.Is(err, errUpstreamGone) {
		p.awaited.forget(m.ID) // never sent: a retry runs it
		if ferr := lc.Finish(ctx, call, lifecycle.Result{Failed: "not sent: the upstream MCP server had exited"}); ferr != nil {
			p.note("%v", ferr)
		}
		p.reply(ctx, errorResponse(m.ID, codeInternal, fmt.Sprintf("undolog: %v; %s (effect %d) was not sent", err, e.Tool, e.ID)))
		return false
	} else if err != nil {
		lc.Finish(ctx, call, lifecycle.Result{Unsettled: true}) // other hosts find it in doubt once its lease lapses
		p.awaited.forget(m.ID)
		p.reply(ctx, errorResponse(m.ID, codeInternal, fmt.Sprintf("undolog: %v; effect %d is executing (in doubt)", err, e.ID)))
		return false
	}
	resp, ok, gaveUp := p.awaitAnswer(ctx, ch)
	if gaveUp {
		// Cancelled, and no answer yet (servers on the MCP SDKs send none):
		// the call ends, in doubt, but its id and its wait stay, so that an
		// answer coming late is recorded, not taken by another request.
		lc.Finish(ctx, call, lifecycle.Result{Unsettled: true})
		p.note("effect %d (%s): no answer %s after the client cancelled it; it stays executing (in doubt): %s", e.ID, e.Tool, p.cancelGrace(), p.resolveHint(e.ID))
		go p.lateAnswer(lc, call, m.ID, ch)
		return true
	}
	if !ok {
		lc.Finish(ctx, call, lifecycle.Result{Unsettled: true})
		p.reply(ctx, errorResponse(m.ID, codeInternal, fmt.Sprintf("undolog: the upstream MCP server exited during %s; effect %d stays executing (in doubt): %s", e.Tool, e.ID, p.resolveHint(e.ID))))
		return false
	}
	if resp.Error == nil && taskHandle(resp.Result) {
		p.taskAnswer(ctx, lc, call, resp)
		return false
	}
	if resp.Error == nil && inputRequired(resp.Result) {
		p.awaitNextRound(ctx, lc, call)
		p.reply(ctx, resp.raw)
		return false
	}
	committed, err := record(ctx, lc, call, resp)
	if err != nil {
		p.note("%v", err)
	}
	p.holdLogForNextCall()
	if committed {
		p.replyAnswer(ctx, resp.raw, call.Effect)
		return false
	}
	p.reply(ctx, resp.raw)
	return false
}

// nextCallHold is how long the proxy holds the file log after a logged
// call, while nobody waits for it: an agent's calls often come in bursts,
// and the next one then neither reopens the log nor replays its journal.
// Any process that waits for the log gets it within about a millisecond.
const nextCallHold = 100 * time.Millisecond

// holdLogForNextCall holds the log (storage.Holder) for nextCallHold from now.
func (p *Proxy) holdLogForNextCall() {
	p.nextCallMu.Lock()
	defer p.nextCallMu.Unlock()
	if p.nextCallHold != nil {
		if p.nextCallHold.Reset(nextCallHold) {
			return // still held: held longer
		}
		p.nextCallHold.Stop() // it had ended; Reset scheduled it again
	}
	done := p.Log.ExpectWrite()
	if done == nil {
		return
	}
	p.nextCallHold = time.AfterFunc(nextCallHold, done)
}

// stopHoldingLogForNextCall lets the log go now, when the proxy ends.
func (p *Proxy) stopHoldingLogForNextCall() {
	p.nextCallMu.Lock()
	defer p.nextCallMu.Unlock()
	if p.nextCallHold != nil && p.nextCallHold.Stop() {
		p.nextCallHold.Reset(0) // runs done at once
	}
}

// record logs the outcome the server's answer says (lifecycle's Finish):
// committed with its result, or failed (a JSON-RPC error, a tool error). An
// answer that says neither (not JSON-RPC 2.0, an error that says nothing, a
// result that is no tool result) leaves the call unsettled, in doubt: the
// server may have acted on it.
func record(ctx context.Context, lc *lifecycle.Lifecycle, call *lifecycle.Call, resp message) (committed bool, err error) {
	r, unreadable := answered(resp)
	if unreadable != nil {
		return false, errors.Join(fmt.Errorf("effect %d: the server's answer: %w; it stays in doubt", call.Effect.ID, unreadable),
			lc.Finish(ctx, call, lifecycle.Result{Unsettled: true}))
	}
	err = lc.Finish(ctx, call, r)
	return err == nil && r.Failed == "", err
}

// answered is the end of a call that the server's answer says, or why it
// says none.
func answered(resp message) (lifecycle.Result, error) {
	switch {
	case resp.JSONRPC != "2.0" || (resp.Error == nil) == (resp.Result == nil):
		return lifecycle.Result{}, fmt.Errorf("%w: not a JSON-RPC 2.0 answer with a result or an error", mcpclient.ErrUnreadableAnswer)
	case resp.Error != nil && !mcpclient.WellFormedError(resp.Error.Code, resp.Error.Message):
		return lifecycle.Result{}, fmt.Errorf("%w: an error of no code or message", mcpclient.ErrUnreadableAnswer)
	case resp.Error != nil:
		return lifecycle.Result{Failed: fmt.Sprintf("JSON-RPC error %d: %s", resp.Error.Code, resp.Error.Message)}, nil
	}
	failed, err := mcpclient.ToolResult(resp.Result)
	switch {
	case err != nil:
		return lifecycle.Result{}, err
	case failed:
		return lifecycle.Result{Failed: "tool error: " + mcpclient.ResultText(resp.Result)}, nil
	}
	return lifecycle.Result{Value: resp.Result}, nil
}

// lateAnswer records the outcome of a cancelled call the server answers
// after the proxy stopped waiting, and then frees its id; the server gone,
// it frees the id, the call left in doubt.
func (p *Proxy) lateAnswer(lc *lifecycle.Lifecycle, call *lifecycle.Call, id json.RawMessage, ch chan message) {
	defer p.clientRequests.remove(id)
	resp, ok := <-ch
	if !ok {
		return
	}
	if _, err := record(context.Background(), lc, call, resp); err != nil {
		p.note("the late answer: %v", err)
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
