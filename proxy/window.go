package proxy

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/undolog/undolog/internal/mcpwire"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/policy"
	sm "github.com/undolog/undolog/statemachine"
)

// Approval in the agent's window: a rule with approve_in_client lets the
// person in front of the client decide its irreversible calls, as one more
// channel beside undolog approve. While a call waits for a decision the
// proxy asks the client's user by elicitation: under 2025-06-18 and
// 2025-11-25 with an elicitation/create request of its own, while the call
// waits as before; under 2026-07-28, where a server cannot send the client
// requests, by answering the call with an input_required elicitation and a
// requestState of its own, which the client's next round echoes. Only a
// client that declared form elicitation is asked. accept approves, decline
// rejects, as the actor windowActor names; cancel, a form dismissed, is no
// answer. Nothing the model
// writes can answer: an argument is no answer, and a requestState counts
// only if it is the one the proxy gave for that effect, once (it stays
// in this process's memory; no state in the proxy's format reaches the
// server, and an expired one is no answer: the call is asked again). A decision
// made elsewhere first stands: the log refuses the window's, and the call
// ends as that decision says. A proxy whose database role may not approve
// stops asking.

// windowInputKey names the proxy's own question among a round's inputRequests.
const windowInputKey = "undolog_approval"

// windowStatePrefix starts every requestState the proxy gives: a state with
// it is the proxy's own, never the server's, even one this process no
// longer holds (given before a restart, or by a lane since ended).
const windowStatePrefix = "undolog-approval-"

// windowAsks holds the requestState the proxy gave each effect it asks
// about under 2026-07-28, until a client's next round redeems it.
type windowAsks struct {
	mu      sync.Mutex
	byState map[string]uint64
	byID    map[uint64]string
}

// give returns the requestState of the question about effect id: the one
// given before while it is unanswered, so that repeats of the call (a
// client's retry, or two identical calls, which are one effect) share one
// question, and any of their answers decides.
func (w *windowAsks) give(id uint64) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if state, ok := w.byID[id]; ok {
		return state
	}
	var b [24]byte
	rand.Read(b[:])
	state := windowStatePrefix + hex.EncodeToString(b[:])
	if w.byState == nil {
		w.byState, w.byID = map[string]uint64{}, map[uint64]string{}
	}
	w.byState[state], w.byID[id] = id, state
	return state
}

// redeem takes requestState state if the proxy gave it and it is still
// unanswered: ok, and the effect it was given for. A state is redeemed once.
func (w *windowAsks) redeem(state string) (id uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id, ok = w.byState[state]
	if ok && subtle.ConstantTimeCompare([]byte(w.byID[id]), []byte(state)) == 1 {
		delete(w.byState, state)
		delete(w.byID, id)
		return id, true
	}
	return 0, false
}

// windowWay is how the client's window can be asked about a call.
type windowWay int

const (
	noWindow  windowWay = iota
	byRequest           // an elicitation/create request (2025-06-18, 2025-11-25)
	byRound             // an input_required answer (2026-07-28 and later)
)

// windowWay says whether and how the person in the client's window may be
// asked to decide call, which request m made: the rule lets them, the call
// waits for a decision nobody made yet, and the client can show a form.
func (p *Proxy) windowWay(rule *policy.Rule, call *lifecycle.Call, m message) windowWay {
	if rule == nil || !rule.ApproveInClient || !call.NeedsDecision() || call.Effect.State != sm.Pending || p.windowDenied.Load() {
		return noWindow
	}
	if meta, ok := mcpwire.ReadRequestMeta(m.Params); ok {
		if meta.FormElicitation {
			return byRound
		}
		return noWindow
	}
	p.nameMu.Lock()
	defer p.nameMu.Unlock()
	if p.clientElicits {
		return byRequest
	}
	return noWindow
}

// windowQuestion is the elicitation that asks the client's user to decide
// call: the tool, its arguments as the log holds them (redacted) and why
// it waits for a decision.
func (p *Proxy) windowQuestion(call *lifecycle.Call, reason string) map[string]any {
	e := call.Effect
	text := fmt.Sprintf("undolog: approve the irreversible call %s %s (effect %d, session %s)? Why it is held: %s. "+
		"Accept runs it once; decline rejects it and halts the session. It can also be decided with: %s approve %d",
		e.Tool, textfmt.OneLine(string(e.Args)), e.ID, e.Session, reason, p.cli(), e.ID)
	return map[string]any{
		"message":         textfmt.Escape(text),
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}},
	}
}

// windowRound is the answer that asks the client's user under 2026-07-28:
// an input_required round whose requestState is the proxy's.
func (p *Proxy) windowRound(call *lifecycle.Call, reason string) json.RawMessage {
	return encode(map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{windowInputKey: map[string]any{"method": "elicitation/create", "params": p.windowQuestion(call, reason)}},
		"requestState":  p.asks.give(call.Effect.ID),
	})
}

// windowAnswer takes out of a tools/call a requestState in the proxy's
// format, so that it never reaches the server, with the answer to the
// proxy's question among its inputResponses; action is that answer, when
// the state is the live one given for call's effect ("" otherwise: an
// expired, forged or other effect's question answers nothing, and the call
// goes on as if sent without it). Any other requestState is the server's:
// m is returned unchanged.
func (p *Proxy) windowAnswer(call *lifecycle.Call, m message) (_ message, action string) {
	var params map[string]json.RawMessage
	if json.Unmarshal(m.Params, &params) != nil {
		return m, ""
	}
	var state string
	if json.Unmarshal(params["requestState"], &state) != nil || !strings.HasPrefix(state, windowStatePrefix) {
		return m, ""
	}
	var responses map[string]json.RawMessage
	json.Unmarshal(params["inputResponses"], &responses)
	var answer struct {
		Action string `json:"action"`
	}
	json.Unmarshal(responses[windowInputKey], &answer)
	delete(params, "requestState")
	delete(responses, windowInputKey)
	if len(responses) == 0 {
		delete(params, "inputResponses")
	} else {
		params["inputResponses"] = encode(responses)
	}
	m.Params = encode(params)
	m.raw = encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "method": m.Method, "params": m.Params})
	id, live := p.asks.redeem(state)
	switch {
	case !live:
		p.note("effect %d: the answer came to a question of undolog's this proxy no longer holds (answered, or asked before a restart): it decides nothing", call.Effect.ID)
		return m, ""
	case id != call.Effect.ID:
		p.note("a requestState undolog gave for effect %d came with a call of effect %d: it answers nothing", id, call.Effect.ID)
		return m, ""
	}
	return m, answer.Action
}

// askWindow sends the client's user the question about call (an
// elicitation/create request) and decides call by the answer, if it comes
// while ctx lasts; ended, the question is withdrawn. The returned func
// waits for that to be done, ctx ended.
func (p *Proxy) askWindow(ctx context.Context, call *lifecycle.Call, reason string) (wait func()) {
	id, ch := p.clientAnswers.own()
	if err := p.writeClient(encode(map[string]any{"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": p.windowQuestion(call, reason)})); err != nil {
		p.clientAnswers.forget(id)
		return func() {}
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case m, ok := <-ch:
			if !ok {
				return
			}
			var r struct {
				Action string `json:"action"`
			}
			if m.Error != nil || mcpwire.Unmarshal(m.Result, &r) != nil {
				p.note("effect %d: the client's window gave no answer (%s): it waits for a decision as before", call.Effect.ID, textfmt.OneLine(string(m.raw)))
				return
			}
			p.decideInWindow(ctx, call, r.Action)
		case <-ctx.Done():
			if _, asked := p.clientAnswers.take(id); asked {
				p.writeClient(encode(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
					"params": map[string]any{"requestId": id, "reason": "undolog: the call was decided elsewhere, or its wait for a decision ended"}}))
			}
		}
	}()
	return func() { <-ended }
}

// windowActor is who a decision made in the client's window is recorded as:
// the client's user, named by the client they use.
func (p *Proxy) windowActor() (actor, name string) {
	p.nameMu.Lock()
	defer p.nameMu.Unlock()
	name = textfmt.Escape(p.clientName)
	if name == "" {
		name = "an unnamed client"
	}
	return model.WindowActorPrefix + name, name
}

// decideInWindow records the answer of the client's user on call: accept
// approves it, decline rejects it; cancel (dismissed) decides nothing.
func (p *Proxy) decideInWindow(ctx context.Context, call *lifecycle.Call, action string) {
	actor, name := p.windowActor()
	id := call.Effect.ID
	c := model.Change{Actor: actor, ExpectCall: call.Effect.CallSignature}
	var err error
	switch action {
	case "accept":
		c.Reason = "accepted by the agent's user, via the client " + name
		_, err = p.Log.Approve(ctx, id, c)
	case "decline":
		c.Reason = "declined by the agent's user, via the client " + name
		_, err = p.Log.Reject(ctx, id, c)
	case "cancel":
		// MCP's cancel is a form dismissed without a choice: no decision.
		p.note("effect %d: the client's window was dismissed without an answer: it waits for a decision as before", id)
		return
	default:
		p.note("effect %d: the client's window answered %q, which decides nothing", id, textfmt.OneLine(action))
		return
	}
	switch {
	case errors.Is(err, model.ErrDenied):
		p.windowDenied.Store(true)
		p.note("effect %d: the answer in the client's window could not be recorded: %v; the proxy's database role may not decide calls "+
			"(it needs undolog_approver), so it asks the client's window no more: decide it with %s approve %d", id, err, p.cli(), id)
	case err != nil:
		p.note("effect %d: the answer in the client's window (%s) changes nothing: %v", id, action, err)
	default:
		p.note("effect %d (%s): %s", id, call.Effect.Tool, c.Reason)
	}
}
