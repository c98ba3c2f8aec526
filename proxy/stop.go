package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// How a proxy run ends. The client closing its input is the normal end (Run
// returns nil). A signal (the run's context ending: SIGINT, SIGTERM) or the
// server exiting ends it early. Either way no call is started from then on,
// calls still waiting for approval stop waiting (their requests stand), the
// calls the server is running are answered and recorded as far as the end
// allows, and the server is stopped.
var (
	// ErrInterrupted: the run's context ended (a signal). The calls the
	// server was running had StopGrace to be answered; those that were not
	// stay executing, their leases stopped: in doubt once the proxy is gone.
	ErrInterrupted = errors.New("stopped by a signal")
	// ErrUpstreamExited: the server exited (or closed its output) while the
	// proxy served; every call in flight was answered with an error. Clients
	// that restart dead servers start the proxy again.
	ErrUpstreamExited = errUpstreamGone
)

// DefaultStopGrace is how long, after a signal, the calls the server is
// running have to be answered before the server is stopped.
const DefaultStopGrace = 5 * time.Second

// errClientGone ends the waits for approval once the client closed its input.
var errClientGone = errors.New("the client closed its input")

// runEnd is what a run knows of its end: whether it is ending (no new
// call is admitted), and the context that ends the approval waits with it.
type runEnd struct {
	mu       sync.Mutex
	leaving  bool
	waits    context.Context // ends when the run ends: approval waits stop
	endWaits context.CancelCauseFunc
}

// admit counts a call in, unless the run is ending.
func (p *Proxy) admit() bool {
	p.end.mu.Lock()
	defer p.end.mu.Unlock()
	if p.end.leaving {
		return false
	}
	p.calls.Add(1)
	return true
}

// serve runs readClient (the client's side, whatever its transport) until
// the client closes its input, ctx ends or the server exits, whichever
// comes first, and returns why (nil: the client closed).
func (p *Proxy) serve(ctx context.Context, readClient func()) error {
	p.end.waits, p.end.endWaits = context.WithCancelCause(context.Background())
	read := make(chan struct{})
	go func() {
		defer close(read)
		readClient()
	}()
	var why, cause error
	select {
	case <-read:
		why, cause = nil, errClientGone
	case <-ctx.Done():
		why, cause = fmt.Errorf("%w (%v)", ErrInterrupted, context.Cause(ctx)), ErrInterrupted
	case <-p.upGone:
		why, cause = ErrUpstreamExited, errUpstreamGone
	}
	select {
	case <-p.upGone: // gone as the client left: the server's end is the news
		why, cause = ErrUpstreamExited, errUpstreamGone
	default:
	}
	p.end.mu.Lock()
	p.end.leaving = true
	p.end.mu.Unlock()
	p.end.endWaits(cause)
	if why != nil {
		p.note("%v: no new calls; calls in flight: %d", why, p.inFlight())
	}
	return why
}

func (p *Proxy) inFlight() int {
	return p.running.count()
}

// drain waits for the calls in flight: all of them once the client closed
// its input (the server answers those it runs) or the server exited (each
// has its error), at most the stop grace after a signal, also one that
// comes while it waits. It returns why the run ends: a signal is news.
func (p *Proxy) drain(ctx context.Context, why error) error {
	done := make(chan struct{})
	go func() {
		p.calls.Wait()
		close(done)
	}()
	if !errors.Is(why, ErrInterrupted) {
		select {
		case <-done:
			return why
		case <-ctx.Done():
			if errors.Is(why, ErrUpstreamExited) {
				<-done // each call has its error already
				return why
			}
			why = fmt.Errorf("%w (%v)", ErrInterrupted, context.Cause(ctx))
			p.note("%v while calls in flight finished: %d", why, p.inFlight())
		}
	}
	grace := p.cancelGrace()
	select {
	case <-done:
	case <-time.After(grace):
		p.note("calls still running %s after the signal: %d; stopping the server: they stay executing (in doubt)", grace, p.inFlight())
	}
	return why
}

// stopUpstream stops the server (stop, whatever its transport), then waits
// for the calls still in flight: the server's side closed, each gets its
// error. It returns Run's error: why (see serve), with how the server ended
// when that is the news.
func (p *Proxy) stopUpstream(why error, stop func() error) error {
	exit := stop()
	p.calls.Wait()
	if errors.Is(why, ErrUpstreamExited) && exit != nil {
		return fmt.Errorf("%w (%v)", why, exit)
	}
	return why
}

// approvalContext is ctx, also ended when the run ends: a call waiting for
// approval stops waiting once the client has gone, a signal came or the
// server exited, and its request stands.
func (p *Proxy) approvalContext(ctx context.Context) (context.Context, func()) {
	if p.end.waits == nil { // not started by serve
		return ctx, func() {}
	}
	w, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(p.end.waits, func() { cancel(context.Cause(p.end.waits)) })
	return w, func() { stop(); cancel(nil) }
}

// stopCause says why the end of the run cut a call's wait (or start)
// short, from its context's cause.
func stopCause(cause error) string {
	switch {
	case errors.Is(cause, errCancelledByClient):
		return "the client cancelled it"
	case errors.Is(cause, errClientGone):
		return "the client closed its input"
	case errors.Is(cause, errUpstreamGone):
		return "the upstream MCP server exited"
	case errors.Is(cause, ErrInterrupted), cause != nil && cause != context.Canceled: // a signal's cause (signal.NotifyContext) Is context.Canceled too
		return "the proxy was stopped by a signal"
	}
	return "the proxy is stopping"
}
