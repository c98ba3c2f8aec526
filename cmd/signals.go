package cmd

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// catchAfter is how long a command runs before it catches signals.
//
// Catching one costs the process two threads of the Go runtime's, about
// half a millisecond: a tenth of a quick command such as intercept or
// approve, which ends well before this. Until then SIGINT and SIGTERM end
// the process as a kill would (the shell reports 128 plus the signal), which
// every write survives (an unfinished one is not acknowledged), and Ctrl-Z
// is ignored, so that the process is never stopped holding the log. A
// command that waits, or starts another command (child.BeforeStart), catches
// them at once.
const catchAfter = 20 * time.Millisecond

// catchSignals makes SIGINT and SIGTERM end the command's context (what it
// waits for ends, and it exits 130; a second signal then ends the process at
// once, as it would uncaught), and Ctrl-Z let its logs go before the
// process stops (letGoOnStop). Only the first call does anything; a
// Factory not made by Main catches nothing.
func (f *Factory) catchSignals() {
	if f.interrupt == nil {
		return
	}
	f.catchOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		go func() {
			select {
			case sig := <-ch:
				// A second one ends the process as it would have ended
				// uncaught: a way out of whatever the first did not end.
				signal.Stop(ch)
				f.interrupt(signalError(sig.String()))
			case <-f.ctx.Done():
			}
		}()
		letGoOnStop(f.ctx, f)
	})
}

// handleInterrupts is for a command that waits, or runs other commands: it
// catches signals at once, and what an interrupt ends is its own to say
// (exec ends the step it is in, the proxy answers and records its calls),
// so its waits for the log's lock are not cut short (lockWaitsEnd).
func (f *Factory) handleInterrupts() {
	f.ownInterrupts = true
	f.catchSignals()
}

// lockWaitsEnd is what ends the waits of the logs the command opens for
// their lock: an interrupt, for a command that leaves interrupts to Main.
func (f *Factory) lockWaitsEnd() <-chan struct{} {
	if f.ctx == nil || f.ownInterrupts {
		return nil
	}
	return f.ctx.Done()
}

// signalsFor returns the context of a command run by Main, which a signal
// ends once caught, and what ends it when the command returns.
func signalsFor(f *Factory) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	f.ctx, f.interrupt = ctx, cancel
	ignoreStops()
	catch := time.AfterFunc(catchAfter, f.catchSignals)
	return ctx, func() { catch.Stop(); cancel(nil) }
}

// signalError is the cause of a context a signal ended, as
// signal.NotifyContext gives it: "interrupt signal received", which is
// context.Canceled too.
type signalError string

func (s signalError) Error() string        { return string(s) + " signal received" }
func (s signalError) Is(target error) bool { return target == context.Canceled }
