package proxy_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/testbin"
)

// matrixVersions are the protocol versions of the matrix, oldest first: a
// client at one asks for it, a server at one speaks the SDK's versions up
// to it.
var matrixVersions = []string{"2025-06-18", "2025-11-25", protocol2026}

// matrixServers are the servers of the matrix: one at each version, and
// one that speaks only 2026-07-28 (which older clients cannot reach
// directly, so their pairings are skipped).
var matrixServers = []struct{ name, versions string }{
	{"2025-06-18", versionsUpTo("2025-06-18")},
	{"2025-11-25", versionsUpTo("2025-11-25")},
	{protocol2026, versionsUpTo(protocol2026)},
	{protocol2026 + "-only", protocol2026},
}

// matrixTransports: the proxy over stdio in front of the server over stdio
// (`undolog proxy -- sdkserver`), over stdio in front of the server over
// HTTP (--url), over HTTP in front of the server over stdio (--listen).
var matrixTransports = []string{"stdio", "url", "listen"}

// matrixApprovalWait is the proxy's --approval-wait in the matrix: long
// enough for a test to approve a waiting call, short enough to run out.
const matrixApprovalWait = 6 * time.Second

// versionsUpTo is the SDK's protocol versions up to v, as $SDKSERVER_VERSIONS.
func versionsUpTo(v string) string {
	return strings.Join(slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(s string) bool { return s > v }), ",")
}

// directRun is what a client at one version did with a server at another,
// without the proxy.
type directRun struct {
	connectErr error
	version    string
	tools      []string
	failed     map[string]string // scenario: why it failed directly
}

// matrixClient connects a Go SDK client named agent-VERSION at version
// over transport; its elicitation handler accepts and counts in asked.
func matrixClient(ctx context.Context, transport mcp.Transport, version string, asked *atomic.Int64) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "agent-" + version, Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	return c.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
}

// toolNames are the names tools/list gives, sorted.
func toolNames(ctx context.Context, s *mcp.ClientSession) ([]string, error) {
	list, err := s.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names, nil
}

// callErr is a call's failure, "" if it succeeded.
func callErr(ctx context.Context, s *mcp.ClientSession, name string, args map[string]any) string {
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	switch {
	case err != nil:
		return err.Error()
	case r.IsError:
		return text(r)
	}
	return ""
}

// runDirect is the matrix's baseline: the client at clientVersion and the
// server speaking serverVersions, over stdio or HTTP, with no proxy between them.
func runDirect(t *testing.T, overHTTP bool, serverVersions, clientVersion string) directRun {
	h, _, _ := sdkHarnessOn(t, "file")
	h.env = append(h.env, "SDKSERVER_VERSIONS="+serverVersions)
	var transport mcp.Transport
	if overHTTP {
		transport = &mcp.StreamableClientTransport{Endpoint: sdkServerHTTP(t, h)}
	} else {
		cmd := exec.Command(sdkServer(t))
		cmd.Env = h.env
		transport = &mcp.CommandTransport{Command: cmd}
	}
	var asked atomic.Int64
	s, err := matrixClient(t.Context(), transport, clientVersion, &asked)
	if err != nil {
		return directRun{connectErr: err}
	}
	defer s.Close()
	run := directRun{version: s.InitializeResult().ProtocolVersion, failed: map[string]string{}}
	fail := func(scenario, why string) {
		if why != "" {
			run.failed[scenario] = why
		}
	}
	var listErr error
	if run.tools, listErr = toolNames(t.Context(), s); listErr != nil {
		fail("tools/list", listErr.Error())
	}
	fail("safe", callErr(t.Context(), s, "read", map[string]any{"key": "k"}))
	fail("compensable", callErr(t.Context(), s, "write", map[string]any{"key": "k", "value": "v"}))
	fail("capture", callErr(t.Context(), s, "set", map[string]any{"key": "k", "value": "w"}))
	fail("irreversible", callErr(t.Context(), s, "launch", map[string]any{"name": "n"}))
	fail("input", callErr(t.Context(), s, "confirmed_write", map[string]any{"key": "c", "value": "v"}))
	if run.failed["input"] == "" && asked.Load() != 1 {
		fail("input", fmt.Sprintf("the server asked for input %d times", asked.Load()))
	}
	return run
}

// TestVersionMatrix (issue 30, items 1 and 6): the official Go SDK as
// client and as server, at each protocol version, through each transport,
// on both log engines. Each pairing is first run directly; a scenario that
// works directly must work through the proxy: discovery gives the version
// it gives directly, tools/list the same tools, a safe call, a compensable
// write and a set whose capture undo sets back, a call asked for input
// (one effect), an irreversible call approved while it waits, and one
// approved after its wait ran out (the client told to call again, the call
// then run once); undo restores what the compensable calls changed. Cells
// run at once, beyond -parallel: they wait on processes, not on the CPU.
// With -short, on the file engine only.
func TestVersionMatrix(t *testing.T) {
	start := time.Now()
	direct := map[string]directRun{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for _, overHTTP := range []bool{false, true} {
		for _, sv := range matrixServers {
			for _, cv := range matrixVersions {
				name := "direct/" + map[bool]string{false: "stdio", true: "http"}[overHTTP] + "/server-" + sv.name + "/client-" + cv
				wg.Add(1)
				go func() {
					defer wg.Done()
					slots <- struct{}{}
					defer func() { <-slots }()
					t.Run(name, func(t *testing.T) {
						run := runDirect(t, overHTTP, sv.versions, cv)
						// So that the matrix cannot skip its way to green: a
						// client reaches a server of its own version.
						if run.connectErr != nil && slices.Contains(strings.Split(sv.versions, ","), cv) {
							t.Fatalf("a client at %s does not reach a server that speaks it: %v", cv, run.connectErr)
						}
						mu.Lock()
						direct[name] = run
						mu.Unlock()
					})
				}()
			}
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	matrixEngines := engines
	if testing.Short() {
		matrixEngines = []string{"file"}
	}
	for _, engine := range matrixEngines {
		for _, transport := range matrixTransports {
			for _, sv := range matrixServers {
				name := engine + "/" + transport + "/server-" + sv.name
				row := matrixRow{}
				switch transport {
				case "url": // the row's server over HTTP
					h, state, _ := sdkHarnessOn(t, "file")
					h.env = append(h.env, "SDKSERVER_VERSIONS="+sv.versions)
					row.state, row.url = state, sdkServerHTTP(t, h)
				case "listen": // the row's proxy, and so its log
					h, state, store := sdkHarnessOn(t, engine)
					h.env = append(h.env, "SDKSERVER_VERSIONS="+sv.versions)
					url, _, _ := listening(t, h, "--policy", h.policy, "--approval-wait", matrixApprovalWait.String(), "--", sdkServer(t))
					row = matrixRow{h: h, state: state, store: store, url: url}
				}
				for _, cv := range matrixVersions {
					kind := "stdio"
					if transport != "stdio" {
						kind = "http"
					}
					base := direct["direct/"+kind+"/server-"+sv.name+"/client-"+cv]
					wg.Add(1)
					go func() {
						defer wg.Done()
						slots <- struct{}{}
						defer func() { <-slots }()
						t.Run(name+"/client-"+cv, func(t *testing.T) {
							if base.connectErr != nil {
								t.Skipf("the client does not connect to the server directly: %v", base.connectErr)
							}
							matrixCell(t, engine, transport, sv.versions, cv, row, base)
						})
					}()
				}
			}
		}
	}
	wg.Wait()
	t.Logf("the matrix took %s", time.Since(start).Round(time.Second))
}

// matrixRow is what the clients of a row share: with --url the server
// over HTTP (url, its state), with --listen the proxy (url, its harness and
// log, its servers' state).
type matrixRow struct {
	h     *harness
	state string
	store effectlog.Log
	url   string
}

// matrixCell runs the scenarios through the proxy for one pairing.
func matrixCell(t *testing.T, engine, transport, serverVersions, clientVersion string, row matrixRow, base directRun) {
	key := func(k string) string { return clientVersion + "-" + k } // a row's clients share a server
	var h *harness
	var state string
	var store effectlog.Log
	var ct mcp.Transport
	session := "m"
	switch transport {
	case "stdio", "url":
		h, state, store = sdkHarnessOn(t, engine)
		h.env = append(h.env, "SDKSERVER_VERSIONS="+serverVersions)
		upstream := []string{"--", sdkServer(t)}
		if transport == "url" {
			upstream, state = []string{"--url", row.url}, row.state
		}
		args := []string{"proxy", "--session", session, "--policy", h.policy, "--approval-wait", matrixApprovalWait.String()}
		cmd := exec.Command(testbin.Undolog(t), append(args, upstream...)...)
		cmd.Env = h.env
		if testing.Verbose() {
			cmd.Stderr = os.Stderr
		}
		ct = &mcp.CommandTransport{Command: cmd}
	case "listen":
		// The proxy names the client's session: the one its calls are in.
		h, state, store, session = row.h, row.state, row.store, ""
		ct = &mcp.StreamableClientTransport{Endpoint: row.url}
	}
	sessionOfTheClient := func() string {
		waitFor(t, "a call of the client in the log", func() bool {
			list, _, _ := store.ListEffects(t.Context(), effectlog.EffectFilter{})
			for _, e := range list {
				if strings.Contains(string(e.Args), `"`+key("")) {
					session = e.Session
				}
			}
			return session != ""
		})
		return session
	}
	if err := os.WriteFile(filepath.Join(state, key("seed")), []byte("blue"), 0o644); err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int64
	s, err := matrixClient(t.Context(), ct, clientVersion, &asked)
	if err != nil {
		t.Fatalf("the client connects directly (at %s) but not through the proxy: %v", base.version, err)
	}
	defer s.Close()
	runs := func(scenario string) bool {
		if why, failed := base.failed[scenario]; failed {
			t.Logf("%s: not run, it fails directly: %s", scenario, why)
			return false
		}
		return true
	}

	// The irreversible call whose wait runs out is made first: it waits
	// while the others run.
	type answer struct {
		r   *mcp.CallToolResult
		err error
	}
	late := make(chan answer, 1)
	if runs("irreversible") {
		go func() {
			r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "launch", Arguments: map[string]any{"name": key("late")}})
			late <- answer{r, err}
		}()
	}

	t.Logf("negotiated %s", s.InitializeResult().ProtocolVersion)
	if got := s.InitializeResult().ProtocolVersion; got != base.version {
		t.Errorf("discovery: negotiated %q through the proxy, %q directly", got, base.version)
	}
	if runs("tools/list") {
		if got, err := toolNames(t.Context(), s); err != nil || !slices.Equal(got, base.tools) {
			t.Errorf("tools/list: %v (%v) through the proxy, %v directly", got, err, base.tools)
		}
	}
	value := func(k string) string {
		b, err := os.ReadFile(filepath.Join(state, key(k)))
		if os.IsNotExist(err) {
			return "(none)"
		}
		return string(b)
	}
	if runs("safe") {
		if r := call(t, s, "read", map[string]any{"key": key("seed")}); r.IsError || text(r) != "blue" {
			t.Errorf("safe: read %q (error %v), want blue", text(r), r.IsError)
		}
	}
	if runs("compensable") {
		if why := callErr(t.Context(), s, "write", map[string]any{"key": key("w"), "value": "1"}); why != "" || value("w") != "1" {
			t.Errorf("compensable: %s; the key holds %s", why, value("w"))
		}
	}
	if runs("capture") {
		if why := callErr(t.Context(), s, "set", map[string]any{"key": key("seed"), "value": "red"}); why != "" || value("seed") != "red" {
			t.Errorf("capture: %s; the key holds %s", why, value("seed"))
		}
	}
	if runs("input") {
		why := callErr(t.Context(), s, "confirmed_write", map[string]any{"key": key("c"), "value": "1"})
		if why != "" || asked.Load() != 1 || value("c") != "1" {
			t.Errorf("input: %s; asked %d times; the key holds %s", why, asked.Load(), value("c"))
		}
	}
	launched := func(name string) int {
		n := 0
		for _, line := range journal(t, state) {
			if line == "launch_"+key(name) {
				n++
			}
		}
		return n
	}
	if runs("irreversible") {
		// Approved while it waits.
		now := make(chan answer, 1)
		go func() {
			r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "launch", Arguments: map[string]any{"name": key("now")}})
			now <- answer{r, err}
		}()
		var id uint64
		waitFor(t, "the approval request of launch "+key("now"), func() bool {
			list, _, _ := store.PendingApprovals(t.Context(), sessionOfTheClient(), 0)
			for _, a := range list {
				if strings.Contains(string(a.Args), key("now")) {
					id = a.EffectID
				}
			}
			return id != 0
		})
		h.cli("approve", strconv.FormatUint(id, 10), "--as", "alice")
		if a := <-now; a.err != nil || a.r.IsError || launched("now") != 1 {
			t.Errorf("irreversible approved while it waits: %v %s; launched %d times", a.err, resultText(a.r), launched("now"))
		}
		// Approved after its wait ran out: the client is told to call again,
		// and the call then runs once.
		a := <-late
		if a.err != nil || !a.r.IsError || !strings.Contains(text(a.r), "call launch again") || launched("late") != 0 {
			t.Fatalf("irreversible whose wait ran out: %v %s; launched %d times", a.err, resultText(a.r), launched("late"))
		}
		m := regexp.MustCompile(`approve (\d+)`).FindStringSubmatch(text(a.r))
		if m == nil {
			t.Fatalf("the held call names no effect to approve: %s", text(a.r))
		}
		h.cli("approve", m[1], "--as", "alice")
		if why := callErr(t.Context(), s, "launch", map[string]any{"name": key("late")}); why != "" || launched("late") != 1 {
			t.Errorf("the approved call made again: %s; launched %d times", why, launched("late"))
		}
	}
	s.Close()

	effects, _, err := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: sessionOfTheClient(), Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, e := range effects {
		count[e.Tool]++
		if d, err := store.GetEffect(t.Context(), e.ID); err != nil || d.History[0].Actor != "mcp:agent-"+clientVersion {
			t.Errorf("the log names the client of %s %q, want mcp:agent-%s (%v)", e.Tool, d.History[0].Actor, clientVersion, err)
		}
	}
	want := map[string]int{"write": 1, "set": 1, "confirmed_write": 1, "launch": 2}
	for tool, n := range want {
		if count[tool] != n && runs(map[string]string{"write": "compensable", "set": "capture", "confirmed_write": "input", "launch": "irreversible"}[tool]) {
			t.Errorf("the log holds %d %s effects, want %d: %v", count[tool], tool, n, count)
		}
	}

	h.cli("undo", session, "--yes")
	if runs("compensable") && value("w") != "(none)" {
		t.Errorf("undo left the written key: %s", value("w"))
	}
	if runs("capture") && value("seed") != "blue" {
		t.Errorf("undo set the key to %s, want blue (as captured)", value("seed"))
	}
	if runs("input") && value("c") != "(none)" {
		t.Errorf("undo left the key written after input: %s", value("c"))
	}
}

func resultText(r *mcp.CallToolResult) string {
	if r == nil {
		return "(no result)"
	}
	return text(r)
}
