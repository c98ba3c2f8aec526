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
		t := time.NewTimer(poll)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	wait, cancel := context.WithTimeout(ctx, max(poll, s.fallback))
	defer cancel()
	n.WaitChange(wait, after) // nil or the fallback's end: either way, look
	return ctx.Err()
}
