package proxy

import (
	"context"
	"hash/maphash"
	"strconv"
	"sync"

	"github.com/undolog/undolog/model"
)

// The proxy's replay rule: a repeat of a call is answered from the log only
// when it is a retry, when the earlier identical call is still running or
// waiting, or its answer never reached the client (cancelled, timed out,
// the connection lost, the proxy restarted). A repeat after the client got
// its answer is the call made again and runs (write A, write B, write A).
// So once an answer is written to the client, the log records it
// (effectlog's Answered), after the write: a proxy that dies in between
// leaves the call unanswered, and its repeat is replayed rather than run
// twice. The record does not wait for its flush (AnsweredUnflushed): a
// crash that loses it has that same outcome, and the next call's intercept
// carries it to disk instead of queueing behind it. A policy rule's `replay: always` keeps a tool's calls the same
// call whenever their arguments are (exec's rule).

// runsAgainAnswered tells whether a call of tool made again after its
// answer reached the client runs again (the default) rather than being
// answered from the log (replay: always).
func (p *Proxy) runsAgainAnswered(tool string) bool { return p.Policy.RunsAgainAnswered(tool) }

// replyAnswer writes the answer b of committed (or replayed) effect e to
// the client and then records that it reached it. Until it is recorded, a
// repeat of the same call waits (see answerWaits): the client may send it
// as soon as it reads the answer.
func (p *Proxy) replyAnswer(ctx context.Context, b []byte, e model.Effect) {
	if !p.runsAgainAnswered(e.Tool) {
		p.reply(ctx, b)
		return
	}
	done := p.answers.begin(answerKeyOf(ctx, e.Tool))
	defer done()
	if !p.reply(ctx, b) {
		return // cancelled, or the client is gone: a repeat is a retry
	}
	if err := p.Log.AnsweredUnflushed(context.WithoutCancel(ctx), e.ID, model.Change{Actor: p.actor()}); err != nil {
		p.note("effect %d: recording that its answer reached the client failed (a repeat is replayed): %v", e.ID, err)
	}
}

// answerKey is what a call and its repeat share: the tool and a hash of
// the arguments as the client sent them (a repeat sends the same bytes; a
// collision only makes a call wait for another's record).
type answerKey struct{}

var answerSeed = maphash.MakeSeed()

func withAnswerKey(ctx context.Context, tool string, args []byte) context.Context {
	return context.WithValue(ctx, answerKey{}, tool+"\x00"+strconv.FormatUint(maphash.Bytes(answerSeed, args), 16))
}

func answerKeyOf(ctx context.Context, tool string) string {
	if k, ok := ctx.Value(answerKey{}).(string); ok {
		return k
	}
	return tool
}

// answerWaits tracks, by call (answerKey), the answers written whose record
// is still being made.
type answerWaits struct {
	mu      sync.Mutex
	pending map[string]map[chan struct{}]bool
}

// begin registers an answer of the call key; done is called once it is
// recorded (or known not to be needed).
func (a *answerWaits) begin(key string) (done func()) {
	ch := make(chan struct{})
	a.mu.Lock()
	if a.pending == nil {
		a.pending = map[string]map[chan struct{}]bool{}
	}
	if a.pending[key] == nil {
		a.pending[key] = map[chan struct{}]bool{}
	}
	a.pending[key][ch] = true
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		delete(a.pending[key], ch)
		if len(a.pending[key]) == 0 {
			delete(a.pending, key)
		}
		a.mu.Unlock()
		close(ch)
	}
}

// wait returns once the answers of the call key registered before it was
// called are recorded, or ctx ends.
func (a *answerWaits) wait(ctx context.Context, key string) {
	a.mu.Lock()
	var chans []chan struct{}
	for ch := range a.pending[key] {
		chans = append(chans, ch)
	}
	a.mu.Unlock()
	for _, ch := range chans {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}
