package pgstore

import (
	"context"
	"testing"
	"time"
)

// A write of a quiet engine that carries the publish and then fails to
// commit leaves nothing to wait for: Close and SyncFeed do not wait on a
// publish of a write that was rolled back (they waited out
// closePublishWait, or their context, when it stayed counted).
func TestCarriedWriteThatFailsLeavesNothingToWaitFor(t *testing.T) {
	e := &Engine{}
	p := &e.pub
	p.writing(+1)
	if !p.carry(true) {
		t.Fatal("a quiet engine's write does not carry its publish")
	}
	p.mu.Lock()
	p.carried(false, false)
	p.mu.Unlock()
	p.writing(-1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := e.waitPublished(ctx); err != nil {
		t.Fatalf("waitPublished: %v (asked %d, done %d)", err, e.pub.asked, e.pub.done)
	}
}
