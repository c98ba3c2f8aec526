package proxy_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

const initializeLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// A proxy start that logs nothing writes nothing: its session is made on
// the first logged call, with the server command and via: proxy.
func TestProxyMakesItsSessionOnTheFirstLoggedCall(t *testing.T) {
	h := newHarness(t)
	in, out, cmd := rawProxy(t, h)
	io.WriteString(in, initializeLine+"\n")
	next(t, out)
	io.WriteString(in, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
	next(t, out)
	in.Close()
	cmd.Wait()
	store := logaddr.File(h.logPath, logaddr.Options{})
	if s, err := store.GetSession(t.Context(), "fake-1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("a proxy that logged nothing made session %+v (%v)", s, err)
	}
	in, out, _ = rawProxy(t, h)
	io.WriteString(in, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`+"\n")
	next(t, out)
	s, err := store.GetSession(t.Context(), "fake-1")
	if err != nil || s.Meta["via"] != "proxy" || len(s.Upstream) != 1 || s.Upstream[0] != os.Args[0] || s.Effects != 1 {
		t.Fatalf("session after a logged call: %+v %v", s, err)
	}

	// Unpinned: the name is chosen at the start and said on stderr.
	c := exec.Command(testbin.Undolog(t), "proxy", "--", os.Args[0])
	c.Env = append(h.env, "UNDOLOG_FAKE_SERVER=1")
	c.Stdin = strings.NewReader(initializeLine + "\n")
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), ", made on its first logged call\n") || strings.Contains(stderr.String(), "undo it with") {
		t.Fatalf("stderr: %s", stderr.String())
	}
	if list, _, _ := store.ListSessions(t.Context(), effectlog.SessionFilter{}); len(list) != 1 {
		t.Fatalf("sessions %+v", list)
	}
}

// A pinned session that has ended gets a successor, pin.2, then pin.3,
// each following the one before; a proxy started later finds the newest.
func TestProxyPinnedSessionGetsASuccessor(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	ctx := t.Context()
	var diag syncBuffer
	ip := startInproc(t, store, "pin", &diag, nil)
	ip.call("echo", `{"n":1}`)
	if _, err := store.SetSessionState(ctx, "pin", sm.SessionCompleted, model.Change{Actor: "ci"}); err != nil {
		t.Fatal(err)
	}
	if m := ip.call("echo", `{"n":2}`); toolText(m) != "" {
		t.Fatalf("a call after the session completed: %v", m)
	}
	if !strings.Contains(diag.String(), "session pin is completed: calls go on in session pin.2, which follows it (undo it with: undolog undo pin.2)") {
		t.Fatalf("diagnostics: %s", diag.String())
	}
	for _, to := range []sm.SessionState{sm.SessionCompensating, sm.SessionCompensated} {
		if _, err := store.SetSessionState(ctx, "pin.2", to, model.Change{Actor: "ops"}); err != nil {
			t.Fatal(err)
		}
	}
	ip.call("echo", `{"n":3}`)
	ip.close()
	ip = startInproc(t, store, "pin", io.Discard, nil)
	ip.call("echo", `{"n":4}`)
	ip.close()
	for id, want := range map[string]struct {
		follows string
		effects int
	}{"pin": {"", 1}, "pin.2": {"pin", 1}, "pin.3": {"pin.2", 2}} {
		s, err := store.GetSession(ctx, id)
		if err != nil || s.Meta["follows"] != want.follows || s.Effects != want.effects || s.Meta["via"] != "proxy" {
			t.Errorf("session %s: %+v %v, want follows %q and %d effects", id, s, err, want.follows, want.effects)
		}
	}
	if _, err := store.GetSession(ctx, "pin.4"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("pin.4: %v", err)
	}
}

// Two proxies pinned to one ended session agree on one successor; a
// session of the successor's name that follows another is passed over.
func TestProxiesAgreeOnOneSuccessor(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	ctx := t.Context()
	for _, id := range []string{"two", "two.2"} {
		if _, err := store.CreateSession(ctx, effectlog.NewSession{ID: id}); err != nil { // two.2 follows nothing
			t.Fatal(err)
		}
	}
	if _, err := store.SetSessionState(ctx, "two", sm.SessionFailed, model.Change{}); err != nil {
		t.Fatal(err)
	}
	a, b := startInproc(t, store, "two", io.Discard, nil), startInproc(t, store, "two", io.Discard, nil)
	var wg sync.WaitGroup
	for i, ip := range []*inproc{a, b} {
		wg.Go(func() {
			ip.send("echo", `{"proxy":`+string(rune('0'+i))+`}`)
			if m := next(t, ip.out); toolText(m) != "" {
				t.Errorf("proxy %d: %v", i, m)
			}
		})
	}
	wg.Wait()
	a.close()
	b.close()
	s, err := store.GetSession(ctx, "two.3")
	if err != nil || s.Meta["follows"] != "two" || s.Effects != 2 {
		t.Fatalf("two.3: %+v %v", s, err)
	}
	if _, err := store.GetSession(ctx, "two.4"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("two.4: %v", err)
	}
	if s, _ := store.GetSession(ctx, "two.2"); s.Effects != 0 {
		t.Fatalf("a session not of the chain took calls: %+v", s)
	}
}

// A rejection halts the session: the rejection says how it is resumed, and
// every logged call until then gets a tool error that says so; nothing is
// logged. Resumed by a person, calls go on in the same session, and the
// rejected call made again asks again.
func TestProxyHaltedSessionUntilAPersonResumesIt(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	ctx := t.Context()
	ip := startInproc(t, store, "halt", io.Discard, nil)
	ip.call("echo", `{"n":1}`)
	id := ip.send("send", `{"to":"x"}`)
	waitFor(t, "the approval request", func() bool { list, _, _ := store.PendingApprovals(ctx, "halt", 0); return len(list) == 1 })
	if _, err := store.Reject(ctx, 2, model.Change{Actor: "alice", Reason: "wrong recipient"}); err != nil {
		t.Fatal(err)
	}
	const resume = "`undolog session resume halt --as NAME --reason TEXT`"
	if m := next(t, ip.out); m["id"] != float64(id) || !strings.Contains(toolText(m), "rejected by alice (wrong recipient)") ||
		!strings.Contains(toolText(m), "session halt is halted until a person resumes it: "+resume) {
		t.Fatalf("the rejected call: %v", m)
	}
	for range 2 {
		m := ip.call("echo", `{"n":2}`)
		if !strings.Contains(toolText(m), "session halt is halted: a person rejected one of its calls (wrong recipient). No call is logged or made until a person resumes it: "+resume) {
			t.Fatalf("a call in the halted session: %v", m)
		}
	}
	if got := states(t, store, "halt"); got != "1:echo:committed 2:send:rejected" {
		t.Fatalf("logged %s", got)
	}
	if _, err := store.SetSessionState(ctx, "halt", sm.SessionActive, model.Change{Actor: "bob", Reason: "recipient fixed"}); err != nil {
		t.Fatal(err)
	}
	if m := ip.call("echo", `{"n":2}`); toolText(m) != "" {
		t.Fatalf("a call after the resume: %v", m)
	}
	// The rejected call made again is a new call that asks again; the
	// rejected effect stays rejected.
	id = ip.send("send", `{"to":"x"}`)
	waitFor(t, "the request asked again", func() bool { list, _, _ := store.PendingApprovals(ctx, "halt", 0); return len(list) == 1 })
	if _, err := store.Approve(ctx, 4, model.Change{Actor: "alice", Reason: "recipient checked"}); err != nil {
		t.Fatal(err)
	}
	if m := next(t, ip.out); m["id"] != float64(id) || toolText(m) != "" {
		t.Fatalf("the rejected call asked again and approved: %v", m)
	}
	ip.close()
	if got := states(t, store, "halt"); got != "1:echo:committed 2:send:rejected 3:echo:committed 4:send:committed" {
		t.Fatalf("logged %s", got)
	}
	if _, err := store.GetSession(ctx, "halt.2"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("a halted session got a successor: %v", err)
	}
}

// TestProxyKeepsTheLogThroughABurstOfCalls: calls that come some ms apart
// (an agent's burst) find the file log still open (no reopen, no journal
// replay), and another process still gets in at once meanwhile.
func TestProxyKeepsTheLogThroughABurstOfCalls(t *testing.T) {
	h := newHarness(t)
	s, opens := h.inprocProxy("burst")
	create := func(name string) {
		r, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "create_entities",
			Arguments: map[string]any{"entities": []map[string]any{{"name": name, "entityType": "t", "observations": []string{}}}}})
		if err != nil || r.IsError {
			t.Fatalf("%s: %v %v", name, err, r)
		}
	}
	create("first") // opens the log
	before := opens()
	for i := range 5 {
		time.Sleep(20 * time.Millisecond) // the gap between two calls of a burst
		create(fmt.Sprintf("e%d", i))
	}
	if n := opens() - before; n != 0 {
		t.Fatalf("5 calls 20 ms apart reopened the log %d times", n)
	}
	if list := h.cli("list", "--session", "burst"); strings.Count(list, "committed") != 6 {
		t.Fatalf("list from another process meanwhile:\n%s", list)
	}
}
