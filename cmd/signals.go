package cmd

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// interrupts is what signals do to a command run by Main, caught from its
// start: SIGINT and SIGTERM end the command's context (what it waits for
// ends, and it exits 130; a second signal then ends the process at once, as
// it would uncaught), and Ctrl-Z lets its logs go before the process stops
// (letGoOnStop). A Factory not made by Main catches nothing.
type interrupts struct {
	ctx    context.Context // nil unless Main caught the signals
	ownEnd bool            // handleInterrupts
}

// catchSignals puts the handlers in place and returns the command's
// context, which a signal ends, and what ends it when the command returns.
func (f *Factory) catchSignals() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	f.signals.ctx = ctx
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-ch:
			// A second one ends the process as it would have ended
			// uncaught: a way out of whatever the first did not end.
			signal.Stop(ch)
			cancel(signalError(sig.String()))
		case <-ctx.Done():
		}
	}()
	letGoOnStop(ctx, f)
	return ctx, func() { cancel(nil) }
}

// handleInterrupts is for a command that waits, or runs other commands:
// what an interrupt ends is its own to say (exec ends the step it is in,
// the proxy answers and records its calls), so its waits for the log's lock
// are not cut short (lockWaitsEnd).
func (f *Factory) handleInterrupts() { f.signals.ownEnd = true }

// lockWaitsEnd is what ends the waits of the logs the command opens for
// their lock: an interrupt, for a command that leaves interrupts to Main.
func (f *Factory) lockWaitsEnd() <-chan struct{} {
	if f.signals.ctx == nil || f.signals.ownEnd {
		return nil
	}
	return f.signals.ctx.Done()
}

// signalError is the cause of a context a signal ended, as
// signal.NotifyContext gives it: "interrupt signal received", which is
// context.Canceled too.
type signalError string

func (s signalError) Error() string        { return string(s) + " signal received" }
func (s signalError) Is(target error) bool { return target == context.Canceled }
