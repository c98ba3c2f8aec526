package cmd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/mcpclient"
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

// proxyListen serves HTTP clients until ctx ends (Ctrl-C). A pinned session
// (--session, UNDOLOG_SESSION) is shared by every client session; otherwise
// each client session gets a new one, printed on stderr.
func proxyListen(ctx context.Context, f *Factory, opts *proxyOptions, policy *proxy.Policy, lease time.Duration, upstream []string, remote *remoteUpstream) error {
	if err := opts.http.checkListen(); err != nil {
		return err
	}
	store := f.Log()
	pinned := opts.session
	if pinned == "" {
		pinned = f.Getenv("UNDOLOG_SESSION")
	}
	meta := map[string]string{"via": "proxy", "listen": opts.http.listen}
	// Undo starts the server where it ran (see proxy.go).
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	if pinned != "" {
		if _, err := store.GetSession(ctx, pinned); err != nil {
			if _, err := store.CreateSession(ctx, effectlog.NewSession{ID: pinned, Upstream: upstream, UpstreamDir: dir, Actor: f.Actor(""), Meta: meta}); err != nil {
				return err
			}
		}
		if _, err := store.SetUpstreamAt(ctx, pinned, upstream, dir); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", opts.http.listen)
	if err != nil {
		return err
	}
	redact := opts.redact
	if policy != nil {
		redact = append(redact, policy.Redact...)
	}
	var errMu sync.Mutex // the sessions' notes, one line at a time
	errOut := &lockedWriter{mu: &errMu, w: f.ErrOut}
	fmt.Fprintf(errOut, "undolog proxy: listening on http://%s/mcp (MCP over Streamable HTTP; Ctrl-C stops it)\n", ln.Addr())
	srv := &proxy.HTTPServer{AllowRemote: opts.http.allowRemote, Diagnostics: errOut, Start: func(ctx context.Context, client proxy.Conn) {
		session := pinned
		if session == "" {
			s, err := store.CreateSession(ctx, effectlog.NewSession{Upstream: upstream, UpstreamDir: dir, Actor: f.Actor(""), Meta: meta})
			if err != nil {
				fmt.Fprintf(errOut, "undolog proxy: a client session was refused: %s\n", textfmt.Escape(err.Error()))
				client.Close()
				return
			}
			session = s.ID
		}
		fmt.Fprintf(errOut, "undolog proxy: a client session: session %s (undo it with: %s undo %s)\n", session, textfmt.Escape(f.CLI()), session)
		var up proxy.Conn
		if remote != nil {
			up = proxy.DialHTTP(remote.url, remote.header, errOut)
		} else if cmdUp, err := proxy.StartCommand(upstream, errOut); err != nil {
			fmt.Fprintf(errOut, "undolog proxy: %s\n", textfmt.Escape(err.Error()))
			client.Close()
			return
		} else {
			up = cmdUp
		}
		p := &proxy.Proxy{Log: store, Session: session, Policy: policy, ApprovalWait: opts.approvalWait, Redact: redact, Diagnostics: errOut, Now: f.Now, Lease: lease, CLI: f.CLI(), Dir: dir}
		p.Serve(ctx, client, up)
	}}
	err = srv.Serve(ctx, ln)
	fmt.Fprintln(errOut, "undolog proxy: stopped")
	return err
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
