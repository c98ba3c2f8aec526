package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/policy"
	"github.com/undolog/undolog/proxy"
)

// inproc is a proxy run in this process in front of the fake server, with
// the client's side on pipes: one call at a time.
type inproc struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Scanner
	done chan error
	id   int
}

// syncBuffer is the proxy's diagnostics, read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

const fakePolicy = "tools:\n  echo: {tier: compensable}\n  same: {tier: compensable, replay: always}\n  send: {tier: irreversible}\n"

// startInproc runs a proxy pinned to session whose client writes go to
// out (nil: a pipe the test reads).
func startInproc(t *testing.T, store effectlog.Log, session string, diag io.Writer, out io.Writer) *inproc {
	t.Helper()
	return startInprocPolicy(t, store, session, diag, out, fakePolicy)
}

// startInprocWith is startInproc with a policy of the test's own.
func startInprocWith(t *testing.T, store effectlog.Log, session, policy string) *inproc {
	t.Helper()
	return startInprocPolicy(t, store, session, io.Discard, nil, policy)
}

func startInprocPolicy(t *testing.T, store effectlog.Log, session string, diag io.Writer, out io.Writer, policyText string) *inproc {
	t.Helper()
	t.Setenv("UNDOLOG_FAKE_SERVER", "1")
	policy, err := policy.ParsePolicy([]byte(policyText))
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	ip := &inproc{t: t, in: inW, done: make(chan error, 1)}
	var outW *io.PipeWriter
	if out == nil {
		var outR *io.PipeReader
		outR, outW = io.Pipe()
		out, ip.out = outW, bufio.NewScanner(outR)
	}
	p := &proxy.Proxy{Log: store, Session: session, Policy: policy, Diagnostics: diag, SessionActor: "tester"}
	go func() {
		err := p.Run(context.Background(), []string{os.Args[0]}, inR, out)
		if outW != nil {
			outW.Close()
		}
		ip.done <- err
	}()
	t.Cleanup(func() { ip.close() })
	return ip
}

// send writes a tools/call and returns its id.
func (ip *inproc) send(tool, args string) int {
	ip.id++
	fmt.Fprintf(ip.in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`+"\n", ip.id, tool, args)
	return ip.id
}

// call sends a tools/call and reads its answer.
func (ip *inproc) call(tool, args string) map[string]any {
	ip.t.Helper()
	id := ip.send(tool, args)
	m := next(ip.t, ip.out)
	if m["id"] != float64(id) {
		ip.t.Fatalf("answer %v for call %d", m, id)
	}
	return m
}

// close ends the client's input and waits for the proxy to finish its calls.
func (ip *inproc) close() {
	ip.in.Close()
	if ip.done != nil {
		if err := <-ip.done; err != nil {
			ip.t.Error(err)
		}
		ip.done = nil
	}
}

// failingWriter is a client whose connection is lost: nothing it is sent
// reaches it.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func states(t *testing.T, store effectlog.Log, session string) string {
	t.Helper()
	list, _, err := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: session, Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list {
		s := fmt.Sprintf("%d:%s:%s", e.ID, e.Tool, e.State)
		if e.ReplayOf != nil {
			s += fmt.Sprintf("<%d", *e.ReplayOf)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func answered(t *testing.T, store effectlog.Log, id uint64) bool {
	t.Helper()
	d, err := store.GetEffect(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range d.History {
		if r.Kind == model.KindAnswer {
			return true
		}
	}
	return false
}

// Write A, write B, write A: the third runs (the client got the first
// answer), unless the tool's rule says replay: always.
func TestProxyRepeatAfterTheAnswerRunsAgain(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	ip := startInproc(t, store, "rr", io.Discard, nil)
	for _, tool := range []string{"echo", "same"} {
		for _, c := range []string{"A", "B", "A"} {
			if m := ip.call(tool, `{"content":"`+c+`"}`); m["result"] == nil || toolText(m) != "" {
				t.Fatalf("%s %s: %v", tool, c, m)
			}
		}
	}
	ip.close()
	want := "1:echo:committed 2:echo:committed 3:echo:committed 4:same:committed 5:same:committed 6:same:replayed<4"
	if got := states(t, store, "rr"); got != want {
		t.Fatalf("logged %s\nwant   %s", got, want)
	}
	for id := uint64(1); id <= 3; id++ {
		if !answered(t, store, id) {
			t.Errorf("effect %d's answer was not recorded", id)
		}
	}
	if answered(t, store, 4) { // replay: always has no use for it
		t.Error("an answer was recorded for a tool that replays always")
	}
	d, _ := store.GetEffect(t.Context(), 3)
	if !strings.Contains(d.History[0].Reason, "the answer of effect 1 reached the client") {
		t.Fatalf("the call made again: %+v", d.History[0])
	}
	if rep, _ := store.Verify(t.Context()); len(rep.Problems) != 0 {
		t.Fatal(rep.Problems)
	}
}

// A repeat whose answer never reached the client (the connection was lost,
// then the proxy restarted) is a retry: answered from the log, not run
// again. Once that answer is written, the next repeat runs.
func TestProxyRetryAfterALostAnswerIsReplayed(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	lost := startInproc(t, store, "lost", io.Discard, failingWriter{})
	lost.send("echo", `{"content":"A"}`)
	lost.close()
	if got := states(t, store, "lost"); got != "1:echo:committed" || answered(t, store, 1) {
		t.Fatalf("after the lost answer: %s, answered %v", got, answered(t, store, 1))
	}
	ip := startInproc(t, store, "lost", io.Discard, nil)
	if m := ip.call("echo", `{"content":"A"}`); m["result"] == nil || toolText(m) != "" {
		t.Fatalf("the retry: %v", m)
	}
	ip.close()
	if got := states(t, store, "lost"); got != "1:echo:committed 2:echo:replayed<1" || !answered(t, store, 1) {
		t.Fatalf("after the retry: %s, answered %v", got, answered(t, store, 1))
	}
	ip = startInproc(t, store, "lost", io.Discard, nil)
	ip.call("echo", `{"content":"A"}`)
	ip.close()
	if got := states(t, store, "lost"); got != "1:echo:committed 2:echo:replayed<1 3:echo:committed" {
		t.Fatalf("after the answered retry: %s", got)
	}
}

// The memory server behind the proxy: an entity created, deleted behind the
// proxy's back, created again through it, exists (it was answered from the
// log, and missing, before).
func TestProxyMemoryCallMadeAgainRuns(t *testing.T) {
	h := newHarness(t)
	agent := h.proxied("again")
	alice := map[string]any{"entities": []entity{{Name: "alice", EntityType: "person", Observations: []string{}}}}
	call(t, agent, "create_entities", alice)
	direct := h.direct()
	call(t, direct, "delete_entities", map[string]any{"entityNames": []string{"alice"}})
	direct.Close()
	if r := call(t, agent, "create_entities", alice); r.IsError || !strings.Contains(text(r), "alice") {
		t.Fatalf("created again: %s", text(r))
	}
	if g := graph(t, agent); !strings.Contains(g, `"alice"`) {
		t.Fatalf("alice is missing: %s", g)
	}
	store := logaddr.File(h.logPath, logaddr.Options{})
	if got := states(t, store, "again"); got != "1:create_entities:committed 2:create_entities:committed" {
		t.Fatalf("logged %s", got)
	}
}

// A client may repeat a call as soon as it reads the answer: the repeat
// waits for the answer's record, so it runs again rather than being taken
// for a retry.
func TestProxyImmediateRepeatsRunAgain(t *testing.T) {
	h := newHarness(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	ip := startInproc(t, store, "quick", io.Discard, nil)
	const n = 20
	for range n {
		if m := ip.call("echo", `{"line":"x"}`); toolText(m) != "" {
			t.Fatalf("%v", m)
		}
	}
	ip.close()
	list, _, err := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: "quick"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if e.State != "committed" {
			t.Fatalf("logged %s", states(t, store, "quick"))
		}
	}
	if len(list) != n {
		t.Fatalf("%d effects, want %d", len(list), n)
	}
}
