package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/internal/testbin"
)

// remote is an MCP server over Streamable HTTP (the Go SDK's) that wants
// "Authorization: Bearer s3cret-token" and keeps a set of names: put adds
// one, remove takes it away. It counts the sessions clients open.
type remote struct {
	url string

	mu       sync.Mutex
	names    map[string]bool
	sessions int
	denied   int
}

const remoteToken = "Bearer s3cret-token"

func newRemote(t testing.TB) *remote {
	r := &remote{names: map[string]bool{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, nil)
	type nameArgs struct {
		Name string `json:"name"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "put"}, func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
		r.mu.Lock()
		r.names[a.Name] = true
		r.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "put " + a.Name}}}, nil, nil
	})
	mcp.AddTool(server, &mcp.Tool{Name: "remove"}, func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
		r.mu.Lock()
		delete(r.names, a.Name)
		r.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "removed " + a.Name}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		if req.Header.Get("Authorization") != remoteToken {
			r.denied++
			r.mu.Unlock()
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if req.Method == http.MethodPost && req.Header.Get("Mcp-Session-Id") == "" {
			r.sessions++
		}
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(ts.Close)
	r.url = ts.URL + "/mcp"
	return r
}

func (r *remote) has(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.names[name]
}

const remotePolicy = `tools:
  put:
    tier: compensable
    compensate: {tool: remove, args: {name: "{{ .args.name }}"}}
  remove: {tier: safe}
`

// TestProxyFrontsAnHTTPServer: --url with --header NAME=ENV_VAR reaches a
// server that wants a token; the token is read from the environment, so it
// is in neither the log nor the proxy's command line; the session records
// the URL and the variable's name, and undo reconnects the same way,
// reading the variable again (and says which is missing without it).
func TestProxyFrontsAnHTTPServer(t *testing.T) {
	h := newHarness(t)
	r := newRemote(t)
	policy := filepath.Join(h.dir, "remote.yaml")
	os.WriteFile(policy, []byte(remotePolicy), 0o644)
	argv := []string{testbin.Undolog(t), "proxy", "--session", "remote-1", "--policy", policy, "--url", r.url, "--header", "Authorization=REMOTE_AUTH"}
	s := h.connect(argv, "REMOTE_AUTH="+remoteToken)
	if res := call(t, s, "put", map[string]any{"name": "alpha"}); res.IsError || text(res) != "put alpha" {
		t.Fatalf("put through the proxy: %+v", res)
	}
	if !r.has("alpha") {
		t.Fatal("the remote server did not get the call")
	}
	s.Close()

	for _, arg := range argv {
		if strings.Contains(arg, "s3cret") {
			t.Fatalf("the token is on the command line: %q", arg)
		}
	}
	raw, err := os.ReadFile(h.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "s3cret") {
		t.Fatal("the token reached the log")
	}
	show := h.cli("session", "show", "remote-1")
	if !strings.Contains(show, "--url "+r.url+" --header Authorization=REMOTE_AUTH") {
		t.Fatalf("the session does not name the URL and the header's variable:\n%s", show)
	}

	// Without the variable, undo says which one it needs, and changes nothing.
	cmd := exec.Command(testbin.Undolog(t), "undo", "remote-1", "--yes")
	cmd.Env = h.env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "REMOTE_AUTH is not set") || !r.has("alpha") {
		t.Fatalf("undo without the variable: %v\n%s", err, out)
	}
	cmd = exec.Command(testbin.Undolog(t), "undo", "remote-1", "--yes")
	cmd.Env = append(h.env, "REMOTE_AUTH="+remoteToken)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("undo: %v\n%s", err, out)
	}
	if r.has("alpha") {
		t.Fatal("undo did not reach the remote server")
	}
}

// TestProxyRefusesAnURLWithCredentials: the URL is recorded, so a password
// in it is refused before anything is logged.
func TestProxyRefusesAnURLWithCredentials(t *testing.T) {
	h := newHarness(t)
	cmd := exec.Command(testbin.Undolog(t), "proxy", "--url", "https://me:pw@example.com/mcp")
	cmd.Env = h.env
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "holds credentials") {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Stat(h.logPath); err == nil {
		t.Fatal("a log was written")
	}
}

// TestProxyRefusesAnUnreachableURL: a --url nobody answers at fails the
// proxy at its start (exit 1, one line), with stdio and --listen clients
// alike, before anything is logged.
func TestProxyRefusesAnUnreachableURL(t *testing.T) {
	h := newHarness(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	for _, args := range [][]string{{"proxy", "--url", closed}, {"proxy", "--listen", "127.0.0.1:0", "--url", closed}} {
		cmd := exec.Command(testbin.Undolog(t), args...)
		cmd.Env = h.env
		cmd.Stdin = strings.NewReader(initializeLine + "\n")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "cannot be reached") || strings.Contains(string(out), "listening") {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	if _, err := os.Stat(h.logPath); err == nil {
		t.Fatal("a log was written")
	}
}

// listening starts `undolog proxy --listen 127.0.0.1:0 ARGS...` and returns
// the URL it prints, its stderr lines after that, and its exit.
func listening(t *testing.T, h *harness, args ...string) (string, *exec.Cmd, chan error) {
	return listeningTB(t, h, args...)
}

func listeningTB(t testing.TB, h *harness, args ...string) (string, *exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command(testbin.Undolog(t), append([]string{"proxy", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(h.env, "UNDOLOG_FAKE_SERVER=1", "REMOTE_AUTH="+remoteToken)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(stderr)
	url := ""
	for url == "" && sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
			url, _, _ = strings.Cut(rest, " ")
		}
	}
	exited := make(chan error, 1)
	go func() {
		for sc.Scan() {
			if testing.Verbose() {
				t.Log(sc.Text())
			}
		}
		exited <- cmd.Wait()
	}()
	if url == "" {
		t.Fatal("the proxy printed no URL")
	}
	return url, cmd, exited
}

// TestProxyListensForHTTPClients: two MCP clients over Streamable HTTP at
// 2025-11-25 (with sessions) share one proxy and one log, each client
// session with its own upstream session and its own undolog session; SIGINT stops the proxy cleanly, with
// the stdio proxy's exit code for a signal (130).
func TestProxyListensForHTTPClients(t *testing.T) {
	h := newHarness(t)
	r := newRemote(t)
	policy := filepath.Join(h.dir, "remote.yaml")
	os.WriteFile(policy, []byte(remotePolicy), 0o644)
	url, cmd, exited := listening(t, h, "--policy", policy, "--url", r.url, "--header", "Authorization=REMOTE_AUTH")

	var clients []*mcp.ClientSession
	for _, name := range []string{"agent-a", "agent-b"} {
		c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
		s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, s)
		if res := call(t, s, "put", map[string]any{"name": name}); res.IsError || text(res) != "put "+name {
			t.Fatalf("%s: %+v", name, res)
		}
	}
	r.mu.Lock()
	sessions := r.sessions
	r.mu.Unlock()
	if sessions != 2 {
		t.Fatalf("two client sessions opened %d upstream sessions", sessions)
	}
	for _, s := range clients {
		s.Close()
	}
	list := h.cli("list")
	if strings.Count(list, "\tput\t") != 2 || strings.Count(list, "committed") != 2 {
		t.Fatalf("both agents' calls should be in the one log:\n%s", list)
	}
	sessionsLogged := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if cols := strings.Split(line, "\t"); len(cols) > 2 && cols[2] == "put" {
			sessionsLogged[cols[1]] = true
		}
	}
	if len(sessionsLogged) != 2 {
		t.Fatalf("the two client sessions should be two undolog sessions:\n%s", list)
	}

	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
			t.Fatalf("SIGINT: %v, want exit 130", err)
		}
	case <-time.After(30 * time.Second): // a guard against hanging
		t.Fatal("the proxy did not stop within 30 s of SIGINT")
	}
}

// TestProxyListenRefusesOtherHosts: --listen takes a loopback address unless
// --listen-non-loopback says otherwise, and requests naming another host
// (DNS rebinding) are refused.
func TestProxyListenRefusesOtherHosts(t *testing.T) {
	h := newHarness(t)
	cmd := exec.Command(testbin.Undolog(t), "proxy", "--listen", "0.0.0.0:0", "--", os.Args[0])
	cmd.Env = h.env
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "not a loopback address") {
		t.Fatalf("%v\n%s", err, out)
	}

	policy := filepath.Join(h.dir, "fake.yaml")
	os.WriteFile(policy, []byte("tools:\n  echo: {tier: safe}\n"), 0o644)
	url, _, _ := listening(t, h, "--policy", policy, "--", os.Args[0])
	// A client with the right host gets a server process of its own.
	c := mcp.NewClient(&mcp.Implementation{Name: "local", Version: "1"}, nil)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := call(t, s, "echo", map[string]any{}); res.IsError || text(res) != "ok" {
		t.Fatalf("echo through --listen to a stdio server: %+v", res)
	}
	s.Close()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Host = "evil.example.com"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a request for another host: HTTP %d", resp.StatusCode)
	}
}

// BenchmarkHTTPProxyLatency measures one compensable call (put) made over
// Streamable HTTP directly to a Go SDK server and through `undolog proxy
// --listen ... --url ...`, alternately in one run: medians, p99s and the
// median the proxy adds (two HTTP hops instead of one, and the log).
//
//	go test ./proxy -run '^$' -bench HTTPProxyLatency -benchtime 300x
func BenchmarkHTTPProxyLatency(b *testing.B) {
	h := newHarness(b)
	r := newRemote(b)
	policy := filepath.Join(h.dir, "remote.yaml")
	os.WriteFile(policy, []byte(remotePolicy), 0o644)
	url, _, _ := listeningTB(b, h, "--policy", policy, "--url", r.url, "--header", "Authorization=REMOTE_AUTH")
	connect := func(endpoint string, header http.Header) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		hc := &http.Client{Transport: roundTrip(func(req *http.Request) (*http.Response, error) {
			for k, v := range header {
				req.Header[k] = v
			}
			return http.DefaultTransport.RoundTrip(req)
		})}
		s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	direct := connect(r.url, http.Header{"Authorization": {remoteToken}})
	proxied := connect(url, nil)
	var d, p []time.Duration
	timed := func(s *mcp.ClientSession, name string) time.Duration {
		start := time.Now()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "put", Arguments: map[string]any{"name": name}})
		if err != nil || res.IsError {
			b.Fatalf("%v %v", err, res)
		}
		return time.Since(start)
	}
	for i := 0; b.Loop(); i++ {
		d = append(d, timed(direct, fmt.Sprintf("d%d", i)))
		p = append(p, timed(proxied, fmt.Sprintf("p%d", i)))
	}
	q := func(x []time.Duration, f float64) float64 {
		s := append([]time.Duration(nil), x...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[int(f*float64(len(s)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(d, 0.5), "direct-p50-ms")
	b.ReportMetric(q(d, 0.99), "direct-p99-ms")
	b.ReportMetric(q(p, 0.5), "proxy-p50-ms")
	b.ReportMetric(q(p, 0.99), "proxy-p99-ms")
	b.ReportMetric(q(p, 0.5)-q(d, 0.5), "added-p50-ms")
	b.ReportMetric(0, "ns/op")
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestProxyListenRetryAfterADroppedPOSTIsReplayed: an HTTP client whose
// POST ended before the server answered never got the answer, so the same
// call made again is a retry: answered from the log, not run a second time
// (over stdio a written answer is a delivered one; over HTTP it is not).
func TestProxyListenRetryAfterADroppedPOSTIsReplayed(t *testing.T) {
	h := newHarness(t)
	release := filepath.Join(h.dir, "go")
	h.env = append(h.env, "UNDOLOG_FAKE_SERVER=1", "UNDOLOG_FAKE_GO="+release)
	policy := filepath.Join(h.dir, "hold.yaml")
	os.WriteFile(policy, []byte("tools:\n  hold:\n    tier: compensable\n    compensate: {tool: echo, args: {}}\n"), 0o644)
	url, _, _ := listening(t, h, "--policy", policy, "--", os.Args[0])

	post := func(ctx context.Context, sid, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		return http.DefaultClient.Do(req)
	}
	resp, err := post(t.Context(), "", initializeLine)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp, err := post(t.Context(), sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err == nil {
		resp.Body.Close()
	}
	const holdCall = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"hold","arguments":{"n":1}}}`

	// The POST ends while the server holds the call.
	ctx, cancel := context.WithCancel(t.Context())
	dropped := make(chan struct{})
	go func() {
		defer close(dropped)
		if resp, err := post(ctx, sid, fmt.Sprintf(holdCall, 2)); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	waitFor(t, "the call to execute", func() bool { return strings.Contains(h.cli("list"), "executing") })
	cancel()
	<-dropped
	os.WriteFile(release, nil, 0o644)
	waitFor(t, "the held call to commit", func() bool { return strings.Contains(h.cli("list"), "committed") })

	resp, err = post(t.Context(), sid, fmt.Sprintf(holdCall, 3))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "held, then done") {
		t.Fatalf("the retry's answer: %s", body)
	}
	if list := h.cli("list"); strings.Count(list, "\tcommitted\t") != 1 || !strings.Contains(list, "\treplayed\t") {
		t.Fatalf("the retry of a call whose POST was dropped ran again:\n%s", list)
	}
}

// TestProxyListenSignalAnswersAWaitingCall: Ctrl-C on a --listen proxy
// answers a call that waits for approval on its own POST, as the stdio
// proxy does ("was not run ... its request stands"), and exits 130.
func TestProxyListenSignalAnswersAWaitingCall(t *testing.T) {
	h := newHarness(t)
	h.env = append(h.env, "UNDOLOG_FAKE_SERVER=1")
	policy := filepath.Join(h.dir, "ask.yaml")
	os.WriteFile(policy, []byte("tools:\n  echo: {tier: irreversible}\n"), 0o644)
	url, cmd, exited := listening(t, h, "--policy", policy, "--approval-wait", "10m", "--", os.Args[0])
	c := mcp.NewClient(&mcp.Implementation{Name: "waiting", Version: "1"}, nil)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
		if err != nil {
			res = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "error: " + err.Error()}}}
		}
		answered <- res
	}()
	waitFor(t, "the call to wait for approval", func() bool { return strings.Contains(h.cli("approvals"), "echo") })
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case res := <-answered:
		if !res.IsError || !strings.Contains(text(res), "was not run: the proxy was stopped by a signal while it waited for approval; its request stands") {
			t.Fatalf("the waiting call's answer: %+v %s", res, text(res))
		}
	case <-time.After(30 * time.Second): // a guard against hanging
		t.Fatal("the waiting call got no answer within 30 s of SIGINT")
	}
	if err := <-exited; err == nil || err.(*exec.ExitError).ExitCode() != 130 {
		t.Fatalf("exit: %v, want 130", err)
	}
}

// TestProxyListenRefusesAnIDInFlight: over HTTP a POST whose request has the
// id of one still in flight (however spelled) is refused whole (-32600, its
// id), and the first still gets its answer on its own POST.
func TestProxyListenRefusesAnIDInFlight(t *testing.T) {
	h := newHarness(t)
	release := filepath.Join(h.dir, "go")
	h.env = append(h.env, "UNDOLOG_FAKE_SERVER=1", "UNDOLOG_FAKE_GO="+release)
	policy := filepath.Join(h.dir, "hold.yaml")
	os.WriteFile(policy, []byte("tools:\n  hold: {tier: compensable}\n  echo: {tier: compensable}\n"), 0o644)
	url, _, _ := listening(t, h, "--policy", policy, "--", os.Args[0])
	post := func(sid, body string) (int, string, string) { return postMCP(t, url, sid, body) }
	_, sid, _ := post("", initializeLine)
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	first := make(chan string, 1)
	go func() {
		_, _, body := post(sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hold","arguments":{}}}`)
		first <- body
	}()
	waitFor(t, "the held call to execute", func() bool { return strings.Contains(h.cli("list"), "executing") })
	status, _, body := post(sid, `{"jsonrpc":"2.0","id":5.0,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if status != 400 || !strings.Contains(body, `"id":5.0`) || !strings.Contains(body, "still in flight") {
		t.Fatalf("a second request with id 5.0: %d %s", status, body)
	}
	os.WriteFile(release, nil, 0o644)
	if body := <-first; !strings.Contains(body, "held, then done") {
		t.Fatalf("the first request's answer: %s", body)
	}
	if list := h.cli("list"); strings.Contains(list, "echo") {
		t.Fatalf("the refused request was logged:\n%s", list)
	}
}

// TestProxyListenRefusesANullID: over HTTP a request with id null is refused
// (400, -32600), not taken for a notification (202) and run.
func TestProxyListenRefusesANullID(t *testing.T) {
	h := newHarness(t)
	h.env = append(h.env, "UNDOLOG_FAKE_SERVER=1")
	policy := filepath.Join(h.dir, "echo.yaml")
	os.WriteFile(policy, []byte("tools:\n  echo: {tier: compensable}\n"), 0o644)
	url, _, _ := listening(t, h, "--policy", policy, "--", os.Args[0])
	post := func(sid, body string) (int, string, string) { return postMCP(t, url, sid, body) }
	_, sid, _ := post("", initializeLine)
	if status, _, body := post(sid, `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo","arguments":{}}}`); status != 400 || !strings.Contains(body, "is not a string or a number") {
		t.Fatalf("id null: %d %s", status, body)
	}
	if list := h.cli("list"); strings.Contains(list, "echo") {
		t.Fatalf("the refused call was logged:\n%s", list)
	}
}

// postMCP POSTs one message to an MCP endpoint, in client session sid ("":
// none yet), and returns the status, the session id answered and the body.
func postMCP(t *testing.T, url, sid, body string) (status int, session, answer string) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, "", ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}
