package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/child"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// Exit codes of undolog exec's own outcomes, chosen where commands rarely
// tread; the command's own code otherwise. 125, 126 and 127 mean what they
// mean for env, nohup and timeout (undolog failed; the command could not be
// run; not found); 124 is left alone, so that `timeout 10m undolog exec`
// tells its own timeout from ours.
const (
	ExitExecInDoubt    = 120 // the same call's owner died mid-run: --retry-in-doubt reclaims it
	ExitExecRejected   = 121 // the call was rejected by a person
	ExitExecTimedOut   = 122 // the approval request expired
	ExitExecInProgress = 123 // the same call is executing elsewhere (a live owner)
	ExitExecError      = 125 // undolog itself failed (usage, log busy, session not active, ...)
	ExitExecCannotRun  = 126 // the command was found but could not be run
	ExitExecNotFound   = 127 // the command was not found
)

// captureLimit bounds how much of each output stream is kept in the log.
const captureLimit = 1 << 20

type execOptions struct {
	session         string
	tier            string
	tool            string
	key             string
	undo            string
	approvalTimeout time.Duration
	quiet           bool
	retryInDoubt    bool
	redact          []string
	as              string
}

// ExecResult is the result snapshot of a command run by exec. Output that is
// not UTF-8 is kept in the *_base64 fields instead, so replay is byte for byte.
type ExecResult struct {
	ExitCode        int    `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutBase64    []byte `json:"stdout_base64,omitempty"`
	StderrBase64    []byte `json:"stderr_base64,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	DurationMS      int64  `json:"duration_ms"`
}

func newCmdExec(f *Factory) *cobra.Command {
	opts := &execOptions{}
	c := &cobra.Command{
		Use:   "exec --session S [flags] -- CMD [ARGS...]",
		Short: "Run a command exactly once, behind approval, with its undo recorded",
		Long: `Run a command as one effect of the session. The call is the argv and the working
directory (not its standard input, which passes through: --key tells calls of
other input apart). It is registered (with its --undo command) before it runs; its
exit code, stdout and stderr (up to 1 MiB each) are recorded.

  - A repeat of a call that succeeded does not run again: its output is replayed
    byte for byte and its exit code returned.
  - A call that failed (non-zero exit) is retried by the next identical exec.
  - An irreversible call (the default without --undo: fail closed) waits for
    'undolog approve ID' from any shell, and does not run if rejected or expired.
  - While the command runs, its owner (host, pid, start) holds a lease of
    $UNDOLOG_LEASE (default 30s) that exec renews every third of it. The same call
    from another machine is in progress (123) while the lease holds, and in doubt
    (120) once it ran out unrenewed; on this machine the owner's pid decides.

Exit codes: the command's own, or 120 in doubt (owner died, or its lease ran out; see
--retry-in-doubt), 121 rejected, 122 approval timed out (the request expired, or no
decision within --approval-timeout), 123 in progress elsewhere (a live owner, or one on
another machine whose lease holds: never overtaken), 125 undolog error (usage included;
a bad $UNDOLOG_LEASE), 126 the command could not be run, 127 not found, 130
interrupted while waiting for approval or before the command started. 124 is left to
timeout(1).`,
		Example: `  undolog exec --session $RUN --undo 'kubectl rollout undo deploy/api' -- kubectl apply -f api.yaml
  undolog exec --session $RUN --tier irreversible -- ./release.sh v1.2.3
  undolog exec --session $RUN --tier safe -- kubectl get pods`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &exitError{code: ExitExecError, msg: "exec needs a command to run: undolog exec --session S -- CMD [ARGS...]"}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			f.handleInterrupts() // it waits, or runs other commands
			var err error
			if c.Flags().Changed("undo") && strings.TrimSpace(opts.undo) == "" {
				// An unset variable in a script (--undo "$UNDO") would make the
				// step irreversible and wait an hour for an approval.
				err = usagef("--undo is empty: give the command that undoes this one, or leave the flag out (the call is then irreversible)")
			} else {
				err = runExec(c.Context(), f, opts, args)
			}
			var ee *exitError
			if err != nil && !errors.As(err, &ee) {
				return &exitError{code: ExitExecError, msg: err.Error()}
			}
			return err
		},
	}
	c.Flags().SetInterspersed(false) // everything after CMD belongs to CMD
	c.Flags().StringVar(&opts.session, "session", "", "session id (default $UNDOLOG_SESSION; created if new)")
	c.Flags().StringVar(&opts.tier, "tier", "", "compensable, irreversible or safe (default: compensable with --undo, else irreversible)")
	c.Flags().StringVar(&opts.tool, "tool", "", "tool name (default: the command's base name)")
	c.Flags().StringVar(&opts.key, "key", "", "idempotency key: the same command with another key is a new call")
	c.Flags().StringVar(&opts.undo, "undo", "", "command that undoes this one, run without a shell by 'undolog undo' ('ARGV...' or a JSON array)")
	durationVar(c.Flags(), &opts.approvalTimeout, "approval-timeout", time.Hour, "irreversible: give up waiting for approval after this long")
	c.Flags().BoolVarP(&opts.quiet, "quiet", "q", false, "no notes on stderr about replays and waiting")
	c.Flags().BoolVar(&opts.retryInDoubt, "retry-in-doubt", false, "reclaim a call whose owner process died mid-run, or whose lease on another machine ran out (fail it, then run it)")
	c.Flags().StringArrayVar(&opts.redact, "redact", nil, "keep matching fields out of the log: a glob over dotted paths of the call (argv.3) and result (stdout); repeatable")
	c.Flags().StringVar(&opts.as, "as", "", "actor recorded in history (default $UNDOLOG_ACTOR, else user@host)")
	// exec's own errors, usage included, are 125: the command's codes are the rest.
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: ExitExecError, msg: fmt.Sprintf("%v (see '%s --help')", err, c.CommandPath())}
	})
	return c
}

func (o *execOptions) note(f *Factory, format string, args ...any) {
	if !o.quiet {
		fmt.Fprintln(f.ErrOut, "undolog: "+textfmt.Escape(fmt.Sprintf(format, args...)))
	}
}

func runExec(ctx context.Context, f *Factory, opts *execOptions, argv []string) error {
	if opts.session == "" {
		opts.session = f.Getenv("UNDOLOG_SESSION")
	}
	tier := sm.Irreversible
	if opts.undo != "" {
		tier = sm.Compensable
	}
	if opts.tier != "" {
		t, err := sm.ParseTier(opts.tier)
		if err != nil {
			return err
		}
		tier = t
	}
	if tier != sm.Safe && opts.session == "" {
		return usagef("exec needs --session (or $UNDOLOG_SESSION)")
	}
	if tier == sm.Safe {
		// Not logged: it needs no session.
		if opts.undo != "" {
			return usagef("--undo is for compensable calls; a safe call is not logged")
		}
		signals := make(chan os.Signal, 2)
		signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(signals)
		code, _, err := runCommand(ctx, f, argv, nil, nil, signals)
		if err != nil {
			return err
		}
		return exitWith(code)
	}
	if opts.tool == "" {
		opts.tool = filepath.Base(argv[0])
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	// The call is recorded as JSON text, where bytes that are not UTF-8
	// would all become U+FFFD: two commands would be one call, and the
	// second would get the first's output replayed.
	for i, a := range append([]string{cwd}, argv...) {
		if !utf8.ValidString(a) {
			what := fmt.Sprintf("argument %d of the command", i-1) // 0: the command's name
			if i == 0 {
				what = "the working directory"
			}
			return usagef("%s is not valid UTF-8 (%q): undolog records a call as text, and cannot tell it from another", what, a)
		}
	}
	args, _ := json.Marshal(map[string]any{"argv": argv, "cwd": cwd})
	req := effectlog.InterceptRequest{Session: opts.session, Tool: opts.tool, Tier: tier, Args: args, Key: opts.key,
		ApprovalTimeout: opts.approvalTimeout, CreateSession: true, Actor: f.Actor(opts.as), Redact: opts.redact}
	if opts.undo != "" {
		if tier != sm.Compensable {
			return usagef("--undo is for compensable calls; this one is %s", tier)
		}
		undo, err := splitArgv(opts.undo)
		if err != nil {
			return err
		}
		req.Compensation = &model.Compensation{Kind: model.CompensationCommand, Argv: undo, Dir: cwd}
	}
	lease, err := f.Lease()
	if err != nil {
		return err
	}
	store := f.Log()
	lc := &lifecycle.Lifecycle{Log: store, Now: f.Now, Lease: lease, Unavailable: func(err error) {
		if err != nil {
			opts.note(f, "%s; still waiting, trying again until it answers", textfmt.OneLine(err.Error()))
		} else {
			opts.note(f, "the log's server answers again")
		}
	}}
	call, err := lc.Intercept(ctx, req)
	if err != nil {
		return err
	}
	e := call.Effect
	switch call.Verdict {
	case lifecycle.Replayed:
		opts.note(f, "replayed effect %d (replay of %d): %s did not run again", e.ID, *e.ReplayOf, opts.tool)
		return replayOutput(f, e.Result)
	case lifecycle.Rejected:
		return rejection(ctx, store, e.ID)
	case lifecycle.InProgress, lifecycle.InDoubt:
		if err := reclaimInDoubt(ctx, f, lc, opts, call); err != nil {
			return err
		}
	}
	if call.NeedsDecision() { // new, retried, reclaimed, or awaiting a decision: wait for it
		if err := waitForApproval(ctx, f, lc, opts, call); err != nil {
			return err
		}
	}
	return runEffect(ctx, f, lc, call, argv)
}

// reclaimInDoubt handles a call whose owner is executing: a live owner (on
// another host: one whose lease holds) is never overtaken; a dead one's
// effect, or one whose lease lapsed, is in doubt, and --retry-in-doubt fails
// it back to pending so that this call can run it.
func reclaimInDoubt(ctx context.Context, f *Factory, lc *lifecycle.Lifecycle, opts *execOptions, call *lifecycle.Call) error {
	e := call.Effect
	switch call.Liveness {
	case model.OwnerElsewhere:
		lease := ""
		if !e.Owner.LeaseUntil.IsZero() {
			lease = ", lease until " + e.Owner.LeaseUntil.UTC().Format(time.RFC3339Nano)
		}
		return &exitError{code: ExitExecInProgress, msg: fmt.Sprintf("effect %d is executing on %s (pid %d%s)", e.ID, e.Owner.Host, e.Owner.PID, lease)}
	case model.OwnerLapsed:
		if !opts.retryInDoubt {
			return &exitError{code: ExitExecInDoubt, msg: fmt.Sprintf("effect %d is in doubt: its owner's %s; it may or may not have taken effect: check, then rerun with --retry-in-doubt", e.ID, e.Owner.Gone(call.Liveness))}
		}
	case model.OwnerAlive:
		return &exitError{code: ExitExecInProgress, msg: fmt.Sprintf("effect %d is executing (pid %d, since %s)", e.ID, e.Owner.PID, e.Owner.StartedAt.Format(time.RFC3339))}
	case model.OwnerNone:
		if !opts.retryInDoubt {
			return &exitError{code: ExitExecInDoubt, msg: fmt.Sprintf("effect %d is executing with no recorded owner: in doubt; check what happened, then rerun with --retry-in-doubt", e.ID)}
		}
	default:
		if !opts.retryInDoubt {
			return &exitError{code: ExitExecInDoubt, msg: fmt.Sprintf("effect %d is in doubt, owner process gone (pid %d on %s died mid-run); it may or may not have taken effect: check, then rerun with --retry-in-doubt", e.ID, e.Owner.PID, e.Owner.Host)}
		}
	}
	err := lc.Reclaim(ctx, call, "reclaimed with --retry-in-doubt")
	if lifecycle.TakenMeanwhile(err) {
		return &exitError{code: ExitExecInProgress, msg: fmt.Sprintf("effect %d was reclaimed by another process: %v", e.ID, err)}
	}
	if err != nil {
		return err
	}
	opts.note(f, "effect %d was in doubt (%s); running it again", e.ID, e.Owner.Gone(call.Liveness))
	return nil
}

// waitForApproval waits until the effect is approved (nil), rejected or
// expired (exit 121 or 122), or the wait is interrupted.
func waitForApproval(ctx context.Context, f *Factory, lc *lifecycle.Lifecycle, opts *execOptions, call *lifecycle.Call) error {
	e := call.Effect
	// --approval-timeout bounds this wait even on a request opened before
	// (by an earlier run, or reopened after a failure) that expires later.
	w, err := lc.Wait(ctx, call, opts.approvalTimeout, func(a lifecycle.Announce) {
		expiry := ""
		switch {
		case a.Expires && a.ExpiresIn <= a.WaitsFor:
			expiry = " (expires in " + compactDuration(roundSecond(a.ExpiresIn)) + ")"
		case a.Expires: // a request an earlier run left open outlasts this wait
			expiry = " (expires in " + compactDuration(roundSecond(a.ExpiresIn)) + "; waiting " + compactDuration(roundSecond(a.WaitsFor)) + ")"
		}
		opts.note(f, "effect %d (%s, irreversible) awaits approval%s: %s approve %d", e.ID, e.Tool, expiry, f.CLI(), e.ID)
	})
	if err != nil {
		return err
	}
	switch w.Outcome {
	case lifecycle.Approved:
		return nil
	case lifecycle.Refused:
		return rejection(ctx, lc.Log, e.ID)
	case lifecycle.Taken:
		return &exitError{code: ExitExecInProgress, msg: fmt.Sprintf("effect %d was taken by another process (%s)", e.ID, w.Detail.Effect.State)}
	case lifecycle.Abandoned:
		state := "no longer active"
		if sess, err := lc.Log.GetSession(ctx, e.Session); err == nil {
			state = "is " + string(sess.State)
		}
		return &exitError{code: ExitExecError, msg: fmt.Sprintf("effect %d: session %q %s and its approval request was closed; the command did not run", e.ID, e.Session, state)}
	case lifecycle.TimedOut:
		return &exitError{code: ExitExecTimedOut, msg: fmt.Sprintf("effect %d: no decision within --approval-timeout %s; the command did not run (its approval request stays open: %s approve %d)",
			e.ID, opts.approvalTimeout, f.CLI(), e.ID)}
	}
	return &exitError{code: 130, msg: fmt.Sprintf("stopped waiting; effect %d still awaits approval: the same exec waits for it again (and runs once it is approved), or %s reject %d", e.ID, f.CLI(), e.ID)}
}

// roundSecond rounds a time left to the nearest second: a request of 30m
// read a moment after it opened has 29m59.99s left, which reads "30m".
func roundSecond(d time.Duration) time.Duration { return d.Round(time.Second) }

func rejection(ctx context.Context, store effectlog.Log, id uint64) error {
	d, err := store.GetEffect(ctx, id)
	if err != nil {
		return err
	}
	if a := d.Approval; a != nil && a.Outcome == model.ApprovalTimedOut {
		return &exitError{code: ExitExecTimedOut, msg: fmt.Sprintf("effect %d: the approval request expired; the command did not run", id)}
	}
	who := ""
	if a := d.Approval; a != nil {
		who = " by " + a.DecidedBy + reasonSuffix(a.Decision)
	}
	return &exitError{code: ExitExecRejected, msg: fmt.Sprintf("effect %d was rejected%s; the command did not run", id, who)}
}

// runEffect starts the effect (unless its intercept did), runs the command,
// and commits or fails it.
func runEffect(ctx context.Context, f *Factory, lc *lifecycle.Lifecycle, call *lifecycle.Call, argv []string) error {
	id := call.Effect.ID
	if ctx.Err() != nil && call.Effect.State != sm.Executing {
		// Interrupted before its start: the effect is left as it is (an
		// approval is for the run that has not happened), and a repeat
		// runs it.
		return &exitError{code: 130, msg: fmt.Sprintf("interrupted before the command ran; effect %d was not started: the same exec runs it", id)}
	}
	if err := lc.Start(ctx, call); err != nil {
		if errors.Is(err, sm.ErrInvalidStateTransition) {
			return &exitError{code: ExitExecInProgress, msg: fmt.Sprintf("effect %d was started by another process", id)}
		}
		return err
	}
	// From here on an interrupt reaches the command; one that came before
	// (while the log was busy) has ended ctx, or ends it at once.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	if ctx.Err() != nil {
		// Interrupted while the log was busy, before the command started:
		// it does not start, and a repeat runs it.
		msg := "interrupted before the command ran"
		if err := lc.Fail(ctx, call, msg); err != nil {
			return fmt.Errorf("%s but recording it failed; effect %d is in doubt: %w", msg, id, err)
		}
		return &exitError{code: 130, msg: fmt.Sprintf("%s; effect %d is pending", msg, id)}
	}
	stdout, stderr := &capture{limit: captureLimit}, &capture{limit: captureLimit}
	began := time.Now()
	code, interrupted, runErr := runCommand(ctx, f, argv, stdout, stderr, signals)
	if runErr != nil {
		if err := lc.Fail(ctx, call, runErr.Error()); err != nil {
			return err
		}
		return runErr
	}
	// A command that an interrupt reached but that exited 0 did its work:
	// it is committed like any other.
	if code != 0 {
		msg := fmt.Sprintf("exit status %d", code)
		if interrupted != nil {
			msg = fmt.Sprintf("interrupted by %v (exit status %d)", interrupted, code)
		}
		if err := lc.Fail(ctx, call, msg); err != nil {
			return fmt.Errorf("the command ended (%s) but recording it failed; effect %d is in doubt: %w", msg, id, err)
		}
		if interrupted != nil {
			return &exitError{code: code, msg: fmt.Sprintf("the command was %s; effect %d is pending: the same exec runs it again", msg, id)}
		}
		return exitWith(code)
	}
	result, _ := json.Marshal(stdout.into(stderr, 0, time.Since(began)))
	if err := lc.Commit(ctx, call, result); err != nil {
		if d, gerr := lc.Log.GetEffect(ctx, id); gerr == nil && d.Effect.State != sm.Executing {
			// Another run took the call up meanwhile (--retry-in-doubt
			// after this one's lease ran out): it is not in doubt, but its
			// command ran twice.
			return &exitError{code: ExitExecError, msg: fmt.Sprintf("the command succeeded, but another run took effect %d up meanwhile and it is %s now: "+
				"this run's command ran beside that one's: check what both did", id, d.Effect.State)}
		}
		return fmt.Errorf("the command succeeded but its commit failed; effect %d is in doubt: %w", id, err)
	}
	return nil
}

// runCommand runs argv with the streams passed through (and copied into the
// captures when given), forwarding SIGINT and SIGTERM to it. It returns the
// exit code, the signal that interrupted it, or an error if it did not start.
func runCommand(ctx context.Context, f *Factory, argv []string, stdout, stderr *capture, signals chan os.Signal) (int, os.Signal, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	child.Prepare(cmd)
	cmd.Stdin = f.In
	cmd.Stdout, cmd.Stderr = f.Out, f.ErrOut
	if stdout != nil {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(f.Out, stdout), io.MultiWriter(f.ErrOut, stderr)
	}
	if err := cmd.Start(); err != nil {
		// As a shell says it: 127 not found, 126 found but not runnable.
		code := ExitExecCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = ExitExecNotFound
		}
		return 0, nil, &exitError{code: code, msg: fmt.Sprintf("cannot run %s: %v", argv[0], errors.Unwrap(err))}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var interrupted os.Signal
	interrupts := ctx.Done()
	for {
		select {
		case sig := <-signals:
			interrupted, interrupts = sig, nil
			cmd.Process.Signal(sig)
		case <-interrupts:
			// ctx ended: by a signal that signals hears too (forwarded
			// above), or by one that came just before signals listened,
			// which the command gets all the same.
			interrupts = nil
			select {
			case sig := <-signals:
				interrupted = sig
			case <-time.After(20 * time.Millisecond):
				if interrupted == nil {
					interrupted = os.Interrupt
				}
			}
			cmd.Process.Signal(interrupted)
		case err := <-done:
			code := cmd.ProcessState.ExitCode()
			if code < 0 { // killed by a signal
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = 128 + int(ws.Signal())
				} else {
					code = 128
				}
			}
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				return code, interrupted, err
			}
			return code, interrupted, nil
		}
	}
}

func exitWith(code int) error {
	if code == 0 {
		return nil
	}
	return &exitError{code: code}
}

// replayOutput writes a cached result's output and returns its exit code.
func replayOutput(f *Factory, result json.RawMessage) error {
	var r ExecResult
	if len(result) == 0 || json.Unmarshal(result, &r) != nil {
		return nil // not an exec result: nothing to write
	}
	out, errOut := []byte(r.Stdout), []byte(r.Stderr)
	if r.StdoutBase64 != nil {
		out = r.StdoutBase64
	}
	if r.StderrBase64 != nil {
		errOut = r.StderrBase64
	}
	if _, err := f.Out.Write(out); err != nil {
		return err
	}
	if _, err := f.ErrOut.Write(errOut); err != nil {
		return err
	}
	return exitWith(r.ExitCode)
}

// capture keeps the first limit bytes written to it and notes the rest.
type capture struct {
	limit     int
	buf       []byte
	truncated bool
}

func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	if room := c.limit - len(c.buf); n > room {
		c.truncated = true
		p = p[:max(room, 0)]
	}
	c.buf = append(c.buf, p...)
	return n, nil
}

// into builds the result from the stdout capture c and the stderr capture e.
func (c *capture) into(e *capture, code int, d time.Duration) ExecResult {
	r := ExecResult{ExitCode: code, StdoutTruncated: c.truncated, StderrTruncated: e.truncated, DurationMS: d.Milliseconds()}
	if utf8.Valid(c.buf) {
		r.Stdout = string(c.buf)
	} else {
		r.StdoutBase64 = c.buf
	}
	if utf8.Valid(e.buf) {
		r.Stderr = string(e.buf)
	} else {
		r.StderrBase64 = e.buf
	}
	return r
}
