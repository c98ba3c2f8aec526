package proxy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/logaddr"
)

// Two calls in flight with one id (a hostile or broken client): the second
// is refused, -32600, and nothing of it reaches the server or the log; the
// first keeps its own answer and is logged with it.
func TestProxyRefusesADuplicateIDInFlight(t *testing.T) {
	h := newHarness(t)
	gate := filepath.Join(h.dir, "go")
	t.Setenv("UNDOLOG_FAKE_GO", gate)
	store := logaddr.File(h.logPath, logaddr.Options{})
	ip := startInprocWith(t, store, "dup", "tools:\n  hold: {tier: compensable}\n  echo: {tier: compensable}\n")
	fmt.Fprintf(ip.in, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hold","arguments":{"n":1}}}`+"\n")
	fmt.Fprintf(ip.in, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"n":2}}}`+"\n")
	m := next(t, ip.out)
	if e, _ := m["error"].(map[string]any); m["id"] != 5.0 || e == nil || e["code"] != -32600.0 || !strings.Contains(fmt.Sprint(e["message"]), "still in flight") {
		t.Fatalf("the second call with id 5: %v", m)
	}
	os.WriteFile(gate, nil, 0o644)
	m = next(t, ip.out)
	if m["id"] != 5.0 || !strings.Contains(fmt.Sprint(m["result"]), "held, then done") {
		t.Fatalf("the first call with id 5: %v", m)
	}
	// Its id is free again once answered.
	fmt.Fprintf(ip.in, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"n":3}}}`+"\n")
	if m = next(t, ip.out); m["id"] != 5.0 || m["result"] == nil {
		t.Fatalf("id 5 again: %v", m)
	}
	ip.close()
	if got := states(t, store, "dup"); got != "1:hold:committed 2:echo:committed" {
		t.Fatalf("logged %s", got)
	}
	d, err := store.GetEffect(t.Context(), 1)
	if err != nil || !strings.Contains(string(d.Effect.Result), "held, then done") {
		t.Fatalf("effect 1 result %s, %v", d.Effect.Result, err)
	}
}

// The proxy's own requests to the server (a capture) take ids no client
// can guess: a client request with an id like theirs gets its own answer,
// and the capture its own.
func TestProxyOwnRequestIDsAreNotTheClients(t *testing.T) {
	h := newHarness(t)
	gate := filepath.Join(h.dir, "go")
	t.Setenv("UNDOLOG_FAKE_GO", gate)
	store := logaddr.File(h.logPath, logaddr.Options{})
	ip := startInprocWith(t, store, "ids", `tools:
  echo:
    tier: compensable
    capture: {tool: hold, args: {}}
    compensate: {tool: echo, args: {undo: true}}
  peek: {tier: safe}
`)
	fmt.Fprintf(ip.in, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`+"\n")
	// While the capture waits at the server, ids of the old form.
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(ip.in, `{"jsonrpc":"2.0","id":"undolog-%d","method":"tools/call","params":{"name":"peek","arguments":{"decoy":%d}}}`+"\n", i, i)
	}
	seen := map[string]string{}
	for range 3 {
		m := next(t, ip.out)
		seen[fmt.Sprint(m["id"])] = fmt.Sprint(m["result"])
	}
	os.WriteFile(gate, nil, 0o644)
	m := next(t, ip.out)
	seen[fmt.Sprint(m["id"])] = fmt.Sprint(m["result"])
	ip.close()
	for i := 1; i <= 3; i++ {
		if r := seen[fmt.Sprintf("undolog-%d", i)]; r == "" || strings.Contains(r, "held, then done") {
			t.Fatalf("the client's undolog-%d got %q (all answers %v)", i, r, seen)
		}
	}
	d, err := store.GetEffect(t.Context(), 1)
	if err != nil || d.Effect.Compensation == nil || !strings.Contains(string(d.Effect.Compensation.Capture), "held, then done") {
		t.Fatalf("effect 1's capture: %+v, %v", d.Effect.Compensation, err)
	}
}
