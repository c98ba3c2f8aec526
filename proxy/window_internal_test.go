package proxy

import (
	"strings"
	"testing"

	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
)

// The proxy's own requestState, and the answer to its question among the
// inputResponses, are taken out of the call before it can reach the
// server, whether this proxy still holds the state or not (answered,
// given before a restart, forged); it answers only for the effect it was
// given for, once. Any other requestState is the server's and the call
// passes unchanged.
func TestWindowAnswerIsTakenOutOfTheCall(t *testing.T) {
	p := &Proxy{}
	call := &lifecycle.Call{Effect: model.Effect{ID: 7}}
	msg := func(state string) message {
		params := `{"name":"launch","arguments":{"name":"rocket"},"inputResponses":{"undolog_approval":{"action":"accept"}},"requestState":"` + state + `"}`
		raw := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":` + params + `}`
		return message{JSONRPC: "2.0", ID: []byte("3"), Method: "tools/call", Params: []byte(params), raw: []byte(raw)}
	}
	state := p.asks.give(7)
	if again := p.asks.give(7); again != state {
		t.Fatalf("a repeat of effect 7 got another question (%s, then %s): each would cancel the other's answer", state, again)
	}
	m, action := p.windowAnswer(call, msg(state))
	stripped := func(m message) bool {
		return !strings.Contains(string(m.raw), "requestState") && !strings.Contains(string(m.raw), "inputResponses") &&
			strings.Contains(string(m.raw), `"arguments":{"name":"rocket"}`)
	}
	if action != "accept" || !stripped(m) {
		t.Fatalf("action %q, passed on %s", action, m.raw)
	}
	for _, expired := range []string{state, "undolog-approval-00"} { // redeemed; forged or from another run
		if m, action := p.windowAnswer(call, msg(expired)); action != "" || !stripped(m) {
			t.Errorf("%s: action %q, passed on %s", expired, action, m.raw)
		}
	}
	if in := msg("server-state"); func() bool {
		m, action := p.windowAnswer(call, in)
		return action != "" || string(m.raw) != string(in.raw)
	}() {
		t.Errorf("the server's requestState was not passed on unchanged")
	}
	// Given for another effect: taken out, and it answers nothing.
	other := p.asks.give(8)
	if m, action := p.windowAnswer(call, msg(other)); action != "" || !stripped(m) {
		t.Errorf("effect 8's state on effect 7: action %q, passed on %s", action, m.raw)
	}
	// The server's own inputResponses beside an expired question stay.
	params := `{"name":"launch","inputResponses":{"undolog_approval":{"action":"accept"},"server_key":{"action":"accept"}},"requestState":"undolog-approval-11"}`
	in := message{JSONRPC: "2.0", ID: []byte("4"), Method: "tools/call", Params: []byte(params), raw: []byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":` + params + `}`)}
	if m, _ := p.windowAnswer(call, in); strings.Contains(string(m.raw), "undolog") || !strings.Contains(string(m.raw), "server_key") {
		t.Errorf("passed on %s", m.raw)
	}
}
