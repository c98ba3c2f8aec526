package main

// The proxy's rows under MCP 2026-07-28 over HTTP both ways: a Go SDK client
// calls `undolog proxy --listen` in front of (`--url`) a Go SDK server over
// stateless Streamable HTTP, and the same client calls the same server
// directly, in turns. The server runs in this process; it needs nothing
// installed.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkKVPolicy: get is safe (no write to the log), set is compensable
// (recorded before it runs, committed after), undone by del.
const sdkKVPolicy = `tools:
  get: {tier: safe}
  set:
    tier: compensable
    compensate: {tool: del, args: {key: "{{ .args.key }}"}}
  del: {tier: safe}
`

// sdkKVServer serves a key-value store on the Go SDK over stateless
// Streamable HTTP on a local port, and returns its URL.
func sdkKVServer() (string, func(), error) {
	var mu sync.Mutex
	values := map[string]string{}
	type keyValue struct {
		Key   string `json:"key"`
		Value string `json:"value,omitempty"`
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-kv", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "get", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, a keyValue) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			defer mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: values[a.Key]}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "set"},
		func(_ context.Context, _ *mcp.CallToolRequest, a keyValue) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			defer mu.Unlock()
			values[a.Key] = a.Value
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "set " + a.Key}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "del"},
		func(_ context.Context, _ *mcp.CallToolRequest, a keyValue) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			defer mu.Unlock()
			delete(values, a.Key)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + a.Key}}}, nil, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	return fmt.Sprintf("http://%s/mcp", ln.Addr()), func() { srv.Close() }, nil
}

// reverseProxy is the floor of what a proxy over HTTP adds: Go's plain
// reverse proxy, passing each exchange on as it is, in a process of its own
// (this program again, which serveReverseProxy makes one) as the proxy is.
func reverseProxy(upstream string) (string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), reverseProxyEnv+"="+upstream)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("the reverse proxy printed no URL: %w", err)
	}
	return strings.TrimSpace(url), stop, nil
}

// reverseProxyEnv names the upstream URL when this program is the floor's
// reverse proxy.
const reverseProxyEnv = "UNDOLOG_BENCH_REVERSE_PROXY"

// serveReverseProxy serves the floor's reverse proxy to upstream on a local
// port, its URL its first line of output.
func serveReverseProxy(upstream string) error {
	target, err := neturl.Parse(upstream)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.URL.Path = target.Path }, FlushInterval: -1}
	return http.Serve(ln, rp)
}

// listenProxy starts `undolog proxy --listen` on a local port and returns
// the URL it prints.
func listenProxy(bin string, args ...string) (string, func(), error) {
	cmd := exec.Command(bin, append([]string{"proxy", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "UNDOLOG_ACTOR=bench")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }
	buf := make([]byte, 4096)
	var out strings.Builder
	for !strings.Contains(out.String(), "/mcp ") {
		n, err := stderr.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			stop()
			return "", nil, fmt.Errorf("undolog proxy --listen printed no URL: %s", strings.TrimSpace(out.String()))
		}
	}
	_, rest, _ := strings.Cut(out.String(), "listening on ")
	url, _, _ := strings.Cut(rest, " ")
	go func() { // the proxy's later lines, unread, must not block it
		for {
			if _, err := stderr.Read(buf); err != nil {
				return
			}
		}
	}()
	return url, stop, nil
}

// connect2026 is a Go SDK client session at 2026-07-28 over HTTP to url.
func connect2026(ctx context.Context, url string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		return nil, err
	}
	if v := s.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		s.Close()
		return nil, fmt.Errorf("%s speaks %s, not 2026-07-28", url, v)
	}
	return s, nil
}

func proxyHTTPRows(add func(what, value, ratio string), work string) error {
	bin, err := buildUndolog()
	if err != nil {
		return err
	}
	server, stopServer, err := sdkKVServer()
	if err != nil {
		return err
	}
	defer stopServer()
	policy := filepath.Join(work, "bench-kv.yaml")
	if err := os.WriteFile(policy, []byte(sdkKVPolicy), 0o644); err != nil {
		return err
	}
	proxyURL, stopProxy, err := listenProxy(bin, "--log", filepath.Join(work, "proxy-http.db"), "--session", "http",
		"--policy", policy, "--url", server)
	if err != nil {
		return err
	}
	defer stopProxy()
	ctx := context.Background()
	direct, err := connect2026(ctx, server)
	if err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	defer direct.Close()
	through, err := connect2026(ctx, proxyURL)
	if err != nil {
		return fmt.Errorf("through the proxy: %w", err)
	}
	defer through.Close()
	floorURL, stopFloor, err := reverseProxy(server)
	if err != nil {
		return err
	}
	defer stopFloor()
	plain, err := connect2026(ctx, floorURL)
	if err != nil {
		return fmt.Errorf("through a plain reverse proxy: %w", err)
	}
	defer plain.Close()

	seq := 0
	timed := func(s *mcp.ClientSession, tool string) (time.Duration, error) {
		seq++
		args := map[string]any{"key": fmt.Sprintf("k%d", seq%50)}
		if tool == "set" {
			args["value"] = fmt.Sprint(seq)
		}
		start := time.Now()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		took := time.Since(start)
		if err == nil && res.IsError {
			err = fmt.Errorf("%s: a tool error", tool)
		}
		return took, err
	}
	// sideBySideCalls makes proxyCalls calls of tool each way, in turns, and
	// returns the median added by the proxy and the direct call's median.
	sideBySideCalls := func(tool string) (float64, float64, float64, error) {
		var d, p, f []time.Duration
		for i := 0; i < proxyCalls; i++ {
			x, err := timed(direct, tool)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("direct: %w", err)
			}
			y, err := timed(through, tool)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("through the proxy: %w", err)
			}
			z, err := timed(plain, tool)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("through a plain reverse proxy: %w", err)
			}
			d, p, f = append(d, x), append(p, y), append(f, z)
		}
		return ms(quantile(p, 0.5) - quantile(d, 0.5)), ms(quantile(d, 0.5)), ms(quantile(f, 0.5) - quantile(d, 0.5)), nil
	}
	// Warm both ways: connections, the proxy's own tool list.
	for _, tool := range []string{"get", "set"} {
		if _, _, _, err := sideBySideCalls(tool); err != nil {
			return err
		}
	}
	var safeAdded, safeDirect, compAdded, compDirect, floor, syncs []float64
	for round := 0; round < *runs; round++ {
		// A compensable call's floor adds its two durable writes.
		two, err := twoSyncs(filepath.Join(work, "proxy-http-floor"))
		if err != nil {
			return err
		}
		syncs = append(syncs, two)
		a, d, f, err := sideBySideCalls("get")
		if err != nil {
			return err
		}
		safeAdded, safeDirect, floor = append(safeAdded, a), append(safeDirect, d), append(floor, f)
		a, d, _, err = sideBySideCalls("set")
		if err != nil {
			return err
		}
		compAdded, compDirect = append(compAdded, a), append(compDirect, d)
	}
	add("proxy, 2026-07-28 over HTTP: safe call, p50 added", fmt.Sprintf("%.2f ms", median(safeAdded)),
		fmt.Sprintf("over a direct %.2f ms (target at most 1.0 ms)", median(safeDirect)))
	add("proxy, 2026-07-28 over HTTP: its floor, a plain reverse proxy (httputil) in a process", fmt.Sprintf("%.2f ms", median(floor)), "")
	add("proxy, 2026-07-28 over HTTP: compensable call, p50 added", fmt.Sprintf("%.2f ms", median(compAdded)),
		fmt.Sprintf("over a direct %.2f ms (target at most 1.0 ms)", median(compDirect)))
	add("proxy, 2026-07-28 over HTTP: its floor, the plain proxy and two 4 KiB overwrite+fdatasync", fmt.Sprintf("%.2f ms", median(floor)+median(syncs)), "")
	return nil
}
