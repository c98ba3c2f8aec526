package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/undolog/undolog/internal/mcpwire"
	"github.com/undolog/undolog/lifecycle"
)

// Multi round-trip calls (MCP 2026-07-28): a server may answer a tools/call
// with resultType "input_required", its inputRequests and a requestState;
// the client retries the same call with inputResponses and the echoed
// requestState. Such an answer is a round, not an outcome: the call stays
// one effect, executing (its lease renewed) while the proxy waits for the
// client's next round. The retry is matched to its effect as any repeat is,
// by the call's signature (tool and arguments; inputResponses and
// requestState are no arguments), and is a next round only if it carries
// inputResponses or a requestState: an intercept that finds the same call
// executing and awaiting its next round here forwards it as that effect's
// continuation, with no new effect, decision or capture; the same call
// without them is a repeat (in progress). A next round of a call that
// committed (re-sent, or stale) is answered from the log. The last
// round's answer commits or fails the effect. A call whose next round does
// not come within the input wait, or is pending when the proxy ends, is
// failed (retryable), the reason in `undolog show`. requestState is the
// server's, passed through unchanged. The log records each round
// (lifecycle's Result.Awaiting, SendingInput): a call whose proxy died
// while it awaited the client's input is failed by the next intercept of
// it, and runs again, rather than left in doubt.

// DefaultInputWait is how long a call that asked the client for input
// waits for the client's next round.
const DefaultInputWait = 5 * time.Minute

// inputRequired tells whether a tools/call result is a round that asks the
// client for input rather than the call's outcome.
func inputRequired(result json.RawMessage) bool {
	var r struct {
		ResultType string `json:"resultType"`
	}
	return mcpwire.Unmarshal(result, &r) == nil && r.ResultType == "input_required"
}

// continuation tells whether a tools/call's params carry a next round
// (the client's inputResponses or the echoed requestState).
func continuation(params json.RawMessage) bool {
	var r struct {
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   json.RawMessage `json:"requestState"`
	}
	if mcpwire.Unmarshal(params, &r) != nil {
		return false
	}
	given := func(v json.RawMessage) bool { return len(v) > 0 && string(v) != "null" }
	return given(r.InputResponses) || given(r.RequestState)
}

// awaitingRound is a logged call between two rounds.
type awaitingRound struct {
	lc    *lifecycle.Lifecycle
	call  *lifecycle.Call
	timer *time.Timer
}

// inputRounds holds, by effect, the calls that await the client's next round.
type inputRounds struct {
	mu      sync.Mutex
	waiting map[uint64]*awaitingRound
	// failing counts the calls taken to be failed whose failure is being
	// recorded: the proxy's end waits for them, the log still open.
	failing sync.WaitGroup
	// held, if set, hears each call that begins (+1) or ends (-1) awaiting
	// its next round: the client's side keeps from ending as idle meanwhile.
	held func(delta int)
}

// roundHolder is a client's side that must not end as idle while a call
// awaits the client's next round (a --listen lane): that round is on its
// way within the input wait.
type roundHolder interface{ HoldForRound(delta int) }

// take returns the call of effect id awaiting its next round, no longer
// awaiting; nil if none is. toFail: the caller records its failure, and
// then calls failing.Done.
func (r *inputRounds) take(id uint64, toFail bool) *awaitingRound {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.waiting[id]
	if w != nil {
		w.timer.Stop()
		delete(r.waiting, id)
		if r.held != nil {
			r.held(-1)
		}
		if toFail {
			r.failing.Add(1)
		}
	}
	return w
}

// awaitNextRound keeps a started call executing for its next round, and
// fails it if that does not come within the input wait.
func (p *Proxy) awaitNextRound(ctx context.Context, lc *lifecycle.Lifecycle, call *lifecycle.Call) {
	if err := lc.Finish(ctx, call, lifecycle.Result{Awaiting: true}); err != nil {
		p.note("%v", err)
	}
	id, wait := call.Effect.ID, p.inputWait()
	w := &awaitingRound{lc: lc, call: call}
	p.rounds.mu.Lock()
	defer p.rounds.mu.Unlock()
	if p.rounds.waiting == nil {
		p.rounds.waiting = map[uint64]*awaitingRound{}
	}
	w.timer = time.AfterFunc(wait, func() {
		p.abandonRound(id, fmt.Sprintf("abandoned between input rounds: the client's next round (its inputResponses) did not come within %s", wait))
	})
	p.rounds.waiting[id] = w
	if p.rounds.held != nil {
		p.rounds.held(1)
	}
}

// nextRound sends the client's next round of a call that asked for input,
// as that call's continuation, once the log says it goes on (a proxy
// killed after this leaves it in doubt: the server may act on the round).
func (p *Proxy) nextRound(ctx context.Context, w *awaitingRound, m message) (idInFlight bool) {
	if err := w.lc.SendingInput(ctx, w.call); err != nil {
		why := "abandoned between input rounds: its next round was not sent: " + err.Error()
		if ferr := w.lc.Finish(ctx, w.call, lifecycle.Result{Failed: why}); ferr != nil {
			p.note("%v", ferr)
		}
		p.reply(ctx, toolError(m.ID, "undolog: the call was not made: "+why))
		return false
	}
	return p.execute(ctx, w.lc, w.call, m)
}

// abandonRound fails the call of effect id if it still awaits its next
// round: the server asked for input and never acted on an answer.
func (p *Proxy) abandonRound(id uint64, why string) {
	w := p.rounds.take(id, true)
	if w == nil {
		return
	}
	defer p.rounds.failing.Done()
	if err := w.lc.Finish(context.Background(), w.call, lifecycle.Result{Failed: why}); err != nil {
		p.note("%v", err)
		return
	}
	p.note("effect %d (%s): %s; it failed and runs again when called again", id, w.call.Effect.Tool, why)
}

// abandonAllRounds fails every call still awaiting its next round: the
// proxy ends, and no next round can reach it. It returns once the failures
// of those the input wait ended meanwhile are recorded too.
func (p *Proxy) abandonAllRounds() {
	p.rounds.mu.Lock()
	var ids []uint64
	for id := range p.rounds.waiting {
		ids = append(ids, id)
	}
	p.rounds.mu.Unlock()
	for _, id := range ids {
		p.abandonRound(id, "abandoned between input rounds: the proxy ended before the client's next round")
	}
	p.rounds.failing.Wait()
}

func (p *Proxy) inputWait() time.Duration {
	if p.InputWait > 0 {
		return p.InputWait
	}
	return DefaultInputWait
}
