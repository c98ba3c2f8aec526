package proxy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// windowPolicy is sdkPolicy with launch decidable in the client's window,
// and a token argument kept out of the log.
const windowPolicy = `tools:
  launch: {tier: irreversible, approve_in_client: true}
  confirmed_launch: {tier: irreversible}
redact: ["token"]
`

// windowVersions are the protocol versions the window is asked under: by
// elicitation/create, and by an input_required round.
var windowVersions = []string{protocol2026, "2025-11-25", "2025-06-18"}

// windowHarness is a harness on the Go SDK test server with windowPolicy
// (policy, if not "").
func windowHarness(t *testing.T, engine, policy string) (*harness, string, effectlog.Log) {
	h, state, store := sdkHarnessOn(t, engine)
	if policy == "" {
		policy = windowPolicy
	}
	if err := os.WriteFile(h.policy, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	return h, state, store
}

// windowClient connects a Go SDK client named window-agent at version
// through argv; elicit, if not nil, is its elicitation handler (nil: it
// declares no elicitation).
func windowClient(h *harness, argv []string, version string, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error), opts ...func(*mcp.ClientOptions)) *mcp.ClientSession {
	h.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = h.env
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	o := &mcp.ClientOptions{ElicitationHandler: elicit}
	for _, f := range opts {
		f(o)
	}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "window-agent", Version: "1"}, o).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { s.Close() })
	if got := s.InitializeResult().ProtocolVersion; got != version {
		h.t.Fatalf("negotiated %s, want %s", got, version)
	}
	return s
}

// answering is an elicitation handler that answers action, counting the
// questions and keeping the last one's text.
func answering(action string, asked *atomic.Int64, question *atomic.Value) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		if question != nil {
			question.Store(r.Params.Message)
		}
		return &mcp.ElicitResult{Action: action}, nil
	}
}

// decision is effect id's approval as the log holds it.
func decision(t *testing.T, store effectlog.Log, id uint64) (sm.State, *model.Approval) {
	t.Helper()
	d, err := store.GetEffect(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d.Effect.State, d.Approval
}

// launchedOnce checks that the server launched the rocket once, as the one
// effect of the session, of tool, committed, its approval decided by decidedBy.
func launchedOnce(t *testing.T, state string, store effectlog.Log, tool, decidedBy string) {
	t.Helper()
	if j := journal(t, state); strings.Join(j, " ") != "launch_rocket" {
		t.Fatalf("journal %v", j)
	}
	if got := loggedEffects(t, store); strings.Join(got, " ") != tool+":committed" {
		t.Fatalf("logged %v, want one committed effect", got)
	}
	if _, a := decision(t, store, 1); a.DecidedBy != decidedBy {
		t.Fatalf("decided by %q, want %q", a.DecidedBy, decidedBy)
	}
}

// Issue 30 item 5: the person in the client's window approves (the call
// runs once, the decision theirs, via the client) or declines (rejected,
// nothing runs); the question shows the tool, its arguments as the log
// holds them, and the reason.
func TestProxyApprovalInTheClientsWindow(t *testing.T) {
	for _, version := range windowVersions {
		t.Run(version+"/accept", func(t *testing.T) {
			h, state, store := windowHarness(t, "file", "")
			var asked atomic.Int64
			var question atomic.Value
			s := windowClient(h, roundsProxy(h), version, answering("accept", &asked, &question))
			r := call(t, s, "launch", map[string]any{"name": "rocket"})
			if r.IsError || asked.Load() != 1 {
				t.Fatalf("asked %d times: %s", asked.Load(), text(r))
			}
			launchedOnce(t, state, store, "launch", "client-user:window-agent")
			q, _ := question.Load().(string)
			for _, want := range []string{"launch", `{"name":"rocket"}`, "policy: launch", "approve 1"} {
				if !strings.Contains(q, want) {
					t.Errorf("the question does not say %q: %s", want, q)
				}
			}
			if _, a := decision(t, store, 1); a.Decision != "accepted by the agent's user, via the client window-agent" {
				t.Fatalf("the decision's reason: %q", a.Decision)
			}
		})
		t.Run(version+"/decline", func(t *testing.T) {
			h, state, store := windowHarness(t, "file", "")
			var asked atomic.Int64
			var question atomic.Value
			s := windowClient(h, roundsProxy(h), version, answering("decline", &asked, &question))
			r := call(t, s, "launch", map[string]any{"name": "rocket", "token": "hunter2"})
			if !r.IsError || !strings.Contains(text(r), "rejected by client-user:window-agent") || asked.Load() != 1 {
				t.Fatalf("asked %d times: %s", asked.Load(), text(r))
			}
			if q, _ := question.Load().(string); strings.Contains(q, "hunter2") || !strings.Contains(q, `"token"`) {
				t.Fatalf("the question does not redact as the log does: %s", q)
			}
			if j := journal(t, state); len(j) != 0 {
				t.Fatalf("a declined call ran: %v", j)
			}
			st, a := decision(t, store, 1)
			if st != sm.Rejected || a.DecidedBy != "client-user:window-agent" {
				t.Fatalf("effect 1 %s, decided by %q", st, a.DecidedBy)
			}
			if sess, _ := store.GetSession(t.Context(), "rounds"); sess.State != sm.SessionHalted {
				t.Fatalf("session %s after a rejection", sess.State)
			}
		})
	}
}

// A call approved in the window whose server then asks for input itself
// stays one effect: the proxy's round, then the server's, then its answer.
func TestProxyWindowApprovalThenTheServersInput(t *testing.T) {
	for _, version := range []string{protocol2026, "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			h, state, store := windowHarness(t, "file", "tools:\n  confirmed_launch: {tier: irreversible, approve_in_client: true}\n")
			var asked atomic.Int64
			s := windowClient(h, roundsProxy(h), version, answering("accept", &asked, nil))
			r := call(t, s, "confirmed_launch", map[string]any{"name": "rocket"})
			if r.IsError || asked.Load() != 2 {
				t.Fatalf("asked %d times, want 2 (undolog's question, the server's): %s", asked.Load(), text(r))
			}
			launchedOnce(t, state, store, "confirmed_launch", "client-user:window-agent")
		})
	}
}

// A client that declares no elicitation, or a rule without
// approve_in_client, gets today's flow: the call waits for undolog approve.
func TestProxyApprovalWithoutTheWindow(t *testing.T) {
	for _, version := range []string{protocol2026, "2025-11-25"} {
		for _, c := range []struct {
			name, policy string
			elicits      bool
		}{
			{"no elicitation", "", false},
			{"policy off", "tools:\n  launch: {tier: irreversible}\n", true},
		} {
			t.Run(version+"/"+c.name, func(t *testing.T) {
				h, state, store := windowHarness(t, "file", c.policy)
				var asked atomic.Int64
				var elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
				if c.elicits {
					elicit = answering("accept", &asked, nil)
				}
				s := windowClient(h, roundsProxy(h, "--approval-wait", "20s"), version, elicit)
				done := make(chan *mcp.CallToolResult, 1)
				go func() { done <- call(t, s, "launch", map[string]any{"name": "rocket"}) }()
				waitFor(t, "the approval request", func() bool {
					list, _, _ := store.PendingApprovals(t.Context(), "rounds", 0)
					return len(list) == 1
				})
				h.cli("approve", "1", "--as", "alice")
				r := <-done
				if r.IsError || asked.Load() != 0 {
					t.Fatalf("asked %d times: %s", asked.Load(), text(r))
				}
				launchedOnce(t, state, store, "launch", "alice")
			})
		}
	}
}

// A decision made in a shell while the window asks stands; the window's
// later answer changes nothing, and the client is told what stands.
func TestProxyShellDecisionWhileTheWindowAsks(t *testing.T) {
	for _, version := range []string{protocol2026, "2025-11-25"} {
		for _, c := range []struct{ shell, window string }{{"approve", "decline"}, {"reject", "accept"}} {
			t.Run(version+"/"+c.shell, func(t *testing.T) {
				h, state, store := windowHarness(t, "file", "")
				var asked atomic.Int64
				release := make(chan struct{})
				s := windowClient(h, roundsProxy(h, "--approval-wait", "20s"), version,
					func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						asked.Add(1)
						select {
						case <-release:
						case <-ctx.Done():
						}
						return &mcp.ElicitResult{Action: c.window}, nil
					})
				done := make(chan *mcp.CallToolResult, 1)
				go func() { done <- call(t, s, "launch", map[string]any{"name": "rocket"}) }()
				waitFor(t, "the window's question", func() bool { return asked.Load() == 1 })
				h.cli(c.shell, "1", "--as", "alice")
				close(release)
				var r *mcp.CallToolResult
				select {
				case r = <-done:
				case <-time.After(20 * time.Second):
					t.Fatal("the call did not end")
				}
				st, a := decision(t, store, 1)
				if a.DecidedBy != "alice" {
					t.Fatalf("decided by %q, want alice (the shell's decision stands)", a.DecidedBy)
				}
				j := strings.Join(journal(t, state), " ")
				switch c.shell {
				case "approve":
					if r.IsError || j != "launch_rocket" || st != sm.Committed {
						t.Fatalf("effect 1 %s, journal %q: %s", st, j, text(r))
					}
				case "reject":
					if !r.IsError || !strings.Contains(text(r), "rejected by alice") || j != "" || st != sm.Rejected {
						t.Fatalf("effect 1 %s, journal %q: %s", st, j, text(r))
					}
				}
			})
		}
	}
}

// Nothing but the answer to the proxy's own question decides: not a
// requestState in the proxy's format that it did not give, not an
// argument; the proxy's requestState, given back, does, once. Two
// identical calls (one effect) share one question, so that answering
// either's does not cancel the other's (issue 30 follow-up: each call got
// a new question that voided the last, and the window asked forever).
func TestProxyWindowAnswerCannotBeForged(t *testing.T) {
	h, state, store := windowHarness(t, "file", "")
	var asked atomic.Int64
	s := windowClient(h, roundsProxy(h), protocol2026, answering("accept", &asked, nil),
		func(o *mcp.ClientOptions) { o.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true} })
	args := map[string]any{"name": "rocket"}
	accept := mcp.InputResponseMap{"undolog_approval": &mcp.ElicitResult{Action: "accept"}}
	ask := func(state string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "launch", Arguments: args, InputResponses: accept, RequestState: state})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := call(t, s, "launch", args)
	if !first.NeedsInput() || first.InputRequests["undolog_approval"] == nil || !strings.HasPrefix(first.RequestState, "undolog-approval-") {
		t.Fatalf("the window was not asked: %+v", first)
	}
	if second := call(t, s, "launch", args); second.RequestState != first.RequestState {
		t.Fatalf("the same call was asked a second question, which voids the first's answer")
	}
	forged := ask("undolog-approval-"+strings.Repeat("0", 48), args)
	inArgs := ask("", map[string]any{"name": "rocket", "requestState": first.RequestState, "undolog_approval": "accept"})
	for i, r := range []*mcp.CallToolResult{forged, inArgs} {
		if !r.NeedsInput() {
			t.Fatalf("attempt %d was not asked again: %s", i+1, text(r))
		}
	}
	for _, id := range []uint64{1, 2} {
		if st, a := decision(t, store, id); st != sm.Pending || a.Outcome != model.ApprovalPending {
			t.Fatalf("effect %d %s, its request %s by %q", id, st, a.Outcome, a.DecidedBy)
		}
	}
	if j := journal(t, state); len(j) != 0 {
		t.Fatalf("ran: %v", j)
	}
	// The answer to effect 1's question decides it.
	r := ask(first.RequestState, args)
	if r.IsError || r.NeedsInput() {
		t.Fatalf("the answer to the proxy's question: %s", text(r))
	}
	if j := journal(t, state); strings.Join(j, " ") != "launch_rocket" {
		t.Fatalf("journal %v", j)
	}
	if st, a := decision(t, store, 1); st != sm.Committed || a.DecidedBy != "client-user:window-agent" {
		t.Fatalf("effect 1 %s, decided by %q", st, a.DecidedBy)
	}
	// Redeemed once: given back again, with effect 2's call, it decides nothing.
	secondArgs := map[string]any{"name": "rocket", "requestState": first.RequestState, "undolog_approval": "accept"}
	if again := ask(first.RequestState, secondArgs); !again.NeedsInput() {
		t.Fatalf("a redeemed requestState answered again: %s", text(again))
	}
	if st, a := decision(t, store, 2); st != sm.Pending || a.Outcome != model.ApprovalPending {
		t.Fatalf("effect 2 %s, its request %s by %q", st, a.Outcome, a.DecidedBy)
	}
}

// A form dismissed in the window (MCP's cancel) is no answer: the call
// waits as without the window and gets the error asking to retry; the
// effect stays pending and the session active.
func TestProxyWindowDismissedDecidesNothing(t *testing.T) {
	for _, version := range []string{protocol2026, "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			h, state, store := windowHarness(t, "file", "")
			var asked atomic.Int64
			s := windowClient(h, roundsProxy(h, "--approval-wait", "1s"), version, answering("cancel", &asked, nil))
			r := call(t, s, "launch", map[string]any{"name": "rocket"})
			if !r.IsError || !strings.Contains(text(r), "approve 1") || asked.Load() != 1 {
				t.Fatalf("asked %d times: %s", asked.Load(), text(r))
			}
			if st, a := decision(t, store, 1); st != sm.Pending || a.Outcome != model.ApprovalPending {
				t.Fatalf("effect 1 %s, its request %s by %q", st, a.Outcome, a.DecidedBy)
			}
			if sess, _ := store.GetSession(t.Context(), "rounds"); sess.State == sm.SessionHalted {
				t.Fatal("a dismissed question halted the session")
			}
			if j := journal(t, state); len(j) != 0 {
				t.Fatalf("ran: %v", j)
			}
		})
	}
}

// rolesMu keeps the tests that create database roles (cluster-wide) apart.
var rolesMu sync.Mutex

// proxyRole is a database for the harness's log, with undolog's roles,
// and the URL of a log-in role in groups, which the proxy logs in as.
func proxyRole(t *testing.T, h *harness, groups ...string) effectlog.Log {
	t.Helper()
	owner := pgtest.Server(t).NewDatabase(t)
	env := append(append([]string{}, h.env...), "UNDOLOG_LOG="+owner)
	migrate := exec.Command(testbin.Undolog(t), "migrate", "--apply-roles")
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("migrate --apply-roles: %v\n%s", err, out)
	}
	u, err := url.Parse(owner)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	rand.Read(b[:])
	role := "window_proxy_" + hex.EncodeToString(b[:]) // role names are the cluster's, and at most 63 bytes
	conn, err := pgx.Connect(t.Context(), owner)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rolesMu.Lock() // RolesSQL too: the group roles are the cluster's
	_, err = conn.Exec(t.Context(), "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN IN ROLE "+strings.Join(groups, ", "))
	rolesMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pgtest.Server(t).AdminURL())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		c.Exec(context.Background(), "DROP OWNED BY "+pgx.Identifier{role}.Sanitize())
		c.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
	})
	u.User = url.User(role)
	h.env = append(h.env, "UNDOLOG_LOG="+u.String())
	store := logaddr.Open(owner, logaddr.Options{})
	t.Cleanup(func() { store.Close() })
	return store
}

// On PostgreSQL the window decides with the proxy's own connection: a proxy
// whose role may not approve (undolog_agent only) cannot approve through
// the window; the call waits as before, for undolog approve. A role in
// undolog_approver too can.
func TestProxyWindowApprovalNeedsTheProxysRoleToApprove(t *testing.T) {
	for _, version := range []string{protocol2026, "2025-11-25"} {
		for _, groups := range [][]string{{"undolog_agent"}, {"undolog_agent", "undolog_approver"}} {
			t.Run(version+"/"+strings.Join(groups, "+"), func(t *testing.T) {
				h, state, _ := windowHarness(t, "file", "")
				store := proxyRole(t, h, groups...)
				var asked atomic.Int64
				s := windowClient(h, roundsProxy(h, "--approval-wait", "2s"), version, answering("accept", &asked, nil))
				r := call(t, s, "launch", map[string]any{"name": "rocket"})
				st, a := decision(t, store, 1)
				j := strings.Join(journal(t, state), " ")
				if len(groups) == 1 {
					if !r.IsError || !strings.Contains(text(r), "approve 1") || asked.Load() != 1 || j != "" ||
						st != sm.Pending || a.Outcome != model.ApprovalPending {
						t.Fatalf("asked %d, effect 1 %s, request %s by %q, journal %q: %s", asked.Load(), st, a.Outcome, a.DecidedBy, j, text(r))
					}
					// Refused once, the window is asked no more.
					if r := call(t, s, "launch", map[string]any{"name": "rocket"}); !r.IsError || asked.Load() != 1 {
						t.Fatalf("asked %d times: %s", asked.Load(), text(r))
					}
					return
				}
				if r.IsError || j != "launch_rocket" || st != sm.Committed || a.DecidedBy != "client-user:window-agent" {
					t.Fatalf("effect 1 %s, decided by %q, journal %q: %s", st, a.DecidedBy, j, text(r))
				}
			})
		}
	}
}

// Over --listen too: a client with a session (2025-11-25) is asked by an
// elicitation/create request on its call's stream, a stateless one
// (2026-07-28) by an input_required round.
func TestProxyListenAsksTheClientsWindow(t *testing.T) {
	for _, version := range []string{protocol2026, "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			h, state, store := windowHarness(t, "file", "")
			url, _, _ := listening(t, h, "--session", "rounds", "--policy", h.policy, "--", sdkServer(t))
			var asked atomic.Int64
			c := mcp.NewClient(&mcp.Implementation{Name: "window-agent", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: answering("accept", &asked, nil)})
			s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s, want %s", got, version)
			}
			if r := call(t, s, "launch", map[string]any{"name": "rocket"}); r.IsError || asked.Load() != 1 {
				t.Fatalf("asked %d times: %s", asked.Load(), text(r))
			}
			launchedOnce(t, state, store, "launch", "client-user:window-agent")
		})
	}
}
