package cmd

import (
	"errors"

	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/shellstep"
	sm "github.com/undolog/undolog/statemachine"
)

// Exit codes, documented in docs/output.md. They are undolog's contract with scripts.
const (
	ExitOK           = 0
	ExitError        = 1  // anything else: I/O, a damaged log, verify problems
	ExitUsage        = 2  // bad flags, arguments or input
	ExitNotFound     = 3  // no such effect, session or undo entry
	ExitInvalid      = 4  // invalid state transition (the spec's reason is printed), a second decision too
	ExitBusy         = 5  // another process held the log past the lock timeout
	ExitInProgress   = 6  // in progress or conflict: owner executing or awaiting approval
	ExitNotActive    = 7  // the session accepts no new effects
	ExitRejected     = 8  // the call was rejected by a person
	ExitCompensation = 9  // undo stopped: a compensation failed and needs a person
	ExitDenied       = 10 // the log's database refused the operation to its role

	// undolog proxy's own ends.
	ExitProxyUpstream    = 11              // the MCP server exited while the proxy served it (restart the proxy)
	ExitProxyInterrupted = ExitInterrupted // stopped by SIGINT or SIGTERM

	ExitInterrupted = 130 // a command stopped by SIGINT or SIGTERM
)

// Exit codes of undolog exec's own outcomes, chosen where commands rarely
// tread; the command's own code otherwise. 125, 126 and 127 mean what they
// mean for env, nohup and timeout (undolog failed; the command could not be
// run; not found); 124 is left alone, so that `timeout 10m undolog exec`
// tells its own timeout from ours.
const (
	ExitExecInDoubt    = 120 // the same call's owner died mid-run: --retry-in-doubt reclaims it
	ExitExecRejected   = 121 // the call was rejected by a person
	ExitExecTimedOut   = 122 // the approval request expired, or no decision within --approval-timeout
	ExitExecInProgress = 123 // the same call is executing elsewhere (a live owner), or another process took it up first
	ExitExecError      = 125 // undolog itself failed (usage, log busy, session not active, ...)
	ExitExecCannotRun  = 126 // the command was found but could not be run
	ExitExecNotFound   = 127 // the command was not found
)

// execEndingCodes are exec's exit codes for the ends of the call flow in
// which its command did not run.
var execEndingCodes = map[lifecycle.Ending]int{
	lifecycle.InDoubt:     ExitExecInDoubt,
	lifecycle.Rejected:    ExitExecRejected,
	lifecycle.Expired:     ExitExecTimedOut,
	lifecycle.Undecided:   ExitExecTimedOut,
	lifecycle.InProgress:  ExitExecInProgress,
	lifecycle.Taken:       ExitExecInProgress,
	lifecycle.Abandoned:   ExitExecError,
	lifecycle.Interrupted: ExitInterrupted,
}

// execExit is how exec exits once its call's flow has ended: with its
// command's code, run or replayed, or the code of the end that kept it from
// running, with the flow's text.
func execExit(end lifecycle.End, door lifecycle.Door, step *shellstep.Step) error {
	switch end.Ending {
	case lifecycle.Replay:
		code, err := shellstep.Replay(end.Call.Effect.Result, step.Out, step.ErrOut)
		if err != nil {
			return err
		}
		return exitWith(code)
	case lifecycle.Ran:
		return stepExit(step.Ran, end.Call.Effect.ID)
	}
	code, ok := execEndingCodes[end.Ending]
	if !ok {
		code = ExitExecError
	}
	return &exitError{code: code, msg: end.Text(door)}
}

// stepExit is how exec exits once step effect id's command ran (or did
// not start): with the command's code, or exec's own when it could not run.
func stepExit(r shellstep.Ran, id uint64) error {
	var start *shellstep.StartError
	switch {
	case errors.As(r.Err, &start):
		// As a shell says it: 127 not found, 126 found but not runnable.
		code := ExitExecCannotRun
		if start.NotFound {
			code = ExitExecNotFound
		}
		return &exitError{code: code, msg: start.Error()}
	case errors.Is(r.Err, shellstep.ErrNotStarted):
		return &exitError{code: ExitInterrupted, msg: r.Text(id)}
	case r.Err != nil:
		return r.Err
	case r.Text(id) != "":
		return &exitError{code: r.Code, msg: r.Text(id)}
	}
	return exitWith(r.Code)
}

func exitWith(code int) error {
	if code == 0 {
		return nil
	}
	return &exitError{code: code}
}

// usageError marks errors in how the command was called.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: sprintf(format, args...)} }

// exitError carries a chosen exit code with a message (or none, when the
// command already said what happened).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// ExitCode maps an error to the exit code scripts can rely on. It is the one
// place where errors become codes.
func ExitCode(err error) int {
	var ee *exitError
	var ue *usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue), errors.Is(err, model.ErrInvalidInput), errors.Is(err, sm.ErrUnknownName):
		return ExitUsage
	case errors.Is(err, model.ErrNotFound):
		return ExitNotFound
	case errors.Is(err, sm.ErrInvalidStateTransition):
		return ExitInvalid
	case errors.Is(err, model.ErrBusy):
		return ExitBusy
	case errors.Is(err, model.ErrInProgress), errors.Is(err, model.ErrConflict):
		return ExitInProgress
	case errors.Is(err, model.ErrSessionNotActive):
		return ExitNotActive
	case errors.Is(err, model.ErrDenied):
		return ExitDenied
	}
	return ExitError
}
