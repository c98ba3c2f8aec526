// Package saga owns the undo walk: it plans a session's compensations
// last-in-first-out (MakePlan), describes them for a person (the Describe
// functions), and runs them (Runner), commands and MCP calls, with retries and
// exponential backoff, recording every step in the effect log.
package saga

import (
	"errors"
	"fmt"

	"github.com/undolog/undolog/model"
)

// ErrCompensationFailed: the walk stopped at a compensation that failed for
// good (or awaits an operator); the session is halted.
var ErrCompensationFailed = errors.New("compensation failed")

// ErrInDoubt: the walk stopped at a compensation whose undo died (or was
// interrupted) mid-run, so it may or may not have taken effect; it runs again
// only with Runner.RetryInDoubt. Nothing was changed.
var ErrInDoubt = errors.New("compensation in doubt")

// ErrPlanChanged is Run's refusal when the session's plan is no longer the
// one a person confirmed (Runner.Confirmed): a call logged since, or a step
// another undo took. Nothing ran or changed.
var ErrPlanChanged = fmt.Errorf("%w: the session's undo plan changed since it was shown", model.ErrConflict)

// ErrNotHere is undo's refusal of a walk whose plan says a step cannot
// run where undo runs (Step.Problem: its directory or its MCP server's is
// not here, or no server was recorded): a compensation runs on the machine
// that runs undo, in the directory recorded with the call, so it would
// fail there, or act on what is here. Nothing ran or changed.
var ErrNotHere = errors.New("undo cannot run here")

// ErrStateElsewhere is undo's refusal of a session whose MCP server would
// start here on another state than the one its proxy ran it on: what
// locates that state (model.StateEnv) is set otherwise in this
// environment. Nothing ran or changed.
var ErrStateElsewhere = fmt.Errorf("%w: undo would start the session's MCP server on another state", model.ErrInvalidInput)
