package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// resolveInDoubt reclaims effect id if it is a call in doubt: a person
// checked what happened to it, and it did not take effect (the proxy cannot
// say so for its client, as exec's --retry-in-doubt does). It fails the call
// back to pending, only while the owner judged gone still holds it (as
// lifecycle.Reclaim does), so that the next identical call runs it. done is
// false for an effect that is not executing: resolve goes on to its undo
// entry.
func resolveInDoubt(ctx context.Context, f *Factory, id uint64, opts *resolveOptions) (done bool, err error) {
	store, err := f.ExistingLog()
	if err != nil {
		return true, err
	}
	d, err := store.GetEffect(ctx, id)
	if errors.Is(err, model.ErrNotFound) {
		return false, nil // the undo step says so
	}
	if err != nil {
		return true, err
	}
	e := d.Effect
	if e.State != sm.Executing {
		return false, nil
	}
	l := e.Owner.LivenessAt(f.Now())
	switch l {
	case model.OwnerAlive, model.OwnerElsewhere:
		return true, fmt.Errorf("%w: effect %d is executing in %s, not in doubt: it ends when that call does", model.ErrInProgress, id, e.Owner)
	}
	expect := e.Owner
	if expect == nil {
		expect = &model.Owner{}
	}
	got, err := store.Fail(ctx, id, model.Change{Actor: f.Actor(opts.as), Error: "in doubt: " + e.Owner.Gone(l), Reason: opts.reason, ExpectOwner: expect, Resolve: true})
	if err != nil {
		return true, err
	}
	if opts.output != formatText {
		return true, writeObject(f.Out, opts.output, got)
	}
	again := "the same call runs it again"
	if got.Tier == sm.Irreversible {
		again += " once approved"
	}
	_, err = fmt.Fprintf(f.Out, "effect %d was in doubt (%s): %s; %s\n", id, e.Owner.Gone(l), paintState(f, string(got.State)), again)
	return true, err
}
