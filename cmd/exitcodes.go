package cmd

import (
	"errors"

	"github.com/undolog/undolog/model"
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
