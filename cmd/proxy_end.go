package cmd

import (
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/undolog/undolog/proxy"
)

// proxyEnd gives the proxy's early ends their exit codes: a client that
// restarts dead servers sees the proxy exit when its server does.
func proxyEnd(err error) error {
	switch {
	case errors.Is(err, proxy.ErrUpstreamExited):
		return &exitError{code: ExitProxyUpstream, msg: err.Error()}
	case errors.Is(err, proxy.ErrInterrupted):
		return &exitError{code: ExitProxyInterrupted, msg: err.Error()}
	}
	return err
}

// ignoreBrokenPipe keeps a client that died from killing the proxy with
// SIGPIPE when it answers: the write fails, and the proxy ends as it should
// (records what it runs, stops the server). Notify, not Ignore: an ignored
// signal would stay ignored in the server it starts.
func ignoreBrokenPipe() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}
