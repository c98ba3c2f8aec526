package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/policy"
	"github.com/undolog/undolog/proxy"
	sm "github.com/undolog/undolog/statemachine"
)

const rawInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// wired is a proxy in front of the fake server over raw pipes, with its
// stderr kept and the fake server's pid known.
type wired struct {
	t      *testing.T
	in     io.WriteCloser
	lines  chan []byte // what the proxy writes to the client, closed at its end
	stdout io.ReadCloser
	cmd    *exec.Cmd
	pid    int
	mu     sync.Mutex
	stderr strings.Builder
	exited chan error
}

func wire(t *testing.T, h *harness, policyYAML string, flags ...string) *wired {
	t.Helper()
	return wireAs(t, h, rawInitialize, policyYAML, flags...)
}

// wireAs is wire with the client's own initialize message.
func wireAs(t *testing.T, h *harness, initialize, policyYAML string, flags ...string) *wired {
	t.Helper()
	policy := filepath.Join(h.dir, "wire.yaml")
	os.WriteFile(policy, []byte(policyYAML), 0o644)
	pidFile := filepath.Join(h.dir, "server.pid")
	os.Remove(pidFile)
	args := append([]string{"proxy", "--session", "wire-1", "--policy", policy}, flags...)
	cmd := exec.Command(testbin.Undolog(t), append(args, "--", os.Args[0])...)
	cmd.Env = append(h.env, "UNDOLOG_FAKE_SERVER=1", "UNDOLOG_FAKE_PIDFILE="+pidFile)
	w := &wired{t: t, cmd: cmd, exited: make(chan error, 1), lines: make(chan []byte, 100)}
	w.in, _ = cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	w.stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		defer close(w.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			w.mu.Lock()
			w.stderr.WriteString(sc.Text() + "\n")
			w.mu.Unlock()
			if testing.Verbose() {
				os.Stderr.WriteString(sc.Text() + "\n")
			}
		}
	}()
	go func() {
		<-errDone
		<-outDone
		w.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		w.in.Close()
		cmd.Process.Kill()
	})
	w.send(initialize)
	if m := w.next(); m["id"] != 1.0 {
		t.Fatalf("initialize: %v", m)
	}
	b, _ := os.ReadFile(pidFile)
	w.pid, _ = strconv.Atoi(string(b))
	if w.pid == 0 {
		t.Fatal("the fake server wrote no pid")
	}
	return w
}

func (w *wired) send(s string) { io.WriteString(w.in, s+"\n") }

// next is the proxy's next message to the client (a failure bound, not a
// speed target).
func (w *wired) next() map[string]any {
	w.t.Helper()
	select {
	case line, ok := <-w.lines:
		if !ok {
			w.t.Fatal("the proxy closed its output")
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			w.t.Fatalf("the proxy wrote a malformed line %q", line)
		}
		return m
	case <-time.After(20 * time.Second):
		w.t.Fatal("no answer from the proxy")
	}
	return nil
}

func (w *wired) errText() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stderr.String()
}

// errSays reports whether the proxy's stderr holds s, waiting a moment for
// it: what the proxy wrote before an answer may reach the copy of its
// stderr after the answer reached the test.
func (w *wired) errSays(s string) bool {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if strings.Contains(w.errText(), s) || time.Now().After(deadline) {
			return strings.Contains(w.errText(), s)
		}
	}
}

// end waits for the proxy to exit (a failure bound, not a speed target)
// and returns its exit code, once it wrote nothing more.
func (w *wired) end(what string) int {
	w.t.Helper()
	select {
	case err := <-w.exited:
		for line := range w.lines {
			w.t.Fatalf("the proxy wrote %s at its end", line)
		}
		return exitCode(err)
	case <-time.After(20 * time.Second):
		w.t.Fatalf("the proxy is still running %s", what)
	}
	return -1
}

// serverGone tells whether the fake server's process has ended (the proxy
// reaps it: no zombie stays).
func (w *wired) serverGone() bool {
	return syscall.Kill(w.pid, 0) != nil
}

func pendingApprovals(t *testing.T, store effectlog.Log) int {
	list, _, _ := store.PendingApprovals(t.Context(), "wire-1", 0)
	return len(list)
}

// Item 4: SIGTERM and SIGINT stop a proxy whose client keeps its input open:
// exit 130, the server stopped.
func TestProxySignalStopsAnIdleProxy(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			h := newHarness(t)
			w := wire(t, h, "tools:\n  echo: {tier: compensable}\n")
			w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
			if m := w.next(); m["id"] != 2.0 || m["result"] == nil {
				t.Fatalf("echo: %v", m)
			}
			w.cmd.Process.Signal(sig)
			if code := w.end("after " + sig.String()); code != 130 {
				t.Fatalf("exit code %d, want 130; stderr:\n%s", code, w.errText())
			}
			if !w.serverGone() {
				t.Fatal("the server outlived the proxy")
			}
			if !strings.Contains(w.errText(), "undolog: stopped by a signal (") {
				t.Fatalf("stderr:\n%s", w.errText())
			}
		})
	}
}

// Item 4: a signal while a call runs and another waits for approval: the
// waiting one is answered at once (its request stands), the running one is
// answered and recorded when the server answers it within the grace, then
// the proxy exits 130.
func TestProxySignalAnswersAndRecordsTheCallsInFlight(t *testing.T) {
	h := newHarness(t)
	goFile := filepath.Join(h.dir, "go")
	h.env = append(h.env, "UNDOLOG_FAKE_GO="+goFile)
	store := logaddr.File(h.logPath, logaddr.Options{})
	w := wire(t, h, "tools:\n  hold: {tier: compensable}\n  echo: {tier: irreversible}\n", "--approval-wait", "40s")
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hold","arguments":{}}}`)
	waitFor(t, "the call to run", func() bool {
		d, err := store.GetEffect(t.Context(), 1)
		return err == nil && d.Effect.State == sm.Executing
	})
	w.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	waitFor(t, "the approval request", func() bool { return pendingApprovals(t, store) == 1 })
	w.cmd.Process.Signal(syscall.SIGTERM)
	m := w.next()
	if m["id"] != 3.0 || !strings.Contains(toolText(m), "effect 2 (echo) was not run: the proxy was stopped by a signal while it waited for approval; its request stands") {
		t.Fatalf("the call waiting for approval: %v", m)
	}
	waitFor(t, "the proxy to say it stops", func() bool {
		return strings.Contains(w.errText(), "stopped by a signal (terminated signal received): no new calls")
	})
	w.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"n":2}}}`)
	os.WriteFile(goFile, nil, 0o644)
	answers := map[float64]map[string]any{}
	for range 2 {
		m := w.next()
		answers[m["id"].(float64)] = m
	}
	if m := answers[2]; !strings.Contains(string(mustJSON(m["result"])), "held, then done") {
		t.Fatalf("the running call: %v", m)
	}
	if m := answers[4]; !strings.Contains(string(mustJSON(m["error"])), "the proxy is stopping; the call was not made") {
		t.Fatalf("a call after the signal: %v", m)
	}
	if code := w.end("after SIGTERM"); code != 130 {
		t.Fatalf("exit code %d, want 130", code)
	}
	if !w.serverGone() {
		t.Fatal("the server outlived the proxy")
	}
	if d, _ := store.GetEffect(t.Context(), 1); d.Effect.State != sm.Committed {
		t.Fatalf("the running call was not recorded: %+v", d.Effect)
	}
	if d, _ := store.GetEffect(t.Context(), 2); d.Effect.State != sm.Pending || d.Approval.Outcome != model.ApprovalPending {
		t.Fatalf("the waiting call's request: %+v %+v", d.Effect, d.Approval)
	}
	if effects, _, _ := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: "wire-1"}); len(effects) != 2 {
		t.Fatalf("a call sent after the signal was logged: %d effects", len(effects))
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// Item 4, in the process: a call the server does not answer within the
// grace after the signal is answered with an error once the server is
// stopped, and stays executing (in doubt), its lease no longer renewed.
func TestProxySignalLeavesAnUnansweredCallInDoubt(t *testing.T) {
	h := newHarness(t)
	t.Setenv("UNDOLOG_FAKE_SERVER", "1")
	store := logaddr.File(h.logPath, logaddr.Options{})
	policy, err := policy.ParsePolicy([]byte("tools:\n  hang: {tier: compensable}\n"))
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	p := &proxy.Proxy{Log: store, Session: "wire-1", Policy: policy, StopGrace: 50 * time.Millisecond}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx, []string{os.Args[0]}, inR, outW); outW.Close() }()
	defer inW.Close()
	out := bufio.NewScanner(outR)
	io.WriteString(inW, rawInitialize+"\n")
	next(t, out)
	io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang","arguments":{}}}`+"\n")
	waitFor(t, "the call to run", func() bool {
		d, err := store.GetEffect(t.Context(), 1)
		return err == nil && d.Effect.State == sm.Executing
	})
	stop()
	m := next(t, out)
	if msg, _ := m["error"].(map[string]any)["message"].(string); m["id"] != 2.0 || !strings.Contains(msg, "effect 1 stays executing (in doubt)") {
		t.Fatalf("the unanswered call: %v", m)
	}
	if err := <-ran; !errors.Is(err, proxy.ErrInterrupted) {
		t.Fatalf("Run: %v", err)
	}
	if d, _ := store.GetEffect(t.Context(), 1); d.Effect.State != sm.Executing {
		t.Fatalf("effect 1: %+v", d.Effect)
	}
}

// Item 5: a server that dies while the proxy is idle, or while a call waits
// for approval, ends the proxy (exit 11) though the client keeps its input
// open; the waiting call is answered, and its request stands.
func TestProxyExitsWithItsServer(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	w := wire(t, h, "tools:\n  echo: {tier: irreversible}\n", "--approval-wait", "40s")
	syscall.Kill(w.pid, syscall.SIGKILL)
	if code := w.end("after its server died"); code != 11 {
		t.Fatalf("exit code %d, want 11", code)
	}
	if !strings.Contains(w.errText(), "undolog: the upstream MCP server exited") {
		t.Fatalf("stderr:\n%s", w.errText())
	}

	w = wire(t, h, "tools:\n  echo: {tier: irreversible}\n", "--approval-wait", "40s")
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	waitFor(t, "the approval request", func() bool { return pendingApprovals(t, store) == 1 })
	syscall.Kill(w.pid, syscall.SIGKILL)
	m := w.next()
	if m["id"] != 2.0 || !strings.Contains(toolText(m), "effect 1 (echo) was not run: the upstream MCP server exited while it waited for approval; its request stands") {
		t.Fatalf("the waiting call: %v", m)
	}
	if code := w.end("after its server died"); code != 11 {
		t.Fatalf("exit code %d, want 11", code)
	}
	if d, _ := store.GetEffect(t.Context(), 1); d.Effect.State != sm.Pending || d.Approval.Outcome != model.ApprovalPending {
		t.Fatalf("%+v %+v", d.Effect, d.Approval)
	}
}

// Item 9: a client that closes its input while its call waits for approval:
// the proxy stops waiting (long before --approval-wait), answers it, leaves
// the request standing, stops the server and exits 0.
func TestProxyClientLeavesWhileItsCallWaits(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	w := wire(t, h, "tools:\n  echo: {tier: irreversible}\n", "--approval-wait", "10m")
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	waitFor(t, "the approval request", func() bool { return pendingApprovals(t, store) == 1 })
	w.in.Close()
	m := w.next()
	if m["id"] != 2.0 || !strings.Contains(toolText(m), "effect 1 (echo) was not run: the client closed its input while it waited for approval; its request stands") {
		t.Fatalf("the waiting call: %v", m)
	}
	if code := w.end("after its client left"); code != 0 {
		t.Fatalf("exit code %d, want 0; stderr:\n%s", code, w.errText())
	}
	if !w.serverGone() {
		t.Fatal("the server outlived the proxy")
	}
	if d, _ := store.GetEffect(t.Context(), 1); d.Effect.State != sm.Pending || d.Approval.Outcome != model.ApprovalPending {
		t.Fatalf("%+v %+v", d.Effect, d.Approval)
	}
}

// Item 9, a client that dies (its end of both pipes closed): the proxy is
// not killed by SIGPIPE when it answers; it ends as above.
func TestProxyClientDiesWhileItsCallWaits(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	w := wire(t, h, "tools:\n  echo: {tier: irreversible}\n", "--approval-wait", "10m")
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	waitFor(t, "the approval request", func() bool { return pendingApprovals(t, store) == 1 })
	w.stdout.Close() // the client's end of the proxy's output: its answer gets EPIPE
	w.in.Close()
	select {
	case err := <-w.exited:
		if code := exitCode(err); code != 0 {
			t.Fatalf("exit %v (%d), want 0; stderr:\n%s", err, code, w.errText())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the proxy is still running after its client died")
	}
	if !w.serverGone() {
		t.Fatal("the server outlived the proxy")
	}
}

// Item 8: a task-augmented call that is logged runs as a plain call: the
// server never sees the task, the client gets the outcome, which is what is
// committed; a safe call keeps its task. A server that answers a logged call
// with a task handle all the same gets nothing committed: a repeat through
// a new proxy finds the call in doubt, never the handle replayed.
func TestProxyTaskAugmentedCalls(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	const policy = "tools:\n  task: {tier: compensable}\n  taskonly: {tier: compensable}\n  echo: {tier: safe}\n"
	w := wire(t, h, policy)
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"task","arguments":{"a":1},"task":{"ttl":60000}}}`)
	m := w.next()
	if m["id"] != 2.0 || !strings.Contains(string(mustJSON(m["result"])), "ran as a plain call") {
		t.Fatalf("the logged task call: %v", m)
	}
	d, _ := store.GetEffect(t.Context(), 1)
	if d.Effect.State != sm.Committed || !strings.Contains(string(d.Effect.Result), "ran as a plain call") || string(d.Effect.Args) != `{"a":1}` {
		t.Fatalf("effect 1: %+v", d.Effect)
	}
	// Safe: passed through as sent, task and all.
	w.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"task","arguments":{},"task":{"ttl":60000}}}`)
	w.send(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	w.next() // the logged call again: whatever the log says
	w.next()

	w.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"taskonly","arguments":{}}}`)
	m = w.next()
	if m["id"] != 5.0 || !strings.Contains(string(mustJSON(m["result"])), `"taskId":"t-1"`) {
		t.Fatalf("the handle: %v", m)
	}
	effects, _, _ := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: "wire-1", Tool: "taskonly"})
	if len(effects) != 1 || effects[0].State != sm.Executing {
		t.Fatalf("the call answered with a handle: %+v", effects)
	}
	if !w.errSays("the server answered with a task handle, not the outcome: it stays executing (in doubt)") {
		t.Fatalf("stderr:\n%s", w.errText())
	}
	w.in.Close()
	w.end("after its client left")

	w = wire(t, h, policy)
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"taskonly","arguments":{}}}`)
	if m := w.next(); !strings.Contains(toolText(m), "is in doubt") {
		t.Fatalf("the repeat of the call answered with a handle: %v", m)
	}
}

func TestProxySafeTaskCallKeepsItsTask(t *testing.T) {
	h := newHarness(t)
	w := wire(t, h, "tools:\n  task: {tier: safe}\n")
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"task","arguments":{},"task":{"ttl":60000}}}`)
	if m := w.next(); !strings.Contains(string(mustJSON(m["result"])), `"taskId":"t-1"`) {
		t.Fatalf("the safe task call: %v", m)
	}
}

// Item 6: a call to a tool the server does not have gets the server's own
// answer, at once, and nothing is logged, whatever the policy says of
// unknown tools (here: the real memory server, a policy with a catch-all
// irreversible rule, and a long approval wait).
func TestProxyUnknownToolGoesToTheServer(t *testing.T) {
	h := newHarness(t)
	policy := filepath.Join(h.dir, "all.yaml")
	os.WriteFile(policy, []byte("tools:\n  read_graph: {tier: safe}\n  \"*\": {tier: irreversible}\n"), 0o644)
	h.policy = policy
	direct := h.direct()
	want, wantErr := direct.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{"x": 1}})
	direct.Close()
	agent := h.proxied("unknown", "--approval-wait", "10m")
	bound, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a failure bound: held for approval, it would wait 10m
	defer cancel()
	got, gotErr := agent.CallTool(bound, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{"x": 1}})
	if !reflect.DeepEqual(want, got) || errString(wantErr) != errString(gotErr) {
		t.Fatalf("direct %+v %v\nproxied %+v %v", want, wantErr, got, gotErr)
	}
	if wantErr == nil && (want == nil || !want.IsError) {
		t.Fatalf("the server took the unknown tool: %+v", want)
	}
	store := logaddr.File(h.logPath, logaddr.Options{})
	if effects, _, _ := store.ListEffects(t.Context(), effectlog.EffectFilter{}); len(effects) != 0 {
		t.Fatalf("logged %+v", effects)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Item 7: a string cut inside an emoji (a lone surrogate) in an argument:
// the real memory server takes it, and so does the proxy, which logs the
// call with the escape kept (verify passes); the same call spelt another way
// (an upper-case escape) has the same signature.
func TestProxyLoneSurrogateInAnArgument(t *testing.T) {
	h := newHarness(t)
	cmd := exec.Command(testbin.Undolog(t), "proxy", "--session", "cut", "--policy", h.policy, "--", memoryServer(t))
	cmd.Env = h.env
	in, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	out := bufio.NewScanner(stdout)
	out.Buffer(nil, 1<<20)
	send := func(s string) { io.WriteString(in, s+"\n") }
	send(rawInitialize)
	next(t, out)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"name":"cut \ud83d","entityType":"t","observations":[]}]}}}`)
	m := next(t, out)
	if m["id"] != 2.0 || m["result"] == nil || toolText(m) != "" {
		t.Fatalf("the call: %v", m)
	}
	store := logaddr.File(h.logPath, logaddr.Options{})
	d, err := store.GetEffect(t.Context(), 1)
	if err != nil || d.Effect.State != sm.Committed || !strings.Contains(string(d.Effect.Args), `"cut \ud83d"`) || !strings.Contains(string(d.Effect.Result), `cut \ud83d`) {
		t.Fatalf("effect 1: %+v %v", d.Effect, err)
	}
	sig := d.Effect.CallSignature
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_entities","arguments":{"entities":[{"entityType":"t","observations":[],"name":"cut \uD83D"}]}}}`)
	next(t, out)
	effects, _, _ := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: "cut", Ascending: true})
	for _, e := range effects {
		if e.CallSignature != sig && e.ReplayOf == nil {
			t.Fatalf("the same call spelt another way is another call: %+v", e)
		}
	}
	if rep, err := store.Verify(t.Context()); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("verify: %v %v", rep.Problems, err)
	}
}

// A client whose name holds a NUL or control bytes (the proxy records it as
// the actor) gets its calls logged, the name escaped, on either engine.
func TestProxyClientNameWithANUL(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"evil\u0000\u001b[2Jname","version":"1"}}}`
	w := wireAs(t, h, initialize, "tools:\n  echo: {tier: compensable}\n")
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if m := w.next(); m["id"] != 2.0 || m["result"] == nil || toolText(m) != "" {
		t.Fatalf("the call: %v", m)
	}
	d, err := store.GetEffect(t.Context(), 1)
	if err != nil || d.Effect.State != sm.Committed || d.History[0].Actor != `mcp:evil\x00\x1b[2Jname` {
		t.Fatalf("effect 1: %+v %v", d, err)
	}
}

// A call the client cancels while the server runs it, and the server never
// answers (servers on the MCP SDKs send nothing for a cancelled request):
// the proxy gives up on it after the grace, leaving it executing (in
// doubt, the resolve command named), and exits once the client closes its
// input. A call the server never answers does not keep a signal from
// stopping the proxy once the client has closed its input either.
func TestProxyCancelledCallTheServerNeverAnswers(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		h := newHarness(t)
		store := logaddr.File(h.logPath, logaddr.Options{})
		w := wire(t, h, "tools:\n  hang: {tier: compensable}\n")
		w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang","arguments":{}}}`)
		waitForState(t, store, 1, sm.Executing)
		w.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
		waitFor(t, "the proxy to give up on the cancelled call", func() bool {
			return strings.Contains(w.errText(), "after the client cancelled it; it stays executing (in doubt): check, then run `undolog")
		})
		w.in.Close()
		if code := w.end("after its client left"); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, w.errText())
		}
		if e, err := store.GetEffect(t.Context(), 1); err != nil || e.Effect.State != sm.Executing {
			t.Fatalf("effect %+v %v", e.Effect, err)
		}
	})
	t.Run("answered late", func(t *testing.T) {
		// The id stays the cancelled call's until the server answers: a
		// request reusing it meanwhile is refused, and the late answer is
		// recorded (not passed on, nor taken for the other request's).
		h := newHarness(t)
		goFile := filepath.Join(h.dir, "go")
		h.env = append(h.env, "UNDOLOG_FAKE_GO="+goFile)
		store := logaddr.File(h.logPath, logaddr.Options{})
		w := wire(t, h, "tools:\n  hold: {tier: compensable}\n  echo: {tier: compensable}\n")
		w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hold","arguments":{}}}`)
		waitForState(t, store, 1, sm.Executing)
		w.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
		waitFor(t, "the proxy to give up on the cancelled call", func() bool {
			return strings.Contains(w.errText(), "after the client cancelled it")
		})
		w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
		if m := w.next(); m["id"] != 2.0 || !strings.Contains(fmt.Sprint(m["error"]), "still in flight") {
			t.Fatalf("a request reusing the cancelled call's id: %v", m)
		}
		os.WriteFile(goFile, nil, 0o644)
		waitForState(t, store, 1, sm.Committed)
		w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
		if m := w.next(); m["id"] != 2.0 || !strings.Contains(fmt.Sprint(m["result"]), "ok") {
			t.Fatalf("the id once the late answer came: %v", m)
		}
		if e, err := store.GetEffect(t.Context(), 2); err != nil || e.Effect.Tool != "echo" || e.Effect.State != sm.Committed {
			t.Fatalf("effect 2: %+v %v", e.Effect, err)
		}
	})
	t.Run("signal after the client left", func(t *testing.T) {
		h := newHarness(t)
		store := logaddr.File(h.logPath, logaddr.Options{})
		w := wire(t, h, "tools:\n  hang: {tier: compensable}\n")
		w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang","arguments":{}}}`)
		waitForState(t, store, 1, sm.Executing)
		w.in.Close()
		w.cmd.Process.Signal(syscall.SIGTERM)
		if m := w.next(); m["id"] != 2.0 || !strings.Contains(fmt.Sprint(m["error"]), "stays executing (in doubt)") {
			t.Fatalf("the call's answer once the server is stopped: %v", m)
		}
		if code := w.end("after SIGTERM"); code != 130 {
			t.Fatalf("exit %d, want 130; stderr:\n%s", code, w.errText())
		}
		if !w.serverGone() {
			t.Fatal("the server outlived the proxy")
		}
	})
}

// A server that writes ids back its own way ("\u0061" as "a", 1.0 as 1, as
// servers in JavaScript do): answers still find their calls, which commit,
// and a request whose id equals one in flight, however spelled, is refused.
func TestProxyMatchesIDsByValue(t *testing.T) {
	h := newHarness(t)
	goFile := filepath.Join(h.dir, "go")
	h.env = append(h.env, "UNDOLOG_FAKE_RESPELL=1", "UNDOLOG_FAKE_GO="+goFile)
	store := logaddr.File(h.logPath, logaddr.Options{})
	w := wire(t, h, "tools:\n  echo: {tier: compensable}\n  hold: {tier: compensable}\n")
	w.send(`{"jsonrpc":"2.0","id":"\u0062","method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`)
	if m := w.next(); m["id"] != "b" || m["result"] == nil {
		t.Fatalf("answer to id \"\\u0062\": %v", m)
	}
	w.send(`{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"echo","arguments":{"n":2}}}`)
	if m := w.next(); m["id"] != 1.0 || m["result"] == nil {
		t.Fatalf("answer to id 1.0: %v", m)
	}
	// Past 2^53 a server reads another number (...993 as ...992), and the
	// MCP SDK for JavaScript answers none such: refused, not logged.
	w.send(`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"echo","arguments":{"n":2.5}}}`)
	if m := w.next(); m["id"] != nil || !strings.Contains(fmt.Sprint(m["error"]), "is not a string or a number a server reads exactly") {
		t.Fatalf("answer to id 9007199254740993: %v", m)
	}
	for id := uint64(1); id <= 2; id++ {
		if e, err := store.GetEffect(t.Context(), id); err != nil || e.Effect.State != sm.Committed {
			t.Fatalf("effect %d: %+v %v", id, e.Effect, err)
		}
	}
	w.send(`{"jsonrpc":"2.0","id":"\u0061","method":"tools/call","params":{"name":"hold","arguments":{}}}`)
	waitForState(t, store, 3, sm.Executing)
	w.send(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"n":3}}}`)
	if m := w.next(); m["id"] != "a" || !strings.Contains(fmt.Sprint(m["error"]), "still in flight") {
		t.Fatalf("a request whose id is in flight, spelled otherwise: %v", m)
	}
	os.WriteFile(goFile, nil, 0o644)
	if m := w.next(); m["id"] != "a" || !strings.Contains(fmt.Sprint(m["result"]), "held, then done") {
		t.Fatalf("the held call's answer: %v", m)
	}
	waitForState(t, store, 3, sm.Committed)
	if _, err := store.GetEffect(t.Context(), 4); err == nil {
		t.Fatal("a refused request was logged")
	}
}

// Ids MCP does not allow (null, a boolean, an array, an object, a number past
// a double's range, which a JavaScript server writes back as null) are
// refused before anything is logged: one could come back as another's.
func TestProxyRefusesIDsMCPDoesNotAllow(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	w := wire(t, h, "tools:\n  echo: {tier: compensable}\n")
	for _, id := range []string{`null`, `true`, `[1]`, `{"a":1}`, `1e400`} {
		w.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
		if m := w.next(); m["id"] != nil || !strings.Contains(fmt.Sprint(m["error"]), "is not a string or a number") {
			t.Fatalf("id %s: %v", id, m)
		}
	}
	w.send(`{"jsonrpc":"2.0","id":"ok","method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if m := w.next(); m["id"] != "ok" || m["result"] == nil {
		t.Fatalf("a call after them: %v", m)
	}
	if _, err := store.GetEffect(t.Context(), 2); err == nil {
		t.Fatal("a call with a refused id was logged")
	}
}

// waitForState waits until effect id is in state (a guard of 30 s against
// hanging, as waitFor has).
func waitForState(t *testing.T, store effectlog.Log, id uint64, state sm.State) {
	t.Helper()
	waitFor(t, fmt.Sprintf("effect %d to be %s", id, state), func() bool {
		e, err := store.GetEffect(t.Context(), id)
		return err == nil && e.Effect.State == state
	})
}

// A proxy stopped with Ctrl-Z (SIGTSTP) right after a call, while it keeps
// the log for the next one, lets the log go first: another process gets in
// while it is stopped, and once continued the proxy serves calls again.
func TestProxyStoppedKeepsNobodyOut(t *testing.T) {
	h := newHarness(t)
	w := wire(t, h, "tools:\n  echo: {tier: compensable}\n")
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if m := w.next(); m["id"] != 2.0 || m["result"] == nil {
		t.Fatalf("echo: %v", m)
	}
	w.cmd.Process.Signal(syscall.SIGTSTP) // within the 100 ms it keeps the log
	defer w.cmd.Process.Signal(syscall.SIGCONT)
	waitFor(t, "the proxy to stop", func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w.cmd.Process.Pid))
		return err == nil && strings.Contains(string(stat), ") T ")
	})
	start := exec.Command(testbin.Undolog(t), "--lock-timeout", "2s", "session", "start", "other")
	start.Env = h.env
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("session start while the proxy is stopped: %v\n%s", err, out)
	}
	w.cmd.Process.Signal(syscall.SIGCONT)
	w.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"n":2}}}`)
	if m := w.next(); m["id"] != 3.0 || m["result"] == nil {
		t.Fatalf("echo once continued: %v", m)
	}
}

// A proxy killed outright (SIGKILL: it can do nothing) takes its server with
// it, also one that would finish its calls first: a call the log then holds
// in doubt does not go on being made.
func TestProxyKilledTakesItsServer(t *testing.T) {
	h := newHarness(t)
	h.env = append(h.env, "UNDOLOG_FAKE_GO="+filepath.Join(h.dir, "go"), "UNDOLOG_FAKE_LINGER=1")
	w := wire(t, h, "tools:\n  hold: {tier: compensable}\n")
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hold","arguments":{}}}`)
	store := logaddr.File(h.logPath, logaddr.Options{})
	waitFor(t, "the call to run", func() bool {
		d, err := store.GetEffect(t.Context(), 1)
		return err == nil && d.Effect.State == sm.Executing
	})
	w.cmd.Process.Kill()
	waitFor(t, "the server to end with its proxy", w.serverGone)
}

// An undo killed outright mid MCP compensation takes the server it started
// with it, also one that would finish the call first: the compensation the
// log then holds in doubt is not made behind a --retry-in-doubt.
func TestUndoKilledTakesItsServer(t *testing.T) {
	h := newHarness(t)
	h.env = append(h.env, "UNDOLOG_FAKE_GO="+filepath.Join(h.dir, "go"), "UNDOLOG_FAKE_LINGER=1")
	w := wire(t, h, "tools:\n  echo:\n    tier: compensable\n    compensate: {tool: hold, args: {}}\n")
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if m := w.next(); m["id"] != 2.0 || m["result"] == nil {
		t.Fatalf("echo: %v", m)
	}
	w.in.Close()
	w.end("after its client left")
	pidFile := filepath.Join(h.dir, "server.pid")
	os.Remove(pidFile)
	undo := exec.Command(testbin.Undolog(t), "undo", "wire-1", "--yes")
	undo.Env = append(h.env, "UNDOLOG_FAKE_SERVER=1", "UNDOLOG_FAKE_PIDFILE="+pidFile)
	if err := undo.Start(); err != nil {
		t.Fatal(err)
	}
	defer undo.Process.Kill()
	store := logaddr.File(h.logPath, logaddr.Options{})
	waitFor(t, "the compensation to be sent", func() bool {
		d, err := store.GetEffect(t.Context(), 1)
		return err == nil && d.Undo != nil && d.Undo.State == sm.EntryCompensating
	})
	pid := 0
	waitFor(t, "undo's server to start", func() bool { // it may start after the entry moved
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(string(b))
		return pid != 0
	})
	undo.Process.Kill()
	undo.Wait()
	waitFor(t, "undo's server to end with it", func() bool { return syscall.Kill(pid, 0) != nil })
}
