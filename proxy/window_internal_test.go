package proxy

import (
	"strings"
	"testing"

	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
)

// The proxy's own requestState, and the inputResponses that come with it,
// are taken out of the call before it can reach the server; it answers
// only for the effect it was given for, once. Any other requestState is
// the server's and the call passes unchanged.
func TestWindowAnswerIsTakenOutOfTheCall(t *testing.T) {
	p := &Proxy{}
	call := &lifecycle.Call{Effect: model.Effect{ID: 7}}
	msg := func(state string) message {
		params := `{"name":"launch","arguments":{"name":"rocket"},"inputResponses":{"undolog_approval":{"action":"accept"}},"requestState":"` + state + `"}`
		raw := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":` + params + `}`
		return message{JSONRPC: "2.0", ID: []byte("3"), Method: "tools/call", Params: []byte(params), raw: []byte(raw)}
	}
	state := p.asks.give(7)
	m, action := p.windowAnswer(call, msg(state))
	if action != "accept" || strings.Contains(string(m.raw), "requestState") || strings.Contains(string(m.raw), "inputResponses") ||
		!strings.Contains(string(m.raw), `"arguments":{"name":"rocket"}`) {
		t.Fatalf("action %q, passed on %s", action, m.raw)
	}
	for _, other := range []string{state, "server-state", "undolog-approval-00"} { // redeemed; the server's; forged
		in := msg(other)
		if m, action := p.windowAnswer(call, in); action != "" || string(m.raw) != string(in.raw) {
			t.Errorf("%s: action %q, passed on %s", other, action, m.raw)
		}
	}
	// Given for another effect: taken out, and it answers nothing.
	other := p.asks.give(8)
	if m, action := p.windowAnswer(call, msg(other)); action != "" || strings.Contains(string(m.raw), other) {
		t.Errorf("effect 8's state on effect 7: action %q, passed on %s", action, m.raw)
	}
}
