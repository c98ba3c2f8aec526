package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
)

// outage is a wait's count of looks in a row that could not reach the log's
// server: a follow or an approval's wait outlives a server's restart, and
// says on stderr when the server went and when it came back.
type outage struct {
	f     *Factory
	fails int
}

// retry tells whether err is the log's server out of reach, and if so
// waits before the next look; false for any other error, or once ctx ends.
func (o *outage) retry(ctx context.Context, err error) bool {
	if !errors.Is(err, model.ErrUnavailable) {
		return false
	}
	if o.fails == 0 {
		fmt.Fprintf(o.f.ErrOut, "undolog: %s; trying again until it answers (Ctrl-C stops)\n", textfmt.Escape(textfmt.OneLine(err.Error())))
	}
	o.fails++
	return effectlog.AfterUnavailable(ctx, o.fails-1) == nil
}

// ok records a look that reached the server.
func (o *outage) ok() {
	if o.fails > 0 {
		fmt.Fprintln(o.f.ErrOut, "undolog: the log's server answers again")
	}
	o.fails = 0
}
