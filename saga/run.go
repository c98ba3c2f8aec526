package saga

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// Defaults for a descriptor that sets none.
const (
	DefaultMaxRetries     = 3
	DefaultInitialBackoff = 100 * time.Millisecond
	MaxBackoff            = 5 * time.Second
)

// Runner walks undo stacks.
type Runner struct {
	Log   effectlog.Log
	Actor string
	// Progress receives one line per step; nil discards.
	Progress io.Writer
	// Output receives what compensation commands print, escaped
	// (textfmt.EscapingWriter); nil discards.
	Output io.Writer
	// ConfirmManual asks an operator whether a manual compensation was done.
	// Nil means nobody can answer: manual steps fail and halt the session.
	ConfirmManual func(Step) (bool, error)
	// Sleep waits between retries; nil uses a timer that honours ctx.
	Sleep func(context.Context, time.Duration) error
	// StartServer starts the session's upstream MCP server for mcp
	// compensations, in dir (the directory it ran in behind the proxy; ""
	// where not recorded), and connects to it; nil means they cannot run
	// here.
	StartServer func(ctx context.Context, upstream []string, dir string) (ToolCaller, error)
	// RetryInDoubt runs again a compensation whose undo died mid-run. It is
	// not done by default: such a compensation may have taken effect, and
	// many are not idempotent (kubectl rollout undo, run twice, goes back
	// two revisions); a retry after a failed attempt is another matter, as
	// the attempt said it failed.
	RetryInDoubt bool
	// Owner is who runs the compensations; nil: this process.
	Owner *model.Owner
	// Lease is how long the lease of a running compensation's owner lasts
	// unless renewed (it is renewed every third of it while the
	// compensation runs); zero: model.DefaultLease.
	Lease time.Duration
	// Confirmed is the plan a person agreed to, if one was asked: the walk
	// runs only while the session's plan is still that one (the same steps,
	// in order, on the same effects), else Run returns ErrPlanChanged.
	Confirmed *Plan
	// Anyway runs the steps the plan says will fail here (Step.Problem)
	// rather than refusing the walk (ErrNotHere): each one fails, halts the
	// session, and waits for a person's resolve.
	Anyway bool
	// CLI starts the commands that hints name ("undolog --log ADDR" when
	// the log is not the default); "" means "undolog".
	CLI string
}

func (r *Runner) cli() string {
	if r.CLI == "" {
		return "undolog"
	}
	return r.CLI
}

// Result sums up a run.
type Result struct {
	Session     string   `json:"session"`
	Compensated []uint64 `json:"compensated"`
	Skipped     []uint64 `json:"skipped"`
	// Resolved lists the entries a person resolved by hand (undolog
	// resolve) since an earlier run stopped at them: done, by no compensation
	// of this run.
	Resolved []uint64 `json:"resolved"`
	// failedRuns counts the Skipped whose run failed (the rest never ran).
	failedRuns int
	// Earlier lists the entries an earlier run compensated or skipped.
	Earlier []uint64 `json:"earlier"`
	Failed  *uint64  `json:"failed"`
	State   string   `json:"state"`
	// Already says the session was compensated before this run: nothing
	// was left to do.
	Already bool `json:"already_compensated,omitempty"`
	// NotUndoable lists the effects that ran and have no undo entry
	// (irreversible): what the undo leaves as it is.
	NotUndoable []model.Effect `json:"not_undoable"`
}

// Counts says what a finished walk did with each entry of the stack: this
// run's compensations and skips, and the entries done before it (by a
// person's resolve, or by an earlier run), so that every entry is counted.
func (r Result) Counts() string {
	counts := fmt.Sprintf("%d undone", len(r.Compensated))
	switch n, failed := len(r.Skipped), r.failedRuns; {
	case n > 0 && failed == 0:
		counts += fmt.Sprintf(", %d had nothing to undo (never ran)", n)
	case n > 0 && failed == n:
		counts += fmt.Sprintf(", %d had nothing to undo (run failed)", n)
	case n > 0:
		counts += fmt.Sprintf(", %d had nothing to undo (%d never ran, %d run failed)", n, n-failed, failed)
	}
	if n := len(r.Resolved); n > 0 {
		counts += fmt.Sprintf(", %d resolved by hand", n)
	}
	if n := len(r.Earlier); n > 0 {
		counts += fmt.Sprintf(", %d undone by an earlier undo", n)
	}
	return counts
}

// notHere refuses a plan with a step that would act and cannot run here
// (the first, in walk order), naming why and the ways on. A step that
// would fail anywhere (a template that does not expand) fails and halts
// the walk as before, for a person's resolve.
func (r *Runner) notHere(plan Plan) error {
	for _, s := range plan.Steps {
		if !s.elsewhere || (s.Action != ActionCompensate && s.Action != ActionInDoubt) {
			continue
		}
		return fmt.Errorf("%w: effect %d %s: %s; nothing was undone: run undo where it can run (where the call ran), or undo it by hand: %s undo %s --yes --anyway lets it fail, then %s resolve %d --reason WHAT_WAS_DONE",
			ErrNotHere, s.Effect.ID, s.Effect.Tool, s.Problem, r.cli(), textfmt.ShellQuote(plan.Session), r.cli(), s.Effect.ID)
	}
	return nil
}

func (r *Runner) progress(format string, args ...any) {
	if r.Progress != nil {
		// Escaped whole: a line quotes tool names, commands and errors.
		fmt.Fprintln(r.Progress, textfmt.Escape(fmt.Sprintf(format, args...)))
	}
}

// Run walks the session's undo stack last-in-first-out. The session moves to
// compensating, then to compensated when every entry is done, or to halted
// when a compensation fails for good (ErrCompensationFailed); running again
// resumes the walk.
func (r *Runner) Run(ctx context.Context, session string) (Result, error) {
	res := Result{Session: session, Compensated: []uint64{}, Skipped: []uint64{}, Resolved: []uint64{}, Earlier: []uint64{}, NotUndoable: []model.Effect{}}
	sess, err := r.Log.VerifySession(ctx, session) // its upstream is started only as its history states it
	if err != nil {
		return res, err
	}
	plan, err := MakePlan(ctx, r.Log, session)
	if err != nil {
		return res, err
	}
	res.NotUndoable = plan.NotUndoable
	if sess.State == sm.SessionCompensated { // undone before: running again changes nothing
		res.State, res.Already = string(sess.State), true
		return res, nil
	}
	if r.Confirmed != nil && !samePlan(*r.Confirmed, plan) {
		return res, fmt.Errorf("%w: %s now, %s when shown; look at it again", ErrPlanChanged,
			textfmt.Count(plan.Work(), "step"), textfmt.Count(r.Confirmed.Work(), "step"))
	}
	// A compensation another undo runs, or one in doubt, stops the walk
	// before anything runs or changes.
	for _, step := range plan.Steps {
		if err := r.refuse(step); err != nil {
			return res, err
		}
	}
	// An mcp compensation on a server started on another state than the
	// session's would report success having undone nothing of it.
	if why := plan.stateProblem(); why != "" {
		for _, step := range plan.Steps {
			if step.runs == model.CompensationMCP && (step.Action == ActionCompensate || step.Action == ActionInDoubt) {
				then := "; then run undo again"
				if plan.UpstreamEnvMoved != "" {
					then = "" // no environment here agrees with both
				}
				return res, fmt.Errorf("%w: session %s: %s%s (nothing was undone)", ErrStateElsewhere, session, why, then)
			}
		}
	}
	if !r.Anyway {
		if err := r.notHere(plan); err != nil {
			return res, err
		}
	}
	if sess.State != sm.SessionCompensating {
		// A plan that cannot run (a damaged entry) leaves the session as it is.
		if _, err := MakePlan(ctx, r.Log, session); err != nil {
			return res, err
		}
		// No reason of its own: the session keeps the one it failed or
		// halted for (its history says the undo started, and who); but a
		// walk that resumes past entries resolved by hand says so, as the
		// reason it halted for (a compensation that failed) holds no more.
		// The log refuses it while a call of the session runs (plan.Waits
		// says which), in this move's transaction: none starts after it.
		if _, err := r.Log.SetSessionState(ctx, session, sm.SessionCompensating, model.Change{Actor: r.Actor, Reason: plan.resumeReason(sess.State)}); err != nil {
			// Another undo may have started it since this one looked: then
			// the walk goes on, and meets that undo's steps as in progress.
			now, gerr := r.Log.GetSession(ctx, session)
			if !errors.Is(err, sm.ErrInvalidStateTransition) || gerr != nil || now.State != sm.SessionCompensating {
				return res, err
			}
		}
	}
	owner := r.Owner.Identity()
	if owner == nil {
		owner = model.NewOwner(time.Now())
	}
	lease := r.Lease
	if lease <= 0 {
		lease = model.DefaultLease
	}
	srv := &sessionServer{argv: sess.Upstream, dir: sess.UpstreamDir, start: r.StartServer}
	defer srv.close()
	for _, step := range plan.Steps {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		id := step.Effect.ID
		switch step.Action {
		case ActionDone:
			if step.Entry.State == sm.EntryResolved {
				res.Resolved = append(res.Resolved, id)
			} else {
				res.Earlier = append(res.Earlier, id)
			}
			continue
		case ActionSkip:
			if step.abandoned != "" {
				if _, err := r.Log.Fail(ctx, id, model.Change{Actor: r.Actor, Error: step.abandoned, ExpectOwner: expected(step.Effect.Owner)}); err != nil {
					return res, takenMeanwhile(step, err)
				}
			}
			reason := "effect never ran"
			if step.Effect.Error != "" {
				reason, res.failedRuns = "its run failed", res.failedRuns+1
			}
			if _, err := r.Log.UndoStep(ctx, id, sm.EntrySkipped, model.Change{Actor: r.Actor, Reason: reason}); err != nil {
				return res, takenMeanwhile(step, err)
			}
			res.Skipped = append(res.Skipped, id)
			r.progress("effect %d %s: %s", id, step.Effect.Tool, step.NothingToUndo())
			continue
		case ActionBlocked:
			return r.halt(ctx, res, id, fmt.Errorf("%w: effect %d %s failed before (%s); fix it by hand, then: %s resolve %d --reason WHAT_WAS_DONE",
				ErrCompensationFailed, id, step.Effect.Tool, step.Entry.LastError, r.cli(), id))
		case ActionCompensate:
			// Taking the entry records its owner in the same transaction: of
			// two undos at once, the second finds it taken.
			if _, err := r.Log.UndoStep(ctx, id, sm.EntryCompensating, model.Change{Actor: r.Actor, Owner: owner.WithLease(time.Now().Add(lease))}); err != nil {
				return res, takenMeanwhile(step, err)
			}
		case ActionInDoubt:
			if _, err := r.Log.UndoStep(ctx, id, sm.EntryCompensating, model.Change{Actor: r.Actor, Reason: "reclaimed with --retry-in-doubt",
				Owner: owner.WithLease(time.Now().Add(lease)), ExpectOwner: expected(step.Entry.Owner)}); err != nil {
				return res, err
			}
			r.progress("effect %d %s: in doubt (%s); running its compensation again", id, step.Effect.Tool, gone(step.Entry.Owner))
		case ActionInProgress:
			return res, r.refuse(step)
		}
		renewal := lifecycle.KeepLease(r.Log, id, owner, lease, time.Now)
		attempts, cerr := r.compensate(ctx, step, srv)
		renewal.Stop() // a lost entry is told by the step below, which expects this owner
		var doubt *inDoubtError
		if cerr != nil && (ctx.Err() != nil || errors.As(cerr, &doubt)) {
			// Interrupted mid-run, or its call got no answer: the entry
			// stays compensating, without an owner, so that it is in doubt
			// for the next run (if this write fails, it keeps this process
			// as owner: in doubt once it exits).
			reason := "undo interrupted"
			if doubt != nil {
				reason = "no answer to its compensation that says whether it ran"
			}
			r.Log.UndoStep(context.WithoutCancel(ctx), id, sm.EntryCompensating, model.Change{Actor: r.Actor, Reason: reason,
				Error: textfmt.OneLine(cerr.Error()), ExpectOwner: owner})
			if doubt == nil {
				return res, ctx.Err()
			}
			r.progress("effect %d %s: undo in doubt: %s", id, step.Effect.Tool, textfmt.OneLine(cerr.Error()))
			return res, fmt.Errorf("%w: effect %d %s: its compensation was sent and no answer said whether it ran (%s): it may or may not have run; check, then rerun with --retry-in-doubt",
				ErrInDoubt, id, step.Effect.Tool, textfmt.OneLine(cerr.Error()))
		}
		to := sm.EntryCompensated
		// Recorded only while this run still owns the entry.
		change := model.Change{Actor: r.Actor, Attempts: attempts, ExpectOwner: owner}
		if cerr != nil {
			to, change.Error = sm.EntryCompensationFailed, textfmt.OneLine(cerr.Error())
		}
		// What the compensation did is recorded even if ctx ended meanwhile.
		if _, err := r.Log.UndoStep(context.WithoutCancel(ctx), id, to, change); err != nil {
			return res, err
		}
		if cerr != nil {
			r.progress("effect %d %s: undo failed after %s: %s", id, step.Effect.Tool, textfmt.Count(attempts, "attempt"), progressText(cerr))
			return r.halt(ctx, res, id, fmt.Errorf("%w: effect %d %s: %s; fix it by hand, then: %s resolve %d --reason WHAT_WAS_DONE",
				ErrCompensationFailed, id, step.Effect.Tool, change.Error, r.cli(), id))
		}
		res.Compensated = append(res.Compensated, id)
		r.progress("effect %d %s: undone (%s, %s)", id, step.Effect.Tool, Shorten(step.Call), textfmt.Count(attempts, "attempt"))
	}
	if _, err := r.Log.SetSessionState(ctx, session, sm.SessionCompensated, model.Change{Actor: r.Actor}); err != nil {
		return res, err
	}
	res.State = string(sm.SessionCompensated)
	return res, nil
}

// resumeReason is the reason a walk that resumes a halted session past
// entries resolved by hand records, or "".
func (p Plan) resumeReason(from sm.SessionState) string {
	if from != sm.SessionHalted {
		return ""
	}
	var ids []string
	for _, s := range p.Steps {
		if s.Action == ActionDone && s.Entry.State == sm.EntryResolved {
			ids = append(ids, strconv.FormatUint(s.Effect.ID, 10))
		}
	}
	if len(ids) == 0 {
		return ""
	}
	noun := "effect"
	if len(ids) > 1 {
		noun = "effects"
	}
	return "undo resumed: " + noun + " " + strings.Join(ids, ", ") + " resolved by hand"
}

// refuse stops the walk at a compensation another undo runs (in progress),
// or at one in doubt unless RetryInDoubt.
func (r *Runner) refuse(step Step) error {
	e, o := step.Effect, step.Entry.Owner
	switch {
	case step.Action == ActionInProgress && step.Entry.State != sm.EntryCompensating:
		return model.CallStillRunning(e, time.Now())
	case step.Action == ActionInProgress:
		return fmt.Errorf("effect %d %s is being compensated by %s: %w; wait for that undo", e.ID, e.Tool, o, model.ErrInProgress)
	case step.Action == ActionInDoubt && !r.RetryInDoubt:
		return fmt.Errorf("%w: effect %d %s: %s: it may or may not have run; check, then rerun with --retry-in-doubt", ErrInDoubt, e.ID, e.Tool, DescribeDoubt(o))
	}
	return nil
}

// takenMeanwhile says so when a step failed because another undo moved its
// entry since the plan was made.
func takenMeanwhile(step Step, err error) error {
	if errors.Is(err, sm.ErrInvalidStateTransition) {
		return fmt.Errorf("%w: effect %d %s was taken by another undo meanwhile (%v)", model.ErrInProgress, step.Effect.ID, step.Effect.Tool, err)
	}
	return err
}

// expected is what a reclaim expects to find: the owner judged dead, or none.
func expected(o *model.Owner) *model.Owner {
	if o == nil {
		return &model.Owner{}
	}
	return o
}

func gone(o *model.Owner) string {
	if o == nil {
		return "interrupted"
	}
	if l := o.Liveness(); l == model.OwnerLapsed {
		return o.Gone(l)
	}
	return fmt.Sprintf("owner pid %d gone", o.PID)
}

func (r *Runner) halt(ctx context.Context, res Result, id uint64, cause error) (Result, error) {
	res.Failed = &id
	if _, err := r.Log.SetSessionState(context.WithoutCancel(ctx), res.Session, sm.SessionHalted, model.Change{Actor: r.Actor, Reason: textfmt.OneLine(cause.Error())}); err != nil {
		return res, err
	}
	res.State = string(sm.SessionHalted)
	return res, cause
}

// compensate runs one compensation with retries and exponential backoff and
// returns the number of attempts made.
func (r *Runner) compensate(ctx context.Context, step Step, srv *sessionServer) (int, error) {
	c := step.Entry.Compensation
	if c.Kind == model.CompensationManual {
		if r.ConfirmManual == nil {
			return 1, errors.New("manual compensation needs an operator at a terminal")
		}
		ok, err := r.ConfirmManual(step)
		if err != nil {
			return 1, err
		}
		if !ok {
			return 1, errors.New("the operator did not confirm the manual compensation")
		}
		return 1, nil
	}
	retries := c.MaxRetries
	if retries == 0 {
		retries = DefaultMaxRetries
	}
	backoff := time.Duration(c.InitialBackoffMS) * time.Millisecond
	if backoff == 0 {
		backoff = DefaultInitialBackoff
	}
	var err error
	attempt := 0
	for attempt = 1; attempt <= retries+1; attempt++ {
		if err = r.execute(ctx, step, attempt, srv); err == nil {
			return attempt, nil
		}
		var p *permanentError
		var doubt *inDoubtError
		if ctx.Err() != nil || attempt == retries+1 || errors.As(err, &p) || errors.As(err, &doubt) {
			break
		}
		r.progress("effect %d %s: attempt %d failed: %s; retrying in %s", step.Effect.ID, step.Effect.Tool, attempt, progressText(err), backoff)
		if serr := r.sleep(ctx, backoff); serr != nil {
			return attempt, serr
		}
		backoff = min(backoff*2, MaxBackoff)
	}
	return min(attempt, retries+1), err
}

func (r *Runner) sleep(ctx context.Context, d time.Duration) error {
	if r.Sleep != nil {
		return r.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
