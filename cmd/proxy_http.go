package cmd

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/mcpclient"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/policy"
	"github.com/undolog/undolog/proxy"
)

// httpOptions are the proxy's Streamable HTTP flags: --url and --header for
// a remote upstream, --listen for HTTP clients.
type httpOptions struct {
	url         string
	headers     []string
	listen      string
	allowRemote bool
}

func (o *httpOptions) flags(c *cobra.Command) {
	c.Flags().StringVar(&o.url, "url", "", "front the MCP server at this Streamable HTTP `URL` instead of starting a server command")
	c.Flags().StringArrayVar(&o.headers, "header", nil, "with --url: send header NAME with the value of environment variable ENV_VAR (`NAME=ENV_VAR`; repeatable; only the names are logged)")
	c.Flags().StringVar(&o.listen, "listen", "", "serve MCP clients over Streamable HTTP at `ADDR` (127.0.0.1:PORT; URL http://ADDR/mcp) instead of stdio")
	c.Flags().BoolVar(&o.allowRemote, "listen-non-loopback", false, "let --listen take an address other hosts can reach (the proxy has no authentication of its own)")
}

func (o *httpOptions) checkArgs(args []string) error {
	switch {
	case o.url != "" && len(args) > 0:
		return usagef("proxy takes --url or a server command, not both")
	case o.url == "" && len(args) == 0:
		return usagef("proxy needs the MCP server command: undolog proxy -- SERVER_CMD [ARGS...] (or --url URL)")
	case o.url == "" && strings.HasPrefix(args[0], "-"):
		return usagef("proxy: the server command %q starts with '-': put it after -- (undolog proxy [flags] -- SERVER_CMD)", textfmt.Escape(args[0]))
	case o.url == "" && len(o.headers) > 0:
		return usagef("proxy: --header goes with --url")
	}
	return nil
}

// remoteUpstream is a Streamable HTTP server with its headers' values.
type remoteUpstream struct {
	url    string
	header http.Header
}

func (r *remoteUpstream) dial(f *Factory) proxy.Conn {
	return proxy.DialHTTP(r.url, r.header, f.ErrOut)
}

// reachable connects to the server's host and port once, so that a proxy
// in front of a server that is not there fails at its start, as one whose
// command cannot start does, not on its client's first request.
func (r *remoteUpstream) reachable(ctx context.Context) error {
	u, err := url.Parse(r.url)
	if err != nil {
		return err
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return fmt.Errorf("the upstream server %s cannot be reached: %v", r.url, err)
	}
	return conn.Close()
}

// upstream is what the session records (the command, or the URL and header
// names) and, for --url, the remote with its header values read now.
func (o *httpOptions) upstream(f *Factory, args []string) ([]string, *remoteUpstream, error) {
	if o.url == "" {
		return args, nil, nil
	}
	if err := mcpclient.CheckURL(o.url); err != nil {
		return nil, nil, usagef("%v", err)
	}
	r := mcpclient.Remote{URL: o.url}
	for _, h := range o.headers {
		hv, err := mcpclient.ParseHeaderVar(h)
		if err != nil {
			return nil, nil, usagef("--%v", err)
		}
		r.Headers = append(r.Headers, hv)
	}
	header, err := r.Header(f.Getenv)
	if err != nil {
		return nil, nil, usagef("--%v", err)
	}
	return r.Argv(), &remoteUpstream{url: o.url, header: header}, nil
}

// validPinned checks a pinned session's name, which must leave room for
// the names of its successors (S.2, S.3, ...: proxy/session.go).
func validPinned(session string) error {
	if err := model.ValidSessionID(session); err != nil {
		return err
	}
	if len(session) > maxPinned {
		return usagef("session %q is %d characters: a proxy's session takes at most %d, to leave room for the names of the sessions that follow it (%s.2, ...)", session, len(session), maxPinned, session)
	}
	return nil
}

const maxPinned = 120

// pinnedSession is the session the proxy's calls go in when one is pinned
// (--session, else UNDOLOG_SESSION), checked; "" when none is.
func (o *proxyOptions) pinnedSession(f *Factory) (string, error) {
	pinned := cmp.Or(o.session, f.Getenv("UNDOLOG_SESSION"))
	if pinned == "" {
		return "", nil
	}
	return pinned, validPinned(pinned)
}

// sessionOrNew is the pinned session, or else the name of a new one, made
// on the first logged call (proxy/session.go), with the words that say so.
func sessionOrNew(pinned string, now time.Time) (session, made string) {
	if pinned != "" {
		return pinned, ""
	}
	return model.NewSessionID(now), ", made on its first logged call"
}

// checkListen refuses an address other hosts can reach, unless allowed.
func (o *httpOptions) checkListen() error {
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return usagef("--listen %q: want HOST:PORT, e.g. 127.0.0.1:8931", o.listen)
	}
	if o.allowRemote {
		return nil
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usagef("--listen %s is not a loopback address: other hosts could reach the proxy, which has no authentication; use 127.0.0.1:PORT, or add --listen-non-loopback", o.listen)
	}
	return nil
}

// proxyListen serves HTTP clients until ctx ends (Ctrl-C: exit 130). A pinned session
// (--session, UNDOLOG_SESSION) is shared by every client session; otherwise
// each client session gets a new one, printed on stderr, and each stateless
// client (MCP 2026-07-28) one per client name for the proxy's run.
func proxyListen(ctx context.Context, f *Factory, opts *proxyOptions, pol *policy.Policy, lease time.Duration, upstream, stateEnv []string, remote *remoteUpstream) error {
	if err := opts.http.checkListen(); err != nil {
		return err
	}
	if remote != nil {
		if err := remote.reachable(ctx); err != nil {
			return err
		}
	}
	store := f.Log()
	pinned, err := opts.pinnedSession(f)
	if err != nil {
		return err
	}
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.http.listen)
	if err != nil {
		return err
	}
	redact := opts.redact
	if pol != nil {
		redact = append(redact, pol.Redact...)
	}
	var errMu sync.Mutex // the sessions' notes, one line at a time
	errOut := &lockedWriter{mu: &errMu, w: f.ErrOut}
	fmt.Fprintf(errOut, "undolog proxy: listening on http://%s/mcp (MCP over Streamable HTTP; Ctrl-C stops it)\n", ln.Addr())
	serve := func(ctx context.Context, client proxy.Conn, session string) (current string, served bool) {
		var up proxy.Conn
		if remote != nil {
			up = proxy.DialHTTP(remote.url, remote.header, errOut)
		} else if cmdUp, err := proxy.StartCommand(upstream, errOut); err != nil {
			fmt.Fprintf(errOut, "undolog proxy: %s\n", textfmt.Escape(err.Error()))
			client.Close()
			return "", false
		} else {
			up = cmdUp
		}
		p := &proxy.Proxy{Log: store, Session: session, Policy: pol, ApprovalWait: opts.approvalWait, InputWait: opts.inputWait, Redact: redact, Diagnostics: errOut, Now: f.Now, Lease: lease, CLI: f.CLI(),
			Dir: dir, SessionActor: f.Actor(""), Upstream: upstream, StateEnv: stateEnv}
		p.Serve(ctx, client, up)
		return p.CurrentSession(), true
	}
	// A stateless client's calls (MCP 2026-07-28) go in one session per
	// client name for the proxy's run, even across the lanes the proxy
	// ends when idle: the pinned one, else the one its first lane made.
	var lanesMu sync.Mutex
	laneSessions := map[string]string{}
	srv := &proxy.HTTPServer{AllowRemote: opts.http.allowRemote, Diagnostics: errOut, Start: func(ctx context.Context, client proxy.Conn) {
		// Each client session's undolog session is made on its first
		// logged call, as the stdio proxy's is.
		session, made := sessionOrNew(pinned, f.Now())
		fmt.Fprintf(errOut, "undolog proxy: a client connected: its calls go in session %s%s\n", session, made)
		if s, served := serve(ctx, client, session); s != "" {
			fmt.Fprintf(errOut, "undolog proxy: a client session ended; its calls are in session %s\n", s)
		} else if served {
			fmt.Fprintln(errOut, "undolog proxy: a client session ended; it logged no call")
		}
	}, StartStateless: func(ctx context.Context, client proxy.Conn, name string) {
		lanesMu.Lock()
		session, made := laneSessions[name], ""
		if session == "" {
			session, made = sessionOrNew(pinned, f.Now())
			laneSessions[name] = session
		}
		lanesMu.Unlock()
		fmt.Fprintf(errOut, "undolog proxy: stateless client %q: its calls go in session %s%s\n", name, session, made)
		if s, _ := serve(ctx, client, session); s != "" {
			lanesMu.Lock()
			laneSessions[name] = s // a successor, if the session was halted
			lanesMu.Unlock()
		}
	}}
	err = srv.Serve(ctx, ln)
	fmt.Fprintln(errOut, "undolog proxy: stopped")
	if err == nil && ctx.Err() != nil {
		// A signal: exit 130, as the stdio proxy does.
		err = fmt.Errorf("%w (%v)", proxy.ErrInterrupted, context.Cause(ctx))
	}
	return proxyEnd(err)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  interface{ Write([]byte) (int, error) }
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
