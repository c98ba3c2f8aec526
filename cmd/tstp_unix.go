//go:build unix

package cmd

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/lifecycle"
)

// letGoOnStop makes a SIGTSTP (Ctrl-Z, `kill -TSTP`) let store's log go
// before this process stops, until ctx ends: a stopped process can neither
// write nor see that another waits, and a log it kept open (the proxy keeps
// it through a call and a moment after) would keep every other process out
// until it is continued. Once continued it takes the log up again on its
// next write. (SIGSTOP cannot be caught: a process stopped so keeps what it
// holds.)
func letGoOnStop(ctx context.Context, store effectlog.Log) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTSTP)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				resume := lifecycle.Suspend(store)
				syscall.Kill(syscall.Getpid(), syscall.SIGSTOP) // returns once continued
				if resume != nil {
					resume()
				}
			}
		}
	}()
}
