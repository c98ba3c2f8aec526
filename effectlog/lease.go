package effectlog

import (
	"context"
	"fmt"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// RenewLease moves the lease of what owner runs under effect id to until:
// the effect while it executes, or its compensation while compensating,
// held by owner (model.Owner.Same; the lease recorded may be any). Anything
// else (the effect moved on, reclaimed by another process) is
// model.ErrInProgress naming who holds it now, and nothing is written.
//
// A renewal is no move: it appends no history record (so no change-feed
// entry), and the history's hashes never cover an owner (see
// effectContent), so verify finds the log as sound as before.
func (s *Service) RenewLease(ctx context.Context, id uint64, owner *model.Owner, until time.Time) error {
	if owner == nil {
		return fmt.Errorf("%w: a lease needs an owner", model.ErrInvalidInput)
	}
	return s.update(ctx, func(tx storage.WriteTx) error {
		e, err := tx.Effect(id)
		if err != nil {
			return err
		}
		if e.State == sm.Executing && e.Owner.Same(owner) {
			e.Owner = e.Owner.WithLease(until)
			return tx.PutEffect(&e, e.State)
		}
		u, err := tx.Undo(e.Session, e.ID, &e)
		if err != nil {
			return err
		}
		if u != nil && u.State == sm.EntryCompensating && u.Owner.Same(owner) {
			u.Owner = u.Owner.WithLease(until)
			return tx.PutUndo(u)
		}
		holder := e.Owner
		if u != nil && u.State == sm.EntryCompensating {
			holder = u.Owner
		}
		return fmt.Errorf("%w: effect %d is %s, held by %s, no longer by %s: its lease was not renewed", model.ErrInProgress, id, e.State, holder, owner)
	})
}
