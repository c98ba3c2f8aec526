package lifecycle

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
)

// Renewal keeps an owner's lease on one effect (its run or its
// compensation) from running out while its process works on it: another
// host judges an owner whose lease ran out gone (model.OwnerLapsed).
type Renewal struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	lost error
}

// KeepLease renews owner's lease on effect id to lease from now, every
// third of lease, until Stop. A renewal that fails (the log briefly
// unreachable, busy) is tried again at the next tick, silently: the call
// goes on, and only a lease left unrenewed for a whole lease lets another
// host take it. One refused because the effect is no longer the owner's
// (reclaimed by another host) ends the renewals; the owner learns it when
// it records the end, which expects it still to hold the effect.
func KeepLease(log effectlog.Log, id uint64, owner *model.Owner, lease time.Duration, now func() time.Time) *Renewal {
	if lease <= 0 {
		lease = model.DefaultLease
	}
	if now == nil {
		now = time.Now
	}
	r := &Renewal{stop: make(chan struct{}), done: make(chan struct{})}
	owner = owner.Identity()
	go func() {
		defer close(r.done)
		every := lease / 3
		tick := time.NewTicker(every)
		defer tick.Stop()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-r.stop: // a renewal under way when Stop comes is cut short
				cancel()
			case <-ctx.Done():
			}
		}()
		for {
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
			try, done := context.WithTimeout(ctx, every)
			err := log.RenewLease(try, id, owner, now().Add(lease))
			done()
			if errors.Is(err, model.ErrInProgress) || errors.Is(err, model.ErrNotFound) {
				r.mu.Lock()
				r.lost = err
				r.mu.Unlock()
				return
			}
		}
	}()
	return r
}

// Stop ends the renewals and waits for the one under way. It returns why
// they ended early, if the effect was found no longer the owner's. A nil
// Renewal stops at once.
func (r *Renewal) Stop() error {
	if r == nil {
		return nil
	}
	r.once.Do(func() { close(r.stop) })
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}
