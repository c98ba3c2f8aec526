package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/undolog/undolog/internal/mcpwire"
)

// HTTPServer is the server side of MCP's Streamable HTTP transport, so that
// the proxy can front HTTP clients: each client session (begun by an
// initialize POST, ended by a DELETE or by Shutdown) is a Conn handed to
// Start, which serves it until it ends. Stateless requests (2026-07-28: no
// initialize, no Mcp-Session-Id) go in a lane per client identity, the
// clientInfo name of their _meta: a Conn handed to StartStateless, kept
// while the client keeps calling, so that its calls share one upstream and
// one undolog session. It answers at /mcp only.
type HTTPServer struct {
	// Start serves one client session (a proxy with its own upstream
	// connection) and returns once client has ended.
	Start func(ctx context.Context, client Conn)
	// StartStateless serves one client identity's stateless requests as
	// Start serves a session; nil: Start.
	StartStateless func(ctx context.Context, client Conn, clientName string)
	// MaxStatelessClients bounds the lanes open at once (each has its own
	// upstream): a new identity beyond it ends the lane idle the longest,
	// or waits for one (StatelessLaneWait); zero: DefaultMaxStatelessClients.
	MaxStatelessClients int
	// StatelessLaneWait is how long a request of a new identity waits for
	// a lane when every lane has a request in flight, before it is answered
	// 503 with Retry-After; zero: DefaultStatelessLaneWait.
	StatelessLaneWait time.Duration
	// StatelessIdleTimeout ends a lane, and its upstream, idle that long;
	// zero: DefaultStatelessIdleTimeout.
	StatelessIdleTimeout time.Duration
	// AllowRemote accepts any Host; otherwise only loopback names are
	// served (against DNS rebinding, as the transport asks of local servers).
	AllowRemote bool
	Diagnostics io.Writer
	// IdleTimeout ends a session that has had no request and no open
	// stream for that long (a client gone without its DELETE would keep its
	// upstream running); zero: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Now is the clock of idle sessions; nil: time.Now.
	Now func() time.Time

	ctx      context.Context
	mu       sync.Mutex
	sessions map[string]*listenSession
	lanes    map[string]*listenSession // stateless lanes by client identity
	// laneCount is the stateless lanes whose upstream has not stopped,
	// those ended to make room included.
	laneCount int
	wg        sync.WaitGroup
}

// DefaultMaxStatelessClients bounds the stateless lanes, and so the
// upstream processes they start.
const DefaultMaxStatelessClients = 16

// DefaultStatelessLaneWait is how long a new stateless client waits for a
// lane while all are busy.
const DefaultStatelessLaneWait = 10 * time.Second

// DefaultStatelessIdleTimeout is how long a stateless lane, and its
// upstream, stays without a request: a stateless client never says it is
// done.
const DefaultStatelessIdleTimeout = 5 * time.Minute

// protocolStateless is the first MCP version without sessions.
const protocolStateless = "2026-07-28"

// DefaultIdleTimeout is how long an HTTP client session may sit idle.
const DefaultIdleTimeout = 30 * time.Minute

func (s *HTTPServer) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *HTTPServer) idleTimeouts() (session, lane time.Duration) {
	session, lane = s.IdleTimeout, s.StatelessIdleTimeout
	if session <= 0 {
		session = DefaultIdleTimeout
	}
	if lane <= 0 {
		lane = DefaultStatelessIdleTimeout
	}
	return session, lane
}

// sweep ends the sessions idle past IdleTimeout and the stateless lanes
// idle past StatelessIdleTimeout. One whose call awaits the client's next
// input round is not idle: its proxy fails that call after the input wait.
func (s *HTTPServer) sweep() {
	sessionIdle, laneIdle := s.idleTimeouts()
	now := s.now()
	s.mu.Lock()
	var ended []*listenSession
	for _, ss := range s.sessions {
		idle := sessionIdle
		if ss.stateless {
			idle = laneIdle
		}
		ss.mu.Lock()
		if ss.open == 0 && ss.paused == 0 && now.Sub(ss.active) > idle {
			ended = append(ended, ss)
		}
		ss.mu.Unlock()
	}
	s.mu.Unlock()
	for _, ss := range ended {
		if ss.stateless {
			fmt.Fprintf(s.Diagnostics, "undolog proxy: the stateless client %q idle for over %s: its server stopped\n", ss.clientName, laneIdle)
		} else {
			fmt.Fprintf(s.Diagnostics, "undolog proxy: an HTTP client session idle for over %s ended\n", sessionIdle)
		}
		ss.Close()
	}
}

// Serve serves ln until ctx ends, then ends every session, waits for their
// Start to return, and returns.
func (s *HTTPServer) Serve(ctx context.Context, ln net.Listener) error {
	if s.Diagnostics == nil {
		s.Diagnostics = io.Discard
	}
	s.mu.Lock()
	s.ctx, s.sessions, s.lanes = ctx, map[string]*listenSession{}, map[string]*listenSession{}
	s.mu.Unlock()
	// Requests outlive ctx: once it ends, each session's proxy answers the
	// calls it has in flight (a call waiting for approval gets its "was not
	// run" error) on their POSTs, which must still be open for it.
	base := context.WithoutCancel(ctx)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return base }}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	sessionIdle, laneIdle := s.idleTimeouts()
	tick := time.NewTicker(min(time.Minute, sessionIdle/4, laneIdle/4))
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case err = <-errc:
			break wait
		case <-tick.C:
			s.sweep()
		}
	}
	if ctx.Err() != nil {
		// Each session's Start sees ctx end too: the proxy answers the calls
		// it has in flight, on their POSTs, and returns (its session closes
		// then). A while for that, beyond the proxy's own grace.
		started := make(chan struct{})
		go func() { s.wg.Wait(); close(started) }()
		select {
		case <-started:
		case <-time.After(DefaultStopGrace + 5*time.Second):
		}
	}
	s.mu.Lock()
	for _, ss := range s.sessions {
		ss.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shut)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// localHost tells whether a host (with or without a port) names loopback.
func localHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *HTTPServer) allowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	var o *url.URL
	if origin != "" {
		var err error
		if o, err = url.Parse(origin); err != nil {
			return false
		}
	}
	if s.AllowRemote {
		return o == nil || strings.EqualFold(o.Host, r.Host)
	}
	return localHost(r.Host) && (o == nil || localHost(o.Host))
}

// rpcFail answers an HTTP request with a JSON-RPC error body.
func rpcFail(w http.ResponseWriter, status int, id json.RawMessage, code int, text string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(errorResponse(id, code, text))
}

func (s *HTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/mcp" {
		http.NotFound(w, r)
		return
	}
	if !s.allowed(r) {
		rpcFail(w, http.StatusForbidden, nil, codeInvalidRequest, "forbidden: the Host or Origin header is not this server's (DNS rebinding protection)")
		return
	}
	if s.ctx.Err() != nil { // stopping: the sessions' proxies take no more calls
		rpcFail(w, http.StatusServiceUnavailable, nil, codeInternal, "the proxy is stopping")
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.post(w, r)
	case http.MethodGet:
		s.get(w, r)
	case http.MethodDelete:
		ss := s.lookup(w, r, nil)
		if ss == nil {
			return
		}
		ss.Close()
		w.WriteHeader(http.StatusOK)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// lookup finds the session a request names, or answers it (with id, the
// request's, if it has one) that there is none.
func (s *HTTPServer) lookup(w http.ResponseWriter, r *http.Request, id json.RawMessage) *listenSession {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		rpcFail(w, http.StatusBadRequest, id, -32000, "bad request: no Mcp-Session-Id header (initialize first, or speak MCP "+protocolStateless+" or later, which needs no session)")
		return nil
	}
	s.mu.Lock()
	ss := s.sessions[sid]
	s.mu.Unlock()
	if ss == nil || ss.stateless {
		rpcFail(w, http.StatusNotFound, id, -32001, "session not found")
		return nil
	}
	ss.mu.Lock()
	ss.active = s.now()
	ss.mu.Unlock()
	return ss
}

func (s *HTTPServer) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxLine+1))
	if err != nil {
		rpcFail(w, http.StatusBadRequest, nil, codeParse, "parse error: reading the body: "+err.Error())
		return
	}
	if len(body) > maxLine {
		id := tooLarge(body[:64<<10]).ID
		rpcFail(w, http.StatusRequestEntityTooLarge, id, codeInvalidRequest, "invalid request: the message is over 64 MiB, the proxy's limit; it was not passed on")
		return
	}
	body = bytes.TrimSpace(body)
	var elems []json.RawMessage
	if len(body) > 0 && body[0] == '[' {
		if err := json.Unmarshal(body, &elems); err != nil {
			if _, code, _ := unparsed(body, err); code != codeInvalidRequest {
				rpcFail(w, http.StatusBadRequest, nil, codeParse, "parse error: "+err.Error())
				return
			}
			elems = splitArray(body) // nested deeper than the decoder goes: still a batch
		}
	} else {
		if !json.Valid(body) {
			_, code, text := unparsed(body, json.Unmarshal(body, new(any)))
			rpcFail(w, http.StatusBadRequest, topLevelID(body), code, text)
			return
		}
		elems = []json.RawMessage{body}
	}
	var requests []string               // the requests' ids (idKey)
	ids := map[string]json.RawMessage{} // and as sent
	var twice json.RawMessage           // an id two of them have
	initialize := false
	var single message            // a POST's message, if it is not a batch
	var answers []json.RawMessage // a batch's, if one of it is refused
	refusedOne := false
	for _, e := range elems {
		// The proxy's door for client messages: one refused is answered
		// here, on its POST, which would otherwise wait for an answer
		// routed by an id the proxy does not pass on.
		m, refused := readClientMessage(e)
		if body[0] != '[' {
			single = m
		}
		if refused != nil && body[0] != '[' {
			answer := refused.answer
			if answer == nil { // a notification or a response: no id to answer
				answer = errorResponse(nil, codeInvalidRequest, refused.note)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write(answer)
			return
		}
		switch {
		case refused != nil:
			refusedOne = true
			if refused.answer != nil {
				answers = append(answers, refused.answer)
			}
		case m.Method != "" && len(m.ID) > 0:
			// Nothing of a batch with a message refused is passed on: each
			// request of it is answered then, in the batch's array, so
			// that none waits for good.
			answers = append(answers, errorResponse(m.ID, codeInvalidRequest, "invalid request: another message of its batch was refused; none of the batch was passed on"))
			k := idKey(m.ID)
			if ids[k] != nil {
				twice = m.ID
			}
			requests, ids[k] = append(requests, k), m.ID
			initialize = initialize || m.Method == "initialize"
		}
	}
	if refusedOne {
		answer := encode(answers)
		if len(answers) == 0 { // notifications and responses only: no id to answer
			answer = errorResponse(nil, codeInvalidRequest, "invalid request: a message of the batch was refused; none of it was passed on")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(answer)
		return
	}
	var ss *listenSession
	var hangup json.RawMessage // a stateless request's lane id: its POST closing cancels it
	noSession := r.Header.Get("Mcp-Session-Id") == ""
	stateless := noSession && body[0] != '[' && statelessVersion(r, single)
	if stateless {
		if code, refusal := statelessRefusal(r, single); refusal != "" {
			rpcFail(w, http.StatusBadRequest, single.ID, code, refusal)
			return
		}
	}
	switch {
	case noSession && initialize && len(elems) == 1:
		ss = s.open()
	case stateless && len(requests) == 0:
		s.statelessNotification(w, single, body)
		return
	case stateless:
		var err error
		if ss, err = s.lane(r.Context(), clientName(single)); err != nil {
			if errors.Is(err, errLanesBusy) {
				w.Header().Set("Retry-After", "1")
				err = fmt.Errorf("undolog proxy: every one of its %d stateless clients' servers is busy; retry the request", s.maxLanes())
			}
			rpcFail(w, http.StatusServiceUnavailable, single.ID, codeInternal, err.Error())
			return
		}
		// Ids are a connection's, and stateless clients of one name share
		// a lane: each request goes on under an id of the lane's, its
		// answer back under its own.
		lid := ss.relabel(single.ID, single.Method)
		defer ss.unlabel(lid)
		defer s.endRefusedLane(ss)
		if body, err = withID(body, lid); err != nil {
			rpcFail(w, http.StatusBadRequest, single.ID, codeParse, "parse error: "+err.Error())
			return
		}
		requests, ids = []string{idKey(lid)}, map[string]json.RawMessage{idKey(lid): single.ID}
		hangup = lid
		single.ID, single.raw = lid, body
	default:
		if ss = s.lookup(w, r, single.ID); ss == nil {
			return
		}
	}
	if body[0] == '[' {
		ss.mu.Lock()
		version := ss.version
		ss.mu.Unlock()
		switch {
		case len(elems) == 0:
			rpcFail(w, http.StatusBadRequest, nil, codeInvalidRequest, "invalid request: an empty batch")
			return
		case !batchesAllowed(version):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write(batchRefusal(version, elems))
			return
		}
	}
	if len(requests) == 0 {
		if !ss.deliver(body) {
			rpcFail(w, http.StatusNotFound, nil, -32001, "session not found")
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	sse := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	var st *eventStream
	if twice == nil {
		var taken string
		if st, taken = ss.stream(requests, !sse); st == nil {
			twice = ids[taken]
		}
	}
	if twice != nil {
		// An answer could not tell the two requests apart: the one in
		// flight keeps its route, and this POST is refused whole.
		rpcFail(w, http.StatusBadRequest, twice, codeInvalidRequest, "invalid request: the id "+string(twice)+" is used by a request still in flight")
		return
	}
	defer ss.drop(st)
	if hangup != nil {
		defer func() {
			// Under 2026-07-28 a client cancels a request by closing its
			// POST: the lane hears it as notifications/cancelled.
			if r.Context().Err() != nil && st.answersDue() {
				ss.deliver(encode(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
					"params": map[string]any{"requestId": hangup, "reason": "the client closed its request"}}))
			}
		}()
	}
	if initialize {
		w.Header().Set("Mcp-Session-Id", ss.id)
	}
	handed := false
	if body[0] == '[' {
		handed = ss.deliver(body)
	} else {
		handed = ss.deliverRead(single)
	}
	if !handed {
		rpcFail(w, http.StatusNotFound, nil, -32001, "session not found")
		return
	}
	if !sse {
		msgs := st.wait(r.Context())
		w.Header().Set("Content-Type", "application/json")
		switch {
		case len(msgs) == 1 && body[0] != '[':
			w.Write(msgs[0])
		default: // a batch's answers, one array
			answers := make([]json.RawMessage, len(msgs))
			for i, m := range msgs {
				answers[i] = m
			}
			w.Write(encode(answers))
		}
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	st.pump(r.Context(), w)
}

func (s *HTTPServer) get(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		w.WriteHeader(http.StatusNotAcceptable)
		return
	}
	ss := s.lookup(w, r, nil)
	if ss == nil {
		return
	}
	st := ss.standalone()
	defer ss.drop(st)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	st.pump(r.Context(), w)
}

// open begins a client session and its Start; the session outlives the
// POST that begins it, so it runs in the server's context.
func (s *HTTPServer) open() *listenSession {
	ss := s.newSession()
	s.mu.Lock()
	s.sessions[ss.id] = ss
	s.wg.Add(1)
	s.mu.Unlock()
	go s.serve(ss, func() { s.Start(s.ctx, ss) })
	return ss
}

func (s *HTTPServer) newSession() *listenSession {
	return &listenSession{id: rand.Text(), incoming: make(chan delivered, 16), closed: make(chan struct{}),
		routes: map[string]*eventStream{}, labels: map[string]label{}, active: s.now(), clock: s.now}
}

// serve runs a session's Start, then forgets the session.
func (s *HTTPServer) serve(ss *listenSession, start func()) {
	defer s.wg.Done()
	start()
	ss.Close()
	s.mu.Lock()
	delete(s.sessions, ss.id)
	if s.lanes[ss.clientName] == ss {
		delete(s.lanes, ss.clientName)
	}
	if ss.stateless {
		s.laneCount--
	}
	s.mu.Unlock()
}

// errLanesBusy: every stateless lane has a request in flight, and none
// ended within StatelessLaneWait.
var errLanesBusy = errors.New("busy")

var errStopping = errors.New("the proxy is stopping")

func (s *HTTPServer) maxLanes() int {
	if s.MaxStatelessClients <= 0 {
		return DefaultMaxStatelessClients
	}
	return s.MaxStatelessClients
}

// lane is the stateless lane of a client identity, begun if need be; nil
// once the server is stopping. Past MaxStatelessClients lanes (counted
// until their upstream has stopped), a new identity ends the lane idle the
// longest and waits for its upstream to stop; when every lane has a
// request in flight it waits for one to end, at most StatelessLaneWait
// (errLanesBusy), so that clients, which choose their names, cannot start
// more upstream processes than the bound.
func (s *HTTPServer) lane(ctx context.Context, name string) (*listenSession, error) {
	wait := s.StatelessLaneWait
	if wait <= 0 {
		wait = DefaultStatelessLaneWait
	}
	giveUp := time.NewTimer(wait)
	defer giveUp.Stop()
	// Lanes end, and requests in lanes end, without telling waiters here:
	// they look again at this interval.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ss, err := s.tryLane(name)
		if ss != nil || err != nil {
			return ss, err
		}
		select {
		case <-tick.C:
		case <-giveUp.C:
			return nil, errLanesBusy
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// tryLane is lane's one attempt: the lane, or nil (and no error) while no
// lane is free, the lane idle the longest ended to make room.
func (s *HTTPServer) tryLane(name string) (*listenSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return nil, errStopping
	}
	now := s.now()
	if ss := s.lanes[name]; ss != nil && !ss.isClosed() {
		ss.mu.Lock()
		ss.active = now
		ss.mu.Unlock()
		return ss, nil
	}
	limit := s.maxLanes()
	if s.laneCount >= limit {
		var oldest *listenSession
		for _, ss := range s.lanes {
			ss.mu.Lock()
			if ss.open == 0 && (oldest == nil || ss.active.Before(oldest.active)) {
				oldest = ss
			}
			ss.mu.Unlock()
		}
		if oldest != nil { // its upstream stops; the next attempt may take its place
			fmt.Fprintf(s.Diagnostics, "undolog proxy: over %d stateless clients: the server of %q, idle the longest, stopped\n", limit, oldest.clientName)
			delete(s.lanes, oldest.clientName)
			go oldest.Close()
		}
		return nil, nil
	}
	s.laneCount++
	ss := s.newSession()
	ss.stateless, ss.clientName = true, name
	s.sessions[ss.id], s.lanes[name] = ss, ss
	s.wg.Add(1)
	start := func() { s.Start(s.ctx, ss) }
	if s.StartStateless != nil {
		start = func() { s.StartStateless(s.ctx, ss, name) }
	}
	go s.serve(ss, start)
	return ss, nil
}

// statelessNotification passes a stateless client's notification to its
// lane, a cancellation naming the request by the lane's id for it; one for
// no lane, or naming no request of the lane's unambiguously, is dropped
// (202 either way: a notification has no answer).
func (s *HTTPServer) statelessNotification(w http.ResponseWriter, m message, body []byte) {
	w.WriteHeader(http.StatusAccepted)
	s.mu.Lock()
	ss := s.lanes[clientName(m)]
	s.mu.Unlock()
	if ss == nil || m.Method == "" {
		return
	}
	if m.Method == "notifications/cancelled" {
		var params map[string]json.RawMessage
		if json.Unmarshal(m.Params, &params) != nil {
			return
		}
		lid := ss.labelOf(params["requestId"])
		if lid == nil {
			return
		}
		params["requestId"] = lid
		p, err := json.Marshal(params)
		if err != nil {
			return
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(body, &members) != nil {
			return
		}
		members["params"] = p
		if body, err = json.Marshal(members); err != nil {
			return
		}
	}
	ss.deliver(body)
}

// statelessParams is what the proxy reads of a stateless request's params.
type statelessParams struct {
	Meta struct {
		Version string `json:"io.modelcontextprotocol/protocolVersion"`
		Client  struct {
			Name string `json:"name"`
		} `json:"io.modelcontextprotocol/clientInfo"`
	} `json:"_meta"`
	Name string `json:"name"` // of tools/call and prompts/get
	URI  string `json:"uri"`  // of resources/read
}

// statelessVersion tells whether a request without a session speaks a
// version that has none: by its Mcp-Protocol-Version header or its _meta
// (when they disagree, statelessRefusal says so, rather than the request
// being taken for one that lost its session).
func statelessVersion(r *http.Request, m message) bool {
	var p statelessParams
	json.Unmarshal(m.Params, &p) // what is not as it expects stays ""
	return r.Header.Get("Mcp-Protocol-Version") >= protocolStateless || p.Meta.Version >= protocolStateless
}

// statelessRefusal is why a stateless message is refused, with the
// JSON-RPC code to answer, as the Go SDK's server does; "" if it is not.
func statelessRefusal(r *http.Request, m message) (code int, text string) {
	if mismatch := headerMismatch(r, m); mismatch != "" {
		return codeHeaderMismatch, "header mismatch: " + mismatch
	}
	var p statelessParams
	json.Unmarshal(m.Params, &p)
	if len(m.ID) != 0 && p.Meta.Version == "" {
		return codeInvalidParams, fmt.Sprintf("invalid params: a request at Mcp-Protocol-Version %q must carry its protocol version in _meta (io.modelcontextprotocol/protocolVersion); it was not passed on",
			r.Header.Get("Mcp-Protocol-Version"))
	}
	return 0, ""
}

// codeHeaderMismatch answers a request whose MCP headers say other than its
// body (2026-07-28), as the Go SDK's server does.
const codeHeaderMismatch = -32020

// headerMismatch is what a stateless message's MCP headers say other than
// its body, which intermediaries route by; "" if nothing.
func headerMismatch(r *http.Request, m message) string {
	var p statelessParams
	json.Unmarshal(m.Params, &p)
	version := r.Header.Get("Mcp-Protocol-Version")
	switch {
	case version == "":
		return "a request carrying a protocol version in its _meta needs the Mcp-Protocol-Version header"
	case p.Meta.Version != "" && p.Meta.Version != version:
		return fmt.Sprintf("the Mcp-Protocol-Version header %q does not match the request's _meta %q", version, p.Meta.Version)
	case len(m.ID) == 0: // a notification: no method or name headers asked of it
		return ""
	case r.Header.Get("Mcp-Method") != m.Method:
		return fmt.Sprintf("the Mcp-Method header %q does not match the request's method %q", r.Header.Get("Mcp-Method"), m.Method)
	}
	name, named := p.Name, m.Method == "tools/call" || m.Method == "prompts/get"
	if m.Method == "resources/read" {
		name, named = p.URI, true
	}
	if named && r.Header.Get("Mcp-Name") != name {
		return fmt.Sprintf("the Mcp-Name header %q does not match the request's %q", r.Header.Get("Mcp-Name"), name)
	}
	return ""
}

// clientName is the clientInfo name a stateless request's _meta gives;
// "" if none.
func clientName(m message) string {
	var p statelessParams
	json.Unmarshal(m.Params, &p)
	return p.Meta.Client.Name
}

// withID is msg with its id set to id: its id's bytes replaced, the rest
// passed as it came.
func withID(msg []byte, id json.RawMessage) ([]byte, error) {
	if !json.Valid(msg) {
		return nil, json.Unmarshal(msg, new(any)) // its error
	}
	start, end := -1, -1
	eachTopLevelID(msg, func(s, e int) { start, end = s, e })
	if start < 0 {
		var members map[string]json.RawMessage
		if err := json.Unmarshal(msg, &members); err != nil {
			return nil, err
		}
		members["id"] = id
		return json.Marshal(members)
	}
	out := make([]byte, 0, len(msg)-(end-start)+len(id))
	return append(append(append(out, msg[:start]...), id...), msg[end:]...), nil
}

// isErrorAnswer tells whether the answer msg is an error.
func isErrorAnswer(msg []byte) bool {
	var a struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(msg, &a) == nil && len(a.Error) > 0 && string(a.Error) != "null"
}

// listenSession is one client session: a Conn whose messages come from the
// client's POSTs and whose answers go back on the POST that asked.
type listenSession struct {
	id       string
	incoming chan delivered
	closed   chan struct{}
	once     sync.Once

	mu      sync.Mutex
	routes  map[string]*eventStream // request id -> the stream its answer goes on
	streams []*eventStream          // open POST streams, oldest first
	get     *eventStream            // the GET stream, if open
	backlog [][]byte                // server messages waiting for a stream
	open    int                     // streams open (HTTP requests in progress)
	paused  int                     // calls awaiting the client's next input round
	active  time.Time               // when the last request began or ended
	clock   func() time.Time
	version string // the protocol version the server answered

	// A stateless lane's: the client identity it serves, and the ids its
	// requests go on under (their idKeys) with each request's own id.
	stateless  bool
	clientName string
	labels     map[string]label
	nextLabel  uint64
	// discoverRefused: its server answered server/discover with an error.
	discoverRefused bool
}

// label is a stateless request's id in its lane, and its own, and its
// method.
type label struct {
	lane, own json.RawMessage
	method    string
}

// HoldForRound counts a call of the session that begins (+1) or ends (-1)
// awaiting the client's next input round (roundHolder).
func (ss *listenSession) HoldForRound(delta int) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.paused += delta
	ss.active = ss.clock()
}

func (ss *listenSession) isClosed() bool {
	select {
	case <-ss.closed:
		return true
	default:
		return false
	}
}

// relabel gives a request's id one of the lane's own.
func (ss *listenSession) relabel(id json.RawMessage, method string) json.RawMessage {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.nextLabel++
	lid := json.RawMessage(fmt.Sprintf(`"undolog-%d"`, ss.nextLabel))
	ss.labels[idKey(lid)] = label{lane: lid, own: id, method: method}
	return lid
}

// endRefusedLane ends a lane whose server refused server/discover, once
// no request of it is in flight: a server that speaks no 2026-07-28 has
// no stateless client to serve (the client falls back to a session), and
// its process would otherwise idle till the lane's idle timeout.
func (s *HTTPServer) endRefusedLane(ss *listenSession) {
	ss.mu.Lock()
	end := ss.discoverRefused && ss.open == 0
	ss.mu.Unlock()
	if !end {
		return
	}
	s.mu.Lock()
	if s.lanes[ss.clientName] == ss {
		delete(s.lanes, ss.clientName)
	}
	if ss.stateless {
		s.laneCount--
	}
	s.mu.Unlock()
	if !ss.isClosed() {
		fmt.Fprintf(s.Diagnostics, "undolog proxy: the server refused the stateless client %q's server/discover (it speaks no %s): its server stopped\n", ss.clientName, mcpwire.StatelessVersion)
	}
	ss.Close()
}

// labelOf is the lane's id of the request in flight whose own id is id;
// nil if none is, or more than one (clients of one name).
func (ss *listenSession) labelOf(id json.RawMessage) json.RawMessage {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var found json.RawMessage
	for _, l := range ss.labels {
		if idKey(l.own) == idKey(id) {
			if found != nil {
				return nil
			}
			found = l.lane
		}
	}
	return found
}

func (ss *listenSession) unlabel(lid json.RawMessage) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.labels, idKey(lid))
}

// delivered is a message of the client's handed to its session: its bytes,
// and what they say when its POST already read them (a message is read
// once).
type delivered struct {
	raw    []byte
	parsed *message
}

func (ss *listenSession) deliver(msg []byte) bool {
	return ss.hand(delivered{raw: append([]byte(nil), msg...)})
}

// deliverRead hands the session a message its POST read, with the bytes
// it goes on as (m.raw).
func (ss *listenSession) deliverRead(m message) bool {
	return ss.hand(delivered{raw: m.raw, parsed: &m})
}

func (ss *listenSession) hand(d delivered) bool {
	select {
	case ss.incoming <- d:
		return true
	case <-ss.closed:
		return false
	}
}

func (ss *listenSession) Read() ([]byte, error) {
	d, err := ss.readDelivered()
	return d.raw, err
}

func (ss *listenSession) readDelivered() (delivered, error) {
	select {
	case d := <-ss.incoming:
		return d, nil
	case <-ss.closed:
		return delivered{}, io.EOF
	}
}

// stream opens the stream a POST's requests (their idKeys) are answered
// on; none if one of them has an answer to come on another stream (taken
// is its key).
func (ss *listenSession) stream(requests []string, jsonBody bool) (st *eventStream, taken string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, id := range requests {
		if ss.routes[id] != nil {
			return nil, id
		}
	}
	st = newEventStream(len(requests))
	ss.open++
	for _, id := range requests {
		ss.routes[id] = st
	}
	if !jsonBody {
		ss.streams = append(ss.streams, st)
	}
	return st, ""
}

func (ss *listenSession) standalone() *eventStream {
	st := newEventStream(-1)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.open++
	if ss.get != nil {
		ss.get.finish()
	}
	ss.get = st
	for _, m := range ss.backlog {
		st.send(m)
	}
	ss.backlog = nil
	return st
}

// drop forgets a stream whose HTTP request ended: answers still due on it
// are lost (the client went away), as the transport allows.
func (ss *listenSession) drop(st *eventStream) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.open--
	ss.active = ss.clock()
	for id, s := range ss.routes {
		if s == st {
			delete(ss.routes, id)
		}
	}
	for i, s := range ss.streams {
		if s == st {
			ss.streams = append(ss.streams[:i], ss.streams[i+1:]...)
			break
		}
	}
	if ss.get == st {
		ss.get = nil
	}
	st.finish()
}

// Write routes a message from the proxy: an answer to the stream of the
// POST that asked; a request or notification of the server's to the most
// recent POST stream still open, else the GET stream, else it waits for one.
func (ss *listenSession) Write(msg []byte) error {
	msg = bytes.TrimSpace(msg)
	if len(msg) > 0 && msg[0] == '[' { // a batch's answers
		var elems []json.RawMessage
		if json.Unmarshal(msg, &elems) == nil {
			var first error
			for _, e := range elems {
				if err := ss.Write(e); err != nil && first == nil {
					first = err
				}
			}
			return first
		}
	}
	id, method, _ := peek(msg)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	select {
	case <-ss.closed:
		return io.ErrClosedPipe
	default:
	}
	if method == "" && len(id) > 0 {
		if ss.version == "" {
			var r struct {
				Result struct {
					ProtocolVersion string `json:"protocolVersion"`
				} `json:"result"`
			}
			if json.Unmarshal(msg, &r) == nil && r.Result.ProtocolVersion != "" {
				ss.version = r.Result.ProtocolVersion
			}
		}
		st := ss.routes[idKey(id)]
		if l, ok := ss.labels[idKey(id)]; ok && st != nil {
			if l.method == "server/discover" && isErrorAnswer(msg) {
				ss.discoverRefused = true
			}
			if m, err := withID(msg, l.own); err == nil {
				msg = m
			}
		}
		if st == nil {
			// The POST that asked is gone (its client hung up): the answer
			// reaches nobody, and the proxy must not record that it did.
			return errAnswerUndelivered
		}
		delete(ss.routes, idKey(id))
		if !st.answer(msg) {
			return errAnswerUndelivered
		}
		return nil
	}
	for i := len(ss.streams) - 1; i >= 0; i-- {
		if ss.streams[i].send(msg) {
			return nil
		}
	}
	if ss.get != nil && ss.get.send(msg) {
		return nil
	}
	if len(ss.backlog) < 1000 {
		ss.backlog = append(ss.backlog, msg)
	}
	return nil
}

func (ss *listenSession) Close() error {
	ss.once.Do(func() {
		ss.mu.Lock()
		close(ss.closed)
		for _, st := range ss.streams {
			st.finish()
		}
		if ss.get != nil {
			ss.get.finish()
		}
		ss.mu.Unlock()
	})
	return nil
}

// eventStream is what one HTTP response carries: as server-sent events, or
// (json) collected into one JSON body.
type eventStream struct {
	mu    sync.Mutex
	queue [][]byte
	due   int // answers still due; -1: a GET stream, which never completes
	done  bool
	wake  chan struct{}
}

func newEventStream(due int) *eventStream {
	return &eventStream{due: due, wake: make(chan struct{}, 1)}
}

func (st *eventStream) signal() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// send queues a message of the server's on a stream still open: not on one
// that has had all its answers (its response is ending), nor on one whose
// client went away. It tells whether it did.
func (st *eventStream) send(msg []byte) bool {
	st.mu.Lock()
	ok := !st.done && st.due != 0
	if ok {
		st.queue = append(st.queue, msg)
	}
	st.mu.Unlock()
	st.signal()
	return ok
}

// answer queues an answer on its stream, and tells whether it could (not
// on a stream whose client went away).
func (st *eventStream) answer(msg []byte) bool {
	st.mu.Lock()
	ok := !st.done
	if ok {
		st.queue = append(st.queue, msg)
		if st.due > 0 {
			st.due--
		}
	}
	st.mu.Unlock()
	st.signal()
	return ok
}

// answersDue tells whether answers are still due on the stream.
func (st *eventStream) answersDue() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.due > 0
}

// errAnswerUndelivered is an answer whose HTTP request ended before it came.
var errAnswerUndelivered = errors.New("the client's HTTP request ended before its answer")

func (st *eventStream) finish() {
	st.mu.Lock()
	st.done = true
	st.mu.Unlock()
	st.signal()
}

// take returns what is queued, and whether the stream is complete.
func (st *eventStream) take() ([][]byte, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	q := st.queue
	st.queue = nil
	return q, st.done || st.due == 0
}

// pump writes the stream's messages as events until it is complete or the
// client goes away.
func (st *eventStream) pump(ctx context.Context, w http.ResponseWriter) {
	f, _ := w.(http.Flusher)
	for {
		q, complete := st.take()
		for _, m := range q {
			if bytes.ContainsAny(m, "\r\n") { // an event's data is one line here
				var b bytes.Buffer
				if json.Compact(&b, m) == nil {
					m = b.Bytes()
				}
			}
			if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", m); err != nil {
				return
			}
		}
		if f != nil && len(q) > 0 {
			f.Flush()
		}
		if complete {
			return
		}
		select {
		case <-st.wake:
		case <-ctx.Done():
			return
		}
	}
}

// wait collects a JSON stream's answers.
func (st *eventStream) wait(ctx context.Context) [][]byte {
	var all [][]byte
	for {
		q, complete := st.take()
		all = append(all, q...)
		if complete {
			return all
		}
		select {
		case <-st.wake:
		case <-ctx.Done():
			return all
		}
	}
}
