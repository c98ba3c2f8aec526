package effectlog

import (
	"context"
	"time"

	"github.com/undolog/undolog/storage"
)

// WaitChange returns once the change feed may hold a change after position
// after: when the engine hears of one, else once poll has passed; on an
// engine that hears, after the log's Fallback (or poll, if longer) at most.
func (s *Service) WaitChange(ctx context.Context, after uint64, poll time.Duration) error {
	n, ok := s.engine.(storage.Notifier)
	if !ok || s.fallback < 0 {
		return pause(ctx, poll)
	}
	wait, cancel := context.WithTimeout(ctx, max(poll, s.fallback))
	defer cancel()
	n.WaitChange(wait, after) // nil or the fallback's end: either way, look
	return ctx.Err()
}

// AfterUnavailable waits before a wait (a follow, an approval's wait) looks
// at the log again after its server could not be reached
// (model.ErrUnavailable): a server restarting is back within seconds, and
// the wait goes on where it was. It waits 0.1 s after the first failed look
// in a row, doubling up to 2 s; it returns ctx's error if ctx ends first.
func AfterUnavailable(ctx context.Context, failures int) error {
	return pause(ctx, min(100*time.Millisecond<<min(failures, 5), 2*time.Second))
}

// pause waits d, or returns ctx's error once ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
