package proxy_test

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

const initializeRaw = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// captureProxy runs the proxy before the fake server, whose tool flaky
// fails while the file it returns exists.
func captureProxy(t *testing.T, policy string) (*harness, func(string) map[string]any, string) {
	h := newHarness(t)
	fail := filepath.Join(h.dir, "fail")
	h.env = append(h.env, "UNDOLOG_FAKE_FAIL="+fail)
	in, out, _ := rawProxyWith(t, h, policy)
	call := func(s string) map[string]any {
		t.Helper()
		io.WriteString(in, s+"\n")
		return next(t, out)
	}
	call(initializeRaw)
	return h, call, fail
}

func effects(t *testing.T, h *harness) []model.Effect {
	t.Helper()
	es, _, err := logaddr.File(h.logPath, logaddr.Options{}).ListEffects(t.Context(), effectlog.EffectFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// A capture that fails stops the call (nothing is logged) and the client
// reads the server's own error as the server gave it, after undolog's line
// (issue 15 item 10).
func TestProxyFailedCaptureKeepsTheServersError(t *testing.T) {
	h, call, fail := captureProxy(t, "tools:\n  echo:\n    capture: {tool: flaky}\n    compensate: {tool: echo}\n")
	os.WriteFile(fail, nil, 0o644)
	m := call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}`)
	r, _ := m["result"].(map[string]any)
	content, _ := r["content"].([]any)
	if r["isError"] != true || len(content) != 2 || !strings.Contains(toolText(m), "the capture call flaky before echo failed") {
		t.Fatalf("%v", m)
	}
	if server := content[1].(map[string]any); server["text"] != "flaked" || server["type"] != "text" {
		t.Fatalf("the server's own error: %v", server)
	}
	if es := effects(t, h); len(es) != 0 {
		t.Fatalf("a call whose capture failed was logged: %+v", es)
	}
}

// An optional capture that fails does not stop the call; its failure, the
// whole tool result, is the capture the compensation sees.
func TestProxyOptionalCaptureFails(t *testing.T) {
	h, call, fail := captureProxy(t, "tools:\n  echo:\n    capture: {tool: flaky, optional: true}\n    compensate:\n      - {when: .capture.isError, run: [rm, x]}\n      - {skip: existed}\n")
	os.WriteFile(fail, nil, 0o644)
	m := call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}`)
	if r, _ := m["result"].(map[string]any); r["isError"] == true {
		t.Fatalf("%v", m)
	}
	es := effects(t, h)
	if len(es) != 1 || es[0].State != sm.Committed {
		t.Fatalf("%+v", es)
	}
	c := es[0].Compensation
	wd, _ := os.Getwd()
	if c.Kind != model.CompensationCases || c.Dir != wd || !strings.Contains(string(c.Capture), `"isError":true`) || !strings.Contains(string(c.Capture), "flaked") {
		t.Fatalf("%+v", c)
	}
	sess, err := logaddr.File(h.logPath, logaddr.Options{}).VerifySession(t.Context(), "fake-1")
	if err != nil || sess.UpstreamDir != wd {
		t.Fatalf("the session's upstream directory: %q %v", sess.UpstreamDir, err)
	}
}

// A repeated call the log answers never reaches the server, its capture
// neither (issue 15 item 13): here the capture would fail now.
func TestProxyRepeatIsAnsweredBeforeItsCapture(t *testing.T) {
	h, call, fail := captureProxy(t, "tools:\n  echo:\n    replay: always\n    capture: {tool: flaky}\n    compensate: {tool: echo}\n")
	const echo = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}`
	if m := call(strings.Replace(echo, "%d", "2", 1)); toolText(m) != "" {
		t.Fatalf("%v", m)
	}
	os.WriteFile(fail, nil, 0o644)
	m := call(strings.Replace(echo, "%d", "3", 1))
	if r, _ := m["result"].(map[string]any); r["isError"] == true {
		t.Fatalf("the repeat reached the server's capture: %v", m)
	}
	es := effects(t, h)
	if len(es) != 2 || es[0].State != sm.Replayed && es[1].State != sm.Replayed {
		t.Fatalf("%+v", es)
	}
}

// A tier case makes a dry run safe: not logged; the same tool otherwise is.
func TestProxyTierByCondition(t *testing.T) {
	h, call, _ := captureProxy(t, "tools:\n  echo:\n    tier:\n      - {when: .args.dryRun == true, tier: safe}\n      - {tier: compensable}\n")
	call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"dryRun":true}}}`)
	if es := effects(t, h); len(es) != 0 {
		t.Fatalf("a dry run was logged: %+v", es)
	}
	call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"dryRun":false}}}`)
	es := effects(t, h)
	if len(es) != 1 || es[0].Tier != sm.Compensable {
		t.Fatalf("%+v", es)
	}
	var args map[string]any
	json.Unmarshal(es[0].Args, &args)
	if args["dryRun"] != false {
		t.Fatalf("%s", es[0].Args)
	}
}
