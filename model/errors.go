package model

import "errors"

// Sentinel errors. Every error the package returns matches one of these (or
// statemachine.ErrInvalidStateTransition) with errors.Is, and its message is
// one line that names what was wrong.
var (
	// ErrNotFound: no effect, session or undo entry with that id.
	ErrNotFound = errors.New("not found")
	// ErrBusy: another process held the log for longer than the lock timeout.
	ErrBusy = errors.New("log busy")
	// ErrInProgress: the call's owner effect is executing or awaiting a decision.
	ErrInProgress = errors.New("in progress")
	// ErrAwaitsApproval: an irreversible effect cannot start before a person
	// approves it; it comes with ErrInProgress, and callers add how to.
	ErrAwaitsApproval = errors.New("awaits approval")
	// ErrSessionNotActive: the session no longer accepts new effects.
	ErrSessionNotActive = errors.New("session not active")
	// ErrCorrupt: the file is not an undolog log, or is damaged or truncated.
	ErrCorrupt = errors.New("not a valid undolog log")
	// ErrNewerSchema: the log was written by a newer undolog.
	ErrNewerSchema = errors.New("log from a newer version")
	// ErrInvalidInput: a request was malformed (bad JSON, empty name, ...).
	ErrInvalidInput = errors.New("invalid input")
	// ErrInDoubt: a write failed in a way that may or may not have left it in
	// the log.
	ErrInDoubt = errors.New("write in doubt")
	// ErrConflict: the request contradicts the log (a session name taken, a
	// step the effect's record rules out, such as replayed by hand).
	ErrConflict = errors.New("conflict")
	// ErrDenied: the log's database refused the operation to the role it
	// authenticated (not a member of the group that may do it).
	ErrDenied = errors.New("denied")
	// ErrUnavailable: the log's server could not be reached, or it ended the
	// connection (shut down, restarted): nothing was written (a commit whose
	// answer was lost is ErrInDoubt). A wait tries again; a command fails.
	ErrUnavailable = errors.New("log unavailable")
)
