//go:build unix

package cmd

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// letGoOnStop makes a SIGTSTP (Ctrl-Z, `kill -TSTP`) let every log the
// command opened go before this process stops, until ctx ends: a stopped
// process can neither write nor see that another waits, and a log it held
// (a read or a compaction under way, a proxy's through a call and a moment
// after) would keep every other process out until it is continued. A read
// or compaction under way ends first; once continued, the process takes
// the log up again as it needs it. (SIGSTOP cannot be caught: a process
// stopped so keeps what it holds.)
func letGoOnStop(ctx context.Context, f *Factory) {
	ch, cont := make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTSTP)
	signal.Notify(cont, syscall.SIGCONT)
	go func() {
		defer signal.Stop(ch)
		defer signal.Stop(cont)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				var resumes []func()
				for _, log := range f.logs.all() {
					if resume := log.Suspend(); resume != nil {
						resumes = append(resumes, resume)
					}
				}
				select {
				case <-cont: // an earlier one
				default:
				}
				// kill may return before every thread has stopped: the logs
				// are taken up again once continued, not once it returns.
				syscall.Kill(syscall.Getpid(), syscall.SIGSTOP)
				select {
				case <-cont:
				case <-ctx.Done():
				}
				for _, resume := range resumes {
					resume()
				}
			}
		}
	}()
}
