package cmd

import (
	"errors"
	"fmt"
	"strings"

	"github.com/undolog/undolog/filesnap"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/saga"
	"github.com/undolog/undolog/shellstep"
	sm "github.com/undolog/undolog/statemachine"
)

// Exit codes: undolog's contract with scripts. What each means is said once,
// in exitCodes, execExitCodes and proxyExitCodes, which the commands' help
// and the command reference (docs/cli) list.
const (
	ExitOK           = 0
	ExitError        = 1
	ExitUsage        = 2
	ExitNotFound     = 3
	ExitInvalid      = 4
	ExitBusy         = 5
	ExitInProgress   = 6
	ExitNotActive    = 7
	ExitRejected     = 8
	ExitCompensation = 9
	ExitDenied       = 10

	ExitProxyUpstream    = 11
	ExitFilesChanged     = filesnap.RestoreRefusedExit
	ExitAgentDecision    = 13
	ExitUndoNotHere      = 14
	ExitProxyInterrupted = ExitInterrupted

	ExitInterrupted = 130
)

// undolog exec's own outcomes, chosen where commands rarely tread; the
// command's own code otherwise. 125, 126 and 127 mean what they mean for
// env, nohup and timeout; 124 is left alone, so that `timeout 10m undolog
// exec` tells its own timeout from ours.
const (
	ExitExecInDoubt    = 120
	ExitExecRejected   = 121
	ExitExecTimedOut   = 122
	ExitExecInProgress = 123
	ExitExecError      = 125
	ExitExecCannotRun  = 126
	ExitExecNotFound   = 127
)

// undolog hook's: Claude Code blocks a call whose PreToolUse hook exits 2
// (and shows its stderr), and runs it on any other failure; so every
// answer of PreToolUse, a denial included, is exit 0 and JSON.
const ExitHookUnreadable = 2

// exitCode is an exit code and what it means.
type exitCode struct {
	code    int
	meaning string
}

// exitCodes are what every command's exit codes mean (exec's and the
// proxy's own aside); the root's help lists them.
var exitCodes = []exitCode{
	{ExitOK, "success; --follow (list, approvals) ended by Ctrl-C or SIGTERM, which is how it ends"},
	{ExitError, "any other error: I/O, a damaged log, verify found problems, undo cancelled, a PostgreSQL server that is down or refuses the connection"},
	{ExitUsage, "usage error: a bad flag, argument, id, state or tier name, invalid JSON, a misspelt command (with a suggestion)"},
	{ExitNotFound, "not found: no such effect, session or undo entry; no log at the address for a command that acts on what it holds"},
	{ExitInvalid, "invalid state transition (the spec's reason is printed), also a second decision on an effect"},
	{ExitBusy, "log busy: another process held the log past the lock timeout; nothing was written"},
	{ExitInProgress, "in progress or conflict: the call's owner is executing or awaiting approval, another undo runs the compensation, a session of that name exists, a decision on a request that timed out"},
	{ExitNotActive, "session not active: it takes no new effects and no decisions"},
	{ExitRejected, "the call was rejected by a person"},
	{ExitCompensation, "undo stopped: a compensation failed for good (fix it, undolog resolve, undo again) or is in doubt (check, then undo --retry-in-doubt)"},
	{ExitDenied, "denied: the shared log's database refused the operation to undolog's role; nothing was written"},
	{ExitProxyUpstream, "proxy: the MCP server exited while the proxy served it: restart the proxy"},
	{ExitFilesChanged, "files restore: a file the call changed was changed since by someone else, the call changed what a snapshot does not hold (named), or its after-state was never recorded: nothing was restored, and undo does not try it again"},
	{ExitAgentDecision, "refused: approve, reject, resolve or session resume run from inside the coding agent (Claude Code's Bash) whose session the call is in; nothing was written"},
	{ExitUndoNotHere, "undo: a compensation cannot run here (its plan says WILL FAIL: its directory is not on this machine): nothing changed; run undo where the call ran, or --anyway"},
	{ExitInterrupted, "interrupted by SIGINT or SIGTERM: what the command waited for ended (undo: the step it ran is in doubt)"},
}

// execExitIntro says why exec has codes of its own where other commands
// share theirs: a code below 120 is its command's, and one of the shared
// codes would read as the command's (a build that exits 7 is no session
// that is not active).
const execExitIntro = "Exit codes: the command's own, or undolog exec's, which are apart from the other commands' " +
	"because exec passes its command's code on: a refusal that another command exits 2 to 10 for " +
	"(a bad flag, the session not active, the log busy, denied) is 125 here, the message saying which; " +
	"a rejection is 121, not 8 (124 is left to timeout(1)):"

// execExitCodes are exec's own exit codes; otherwise it exits with its
// command's.
var execExitCodes = []exitCode{
	{ExitExecInDoubt, "in doubt: the same call's owner died, or its lease ran out (see --retry-in-doubt)"},
	{ExitExecRejected, "rejected by a person"},
	{ExitExecTimedOut, "approval timed out: the request expired, or no decision within --approval-timeout"},
	{ExitExecInProgress, "in progress elsewhere: a live owner, or one on another machine whose lease holds (never overtaken), or another process took the call up first"},
	{ExitExecError, "undolog's own error: usage (a bad $UNDOLOG_LEASE too), the log busy or damaged, the session not active or its request closed while waiting, the call first logged under another tier, denied to the database role"},
	{ExitExecCannotRun, "the command could not be run"},
	{ExitExecNotFound, "the command was not found"},
	{ExitInterrupted, "interrupted while waiting for approval or before the command started"},
}

// proxyExitCodes are how the proxy ends.
var proxyExitCodes = []exitCode{
	{ExitOK, "the client closed its input"},
	{ExitError, "the MCP server could not be started or reached at the start"},
	{ExitUsage, "bad flags or a bad policy"},
	{ExitProxyUpstream, "the MCP server exited (each call in flight got an error first): restart the proxy"},
	{ExitProxyInterrupted, "SIGINT or SIGTERM (--listen too)"},
}

// hookExitCodes are undolog hook's.
var hookExitCodes = []exitCode{
	{ExitOK, "answered on stdout: PreToolUse's allow, deny or defer (any error of undolog's denies), or nothing to say"},
	{ExitError, "PostToolUse, PostToolUseFailure: the call's end could not be recorded (stderr says why; the agent goes on)"},
	{ExitHookUnreadable, "the input is not a hook event: Claude Code blocks the call and shows stderr"},
}

// exitCodesHelp is a help text's list of codes, under intro: a list as
// markdown reads it too (the command reference is the help as markdown).
func exitCodesHelp(intro string, codes []exitCode) string {
	var b strings.Builder
	b.WriteString(intro + "\n\n")
	for _, c := range codes {
		fmt.Fprintf(&b, "  - %d: %s\n", c.code, c.meaning)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

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

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

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
	case errors.Is(err, saga.ErrNotHere):
		return ExitUndoNotHere
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
