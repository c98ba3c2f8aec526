package proxy

import (
	"fmt"

	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
)

// inDoubt is the answer to a repeat of a call left executing by an owner
// that is gone (died, or its lease lapsed): it may or may not have taken
// effect, and only a person can say which.
func (p *Proxy) inDoubt(call *lifecycle.Call) string {
	e := call.Effect
	gone := fmt.Sprintf("its owner (%s) is gone", e.Owner)
	switch {
	case call.Liveness == model.OwnerLapsed:
		gone = "its owner's " + e.Owner.Gone(call.Liveness)
	case e.Owner == nil:
		gone = "no owner is recorded"
	}
	return fmt.Sprintf("undolog: the same call (effect %d) is in doubt: %s; it may or may not have taken effect: %s", e.ID, gone, p.resolveHint(e.ID))
}

// resolveHint names what a person does about a call in doubt.
func (p *Proxy) resolveHint(id uint64) string {
	return fmt.Sprintf("check, then run `%s resolve %d --reason \"what you found\"` and call it again to run it again, or undo the session", p.cli(), id)
}
