// Package saga owns the undo walk: it plans and runs a session's
// compensations last-in-first-out, with retries and exponential backoff, and
// records every step in the effect log.
package saga

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/child"
	"github.com/undolog/undolog/internal/template"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/mcpclient"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
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

// ErrStateElsewhere is undo's refusal of a session whose MCP server would
// start here on another state than the one its proxy ran it on: what
// locates that state (model.StateEnv) is set otherwise in this
// environment. Nothing ran or changed.
var ErrStateElsewhere = fmt.Errorf("%w: undo would start the session's MCP server on another state", model.ErrInvalidInput)

// Defaults for a descriptor that sets none.
const (
	DefaultMaxRetries     = 3
	DefaultInitialBackoff = 100 * time.Millisecond
	MaxBackoff            = 5 * time.Second
)

// Actions of a plan step.
const (
	ActionCompensate = "compensate"  // run the compensation
	ActionInProgress = "in_progress" // another undo, alive, runs the compensation now
	ActionInDoubt    = "in_doubt"    // its undo died or was interrupted mid-run: it runs again only with RetryInDoubt
	ActionSkip       = "skip"        // the effect never ran
	ActionDone       = "done"        // already compensated, skipped or resolved
	ActionBlocked    = "blocked"     // failed before: resolve it by hand first
)

// Step is one entry of the walk, in walk order.
type Step struct {
	Action string          `json:"action"`
	Entry  model.UndoEntry `json:"entry"`
	Effect model.Effect    `json:"effect"`
	// Call is the exact compensation call, as a person would type it.
	Call string `json:"call"`
	// Problem says why the call cannot be made as Call shows it (an mcp
	// argument template that does not expand, a directory or server that is
	// not there): that step would fail.
	Problem string `json:"problem,omitempty"`
	// Note says what a person should know before the step runs: its call
	// is in doubt (its process ended mid-call), and is undone as if it ran.
	Note string `json:"note,omitempty"`
	// runs is the kind of call undo makes for it: a command, an mcp call
	// (for cases, the case chosen), else "".
	runs string
}

// Plan is what undo would do.
type Plan struct {
	Session string `json:"session"`
	Steps   []Step `json:"steps"`
	// NotUndoable lists effects that ran but have no undo entry (irreversible).
	NotUndoable []model.Effect `json:"not_undoable"`
	// Upstream is the session's MCP server, on which mcp compensations are
	// called, started in UpstreamDir.
	Upstream    []string `json:"upstream,omitempty"`
	UpstreamDir string   `json:"upstream_dir,omitempty"`
	// UpstreamEnv is what located the server's state when the proxy ran
	// it, as the session's history states it: undo starts the server only
	// where this environment agrees.
	UpstreamEnv model.StateEnv `json:"upstream_env,omitempty"`
	// UpstreamEnvMoved says how the history states that state otherwise
	// before (model.Session.UpstreamEnvMoved): undo reaches one state
	// only, and refuses.
	UpstreamEnvMoved string `json:"upstream_env_moved,omitempty"`
}

// Waits says why the plan cannot run yet: an irreversible call of the
// session still runs. It is not undone, and the calls before it are not
// undone under it: what it does may rest on them (ErrInProgress).
func (p Plan) Waits() error {
	for _, e := range p.NotUndoable {
		if err := model.CallStillRunning(e, time.Now()); e.State == sm.Executing && err != nil {
			return err
		}
	}
	return nil
}

// Where says, for a line of text, where a step's call runs: a command in
// its directory, an mcp call on the session's server.
func (p Plan) Where(s Step) string {
	switch s.runs {
	case model.CompensationCommand:
		if d := s.Entry.Compensation.Dir; d != "" {
			return " (in " + textfmt.ShellQuote(d) + ")"
		}
	case model.CompensationMCP:
		if len(p.UpstreamEnv) > 0 && len(p.Upstream) > 0 {
			return " (server: " + describeStateEnv(p.UpstreamEnv) + " " + textfmt.ShellQuote(p.Upstream...) + ")"
		}
		return OnServer(p.Upstream)
	}
	return ""
}

// describeStateEnv renders a server's state environment as a shell would
// set it, an unset variable as "NAME unset".
func describeStateEnv(env model.StateEnv) string {
	parts := []string{}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if v := env[name]; v != nil {
			parts = append(parts, textfmt.ShellQuote(name+"="+*v))
		} else {
			parts = append(parts, "("+name+" unset)")
		}
	}
	return strings.Join(parts, " ")
}

// stateProblem says how this environment locates the session's MCP server
// state otherwise than the proxy's did ("" when it agrees, or nothing was
// recorded): the server undo starts inherits it, and would act on another
// state. The first variable that disagrees, in name order; or that the
// history states the state located otherwise before, where this
// environment can agree with one of them only.
func (p Plan) stateProblem() string {
	if p.UpstreamEnvMoved != "" {
		return fmt.Sprintf("its calls were made on more than one state (%s: a proxy joined the session on another), and undo reaches one only: undo them by hand", p.UpstreamEnvMoved)
	}
	for _, name := range slices.Sorted(maps.Keys(p.UpstreamEnv)) {
		was := p.UpstreamEnv[name]
		now, set := os.LookupEnv(name)
		switch {
		case was == nil && set:
			return fmt.Sprintf("%s is %q here but was unset when the proxy ran the server (its default state): unset it", name, now)
		case was != nil && !set:
			return fmt.Sprintf("%s is unset here but was %q when the proxy ran the server: set %s", name, *was, textfmt.ShellQuote(name+"="+*was))
		case was != nil && now != *was:
			return fmt.Sprintf("%s is %q here but was %q when the proxy ran the server: set %s", name, now, *was, textfmt.ShellQuote(name+"="+*was))
		}
	}
	return ""
}

// OnServer says, for a line of text, which MCP server an mcp call is made
// on: a session's upstream command.
func OnServer(upstream []string) string {
	if len(upstream) == 0 {
		return " (no MCP server recorded)"
	}
	return " (server: " + textfmt.ShellQuote(upstream...) + ")"
}

// placeProblem says why a step's call cannot run here: its command's
// directory or its server's is gone, or the session has no server.
func (p Plan) placeProblem(s Step) string {
	missing := func(dir string) bool {
		info, err := os.Stat(dir)
		return err != nil || !info.IsDir()
	}
	switch s.runs {
	case model.CompensationCommand:
		if d := s.Entry.Compensation.Dir; d != "" && missing(d) {
			return "its directory " + d + " is not there"
		}
	case model.CompensationMCP:
		if len(p.Upstream) == 0 {
			return "it needs an MCP server, and its session recorded none (it did not run behind undolog proxy)"
		}
		if _, remote, _ := mcpclient.ParseRemote(p.Upstream); !remote && p.UpstreamDir != "" && missing(p.UpstreamDir) {
			return "its MCP server's directory " + p.UpstreamDir + " is not there"
		}
		if why := p.stateProblem(); why != "" {
			return "undo refuses to start its MCP server on another state: " + why
		}
	}
	return ""
}

// Work counts the steps that would act.
func (p Plan) Work() int {
	n := 0
	for _, s := range p.Steps {
		if s.Action != ActionDone {
			n++
		}
	}
	return n
}

// samePlan tells whether b has a's steps: the same actions on the same
// effects, in the same order.
func samePlan(a, b Plan) bool {
	if len(a.Steps) != len(b.Steps) {
		return false
	}
	for i := range a.Steps {
		if a.Steps[i].Effect.ID != b.Steps[i].Effect.ID || a.Steps[i].Action != b.Steps[i].Action {
			return false
		}
	}
	return true
}

// MakePlan reads the session's undo stack (LIFO) and decides each step. It
// changes nothing. A session that fails its check (effectlog.CheckSession:
// its state, meta or upstream disagree with its history), or an entry on its
// stack whose effect fails its (effectlog.CheckEffect, which also holds the
// entry's state to its history), done or not, refuses the whole plan, so
// that nothing runs: damaged or tampered.
func MakePlan(ctx context.Context, store effectlog.Log, session string) (Plan, error) {
	sess, err := store.VerifySession(ctx, session)
	if err != nil {
		return Plan{}, err
	}
	stack, _, err := store.UndoStack(ctx, session, 0)
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Session: session, Steps: []Step{}, NotUndoable: []model.Effect{}, Upstream: sess.Upstream, UpstreamDir: sess.UpstreamDir, UpstreamEnv: sess.UpstreamEnv, UpstreamEnvMoved: sess.UpstreamEnvMoved}
	now := time.Now()
	entered := make(map[uint64]bool, len(stack))
	for _, u := range stack {
		d, err := store.GetEffect(ctx, u.EffectID)
		if err != nil {
			return Plan{}, err
		}
		if d.Effect.Session != session {
			return Plan{}, fmt.Errorf("%w: session %s's undo stack holds effect %d of session %s: the log was changed outside undolog (undolog verify says more); nothing was undone",
				model.ErrCorrupt, session, d.Effect.ID, d.Effect.Session)
		}
		entered[u.EffectID] = true
		if d.Undo != nil {
			u = *d.Undo // read with the effect, and checked with it below
		}
		// Every entry, whatever its state: one that reads done is passed
		// by, and a forged compensated or skipped would leave its effect
		// as it is while undo said the session was compensated.
		if err := effectlog.CheckEffect(d); err != nil {
			return Plan{}, err
		}
		step := Step{Entry: u, Effect: d.Effect, Call: DescribeCall(u.Compensation), runs: u.Compensation.Kind}
		switch u.Compensation.Kind {
		case model.CompensationMCP:
			if args, err := MCPArgs(d.Effect, u.Compensation); err == nil {
				step.Call = "mcp " + u.Compensation.Tool + " " + string(args)
			} else {
				step.Problem = "the argument template does not expand: " + err.Error()
			}
		case model.CompensationCases:
			if ch, err := ChooseCase(d.Effect, u.Compensation); err == nil {
				step.Call, step.runs = DescribeChosen(ch), ch.Kind()
			} else {
				step.Problem = "the policy's cases do not give a call: " + err.Error()
			}
		}
		switch {
		case u.State.Done():
			step.Action = ActionDone
		case u.State == sm.EntryCompensationFailed:
			step.Action = ActionBlocked
		case u.State == sm.EntryCompensating:
			// A compensation has one runner at a time: a live one (or one on
			// another host, which cannot be asked) is never overtaken.
			switch u.Owner.LivenessAt(now) {
			case model.OwnerAlive, model.OwnerElsewhere:
				step.Action = ActionInProgress
			default:
				step.Action = ActionInDoubt
			}
		case d.Effect.State == sm.Pending:
			step.Action = ActionSkip
		case d.Effect.State == sm.Executing && model.CallStillRunning(d.Effect, now) != nil:
			step.Action = ActionInProgress // the call itself runs: undo waits for it to end
		default:
			step.Action = ActionCompensate
			if d.Effect.State == sm.Executing {
				step.Note = "its call is in doubt (its process ended mid-call): it may or may not have taken effect, and is undone as if it had"
			}
		}
		if step.Problem == "" && (step.Action == ActionCompensate || step.Action == ActionInDoubt) {
			step.Problem = plan.placeProblem(step)
		}
		plan.Steps = append(plan.Steps, step)
	}
	effects, _, err := store.ListEffects(ctx, effectlog.EffectFilter{Session: session})
	if err != nil {
		return Plan{}, err
	}
	for _, e := range effects {
		if e.Damage != "" {
			// A listing shows it; undo cannot tell what it did.
			return Plan{}, fmt.Errorf("%w: effect %d of session %s is damaged (%s): undolog verify says more; nothing was undone",
				model.ErrCorrupt, e.ID, session, e.Damage)
		}
		if e.Tier == sm.Compensable && e.ReplayOf == nil && !entered[e.ID] {
			// Every compensable call's intercept wrote its entry (a replay
			// has none: it did nothing): one missing (deleted or moved by
			// hand) would be left as it is while undo said the session was
			// compensated.
			return Plan{}, fmt.Errorf("%w: effect %d (compensable, %s) of session %s has no undo entry: the log was changed outside undolog (undolog verify says more); nothing was undone",
				model.ErrCorrupt, e.ID, e.State, session)
		}
		if e.Tier == sm.Irreversible && (e.State == sm.Committed || e.State == sm.Executing) {
			plan.NotUndoable = append(plan.NotUndoable, e)
		}
	}
	return plan, nil
}

// DescribeCall renders a compensation as the call undo will make.
func DescribeCall(c model.Compensation) string {
	switch c.Kind {
	case model.CompensationCommand:
		return textfmt.ShellQuote(c.Argv...)
	case model.CompensationMCP:
		return "mcp " + c.Tool + " " + string(c.Args)
	case model.CompensationCases:
		return DescribeCases(c)
	}
	if c.Note != "" {
		return "manual: " + c.Note
	}
	return "manual (an operator confirms it was done)"
}

// MaxShown is how much of a compensation call a line shows: a call that
// restores a file carries the file.
const MaxShown = 240

// Shorten cuts a call for a line of text to MaxShown bytes (at a character
// boundary), saying how much was left out; JSON output has it whole.
func Shorten(s string) string {
	if len(s) <= MaxShown {
		return s
	}
	cut := MaxShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes in all)", s[:cut], len(s))
}

// DescribeCases renders a cases compensation: each case, its condition
// and what it does, as the policy wrote them.
func DescribeCases(c model.Compensation) string {
	parts, err := CaseLines(c)
	if err != nil {
		return "cases (unreadable: " + err.Error() + ")"
	}
	return "cases: " + strings.Join(parts, "; ")
}

// CaseLines renders each case of a cases compensation: "N. when COND: CALL".
func CaseLines(c model.Compensation) ([]string, error) {
	var cs template.Cases
	if err := json.Unmarshal(c.Args, &cs); err != nil {
		return nil, err
	}
	parts := make([]string, len(cs.Cases))
	for i, k := range cs.Cases {
		when := "otherwise"
		if k.When != "" {
			when = "when " + k.When
		}
		var do string
		switch {
		case k.Tool != "":
			do = "mcp " + k.Tool + " " + string(k.Args)
		case len(k.Run) > 0:
			do = textfmt.ShellQuote(k.Run...)
			if k.Stdin != "" || k.StdinBase64 != "" {
				do += " < " + k.Stdin + k.StdinBase64
			}
		default:
			do = "nothing: " + k.Skip
		}
		parts[i] = fmt.Sprintf("%d. %s: %s", i+1, when, do)
	}
	return parts, nil
}

// ToolCaller calls tools on an MCP server: how mcp compensations run.
type ToolCaller interface {
	CallTool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
	Close() error
}

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
	// Tools connects to the session's upstream MCP server for mcp
	// compensations, starting it in dir (the directory it ran in behind
	// the proxy; "" where not recorded); nil means they cannot run here.
	Tools func(ctx context.Context, upstream []string, dir string) (ToolCaller, error)
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
	// CLI starts the commands that hints name ("undolog --log ADDR" when
	// the log is not the default); "" means "undolog".
	CLI string

	caller      ToolCaller
	upstreamDir string
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
	Failed      *uint64  `json:"failed"`
	State       string   `json:"state"`
	// Already says the session was compensated before this run: nothing
	// was left to do.
	Already bool `json:"already_compensated,omitempty"`
	// NotUndoable lists the effects that ran and have no undo entry
	// (irreversible): what the undo leaves as it is.
	NotUndoable []model.Effect `json:"not_undoable"`
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
	res := Result{Session: session, Compensated: []uint64{}, Skipped: []uint64{}, NotUndoable: []model.Effect{}}
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
	if sess.State != sm.SessionCompensating {
		// A plan that cannot run (a damaged entry) leaves the session as it is.
		if _, err := MakePlan(ctx, r.Log, session); err != nil {
			return res, err
		}
		// No reason of its own: the session keeps the one it failed or
		// halted for (its history says the undo started, and who). The log
		// refuses it while a call of the session runs (plan.Waits says
		// which), in this move's transaction: none starts after it.
		if _, err := r.Log.SetSessionState(ctx, session, sm.SessionCompensating, model.Change{Actor: r.Actor}); err != nil {
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
	defer func() {
		if r.caller != nil {
			r.caller.Close()
			r.caller = nil
		}
	}()
	upstream := sess.Upstream
	r.upstreamDir = sess.UpstreamDir
	for _, step := range plan.Steps {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		id := step.Effect.ID
		switch step.Action {
		case ActionDone:
			continue
		case ActionSkip:
			if _, err := r.Log.UndoStep(ctx, id, sm.EntrySkipped, model.Change{Actor: r.Actor, Reason: "effect never ran"}); err != nil {
				return res, takenMeanwhile(step, err)
			}
			res.Skipped = append(res.Skipped, id)
			r.progress("effect %d %s: skipped (never ran)", id, step.Effect.Tool)
			continue
		case ActionBlocked:
			return r.halt(ctx, res, id, fmt.Errorf("%w: effect %d %s failed before (%s); fix it by hand, then: %s resolve %d --reason WHAT_WAS_DONE",
				ErrCompensationFailed, id, step.Effect.Tool, step.Entry.LastError, r.cli(), id))
		case ActionCompensate:
			// Taking the entry records its owner in the same transaction: of
			// two undos at once, the second finds it taken.
			if _, err := r.Log.UndoStep(ctx, id, sm.EntryCompensating, model.Change{Actor: r.Actor, Reason: "undo", Owner: owner.WithLease(time.Now().Add(lease))}); err != nil {
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
		attempts, cerr := r.compensate(ctx, step, upstream)
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
			r.progress("effect %d %s: compensation in doubt: %s", id, step.Effect.Tool, textfmt.OneLine(cerr.Error()))
			return res, fmt.Errorf("%w: effect %d %s: its compensation was sent and no answer said whether it ran (%s): it may or may not have run; check, then rerun with --retry-in-doubt",
				ErrInDoubt, id, step.Effect.Tool, textfmt.OneLine(cerr.Error()))
		}
		to := sm.EntryCompensated
		// Recorded only while this run still owns the entry.
		change := model.Change{Actor: r.Actor, Reason: "undo", Attempts: attempts, ExpectOwner: owner}
		if cerr != nil {
			to, change.Error = sm.EntryCompensationFailed, textfmt.OneLine(cerr.Error())
		}
		// What the compensation did is recorded even if ctx ended meanwhile.
		if _, err := r.Log.UndoStep(context.WithoutCancel(ctx), id, to, change); err != nil {
			return res, err
		}
		if cerr != nil {
			r.progress("effect %d %s: compensation failed after %s: %s", id, step.Effect.Tool, textfmt.Count(attempts, "attempt"), change.Error)
			return r.halt(ctx, res, id, fmt.Errorf("%w: effect %d %s: %s; fix it by hand, then: %s resolve %d --reason WHAT_WAS_DONE",
				ErrCompensationFailed, id, step.Effect.Tool, change.Error, r.cli(), id))
		}
		res.Compensated = append(res.Compensated, id)
		r.progress("effect %d %s: compensated (%s, %s)", id, step.Effect.Tool, Shorten(step.Call), textfmt.Count(attempts, "attempt"))
	}
	if _, err := r.Log.SetSessionState(ctx, session, sm.SessionCompensated, model.Change{Actor: r.Actor}); err != nil {
		return res, err
	}
	res.State = string(sm.SessionCompensated)
	return res, nil
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

// DescribeDoubt says why a compensation whose owner is o is in doubt.
func DescribeDoubt(o *model.Owner) string {
	if o == nil {
		return "its undo was interrupted mid-run"
	}
	if l := o.Liveness(); l == model.OwnerLapsed {
		return "its undo's " + o.Gone(l)
	}
	return fmt.Sprintf("its undo (pid %d on %s) died mid-run", o.PID, o.Host)
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
func (r *Runner) compensate(ctx context.Context, step Step, upstream []string) (int, error) {
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
		if err = r.execute(ctx, step, attempt, upstream); err == nil {
			return attempt, nil
		}
		var p *permanentError
		var doubt *inDoubtError
		if ctx.Err() != nil || attempt == retries+1 || errors.As(err, &p) || errors.As(err, &doubt) {
			break
		}
		r.progress("effect %d %s: attempt %d failed: %s; retrying in %s", step.Effect.ID, step.Effect.Tool, attempt, textfmt.OneLine(err.Error()), backoff)
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

// execute runs one attempt of a compensation.
func (r *Runner) execute(ctx context.Context, step Step, attempt int, upstream []string) error {
	c := step.Entry.Compensation
	switch c.Kind {
	case model.CompensationCommand:
		return r.runCommand(ctx, step, attempt, c.Argv, c.Dir, nil)
	case model.CompensationMCP:
		args, err := MCPArgs(step.Effect, c)
		if err != nil {
			return &permanentError{err}
		}
		return r.callTool(ctx, step, upstream, c.Tool, args)
	case model.CompensationCases:
		ch, err := ChooseCase(step.Effect, c)
		if err != nil {
			return &permanentError{err}
		}
		switch ch.Kind() {
		case model.CompensationMCP:
			return r.callTool(ctx, step, upstream, ch.Tool, ch.Args)
		case model.CompensationCommand:
			return r.runCommand(ctx, step, attempt, ch.Argv, c.Dir, ch.Stdin)
		}
		return nil // a skip: the step's line says "compensated (nothing to undo: ...)"
	}
	return &permanentError{fmt.Errorf("unknown compensation kind %q", c.Kind)}
}

// ChooseCase picks the case of a cases compensation that the effect's
// args, result and capture select, filled in.
func ChooseCase(e model.Effect, c model.Compensation) (template.Chosen, error) {
	var cs template.Cases
	if err := json.Unmarshal(c.Args, &cs); err != nil {
		return template.Chosen{}, fmt.Errorf("the compensation's cases are not readable: %v", err)
	}
	return cs.Choose(template.Input{Args: e.Args, Result: e.Result, Capture: c.Capture})
}

// DescribeChosen renders a chosen case as the call undo will make.
func DescribeChosen(ch template.Chosen) string {
	switch ch.Kind() {
	case model.CompensationMCP:
		return "mcp " + ch.Tool + " " + string(ch.Args)
	case model.CompensationCommand:
		s := textfmt.ShellQuote(ch.Argv...)
		if ch.Stdin != nil {
			s += fmt.Sprintf(" < (%d bytes)", len(ch.Stdin))
		}
		return s
	}
	return "nothing to undo: " + ch.Skip
}

// callTool runs an mcp compensation on the session's upstream server, its
// arguments filled from the effect's args, result and capture.
func (r *Runner) callTool(ctx context.Context, step Step, upstream []string, tool string, args json.RawMessage) error {
	if r.caller == nil {
		switch {
		case len(upstream) == 0:
			return &permanentError{fmt.Errorf("effect %d needs an MCP server, and its session recorded none (it did not run behind undolog proxy)", step.Effect.ID)}
		case r.Tools == nil:
			return &permanentError{fmt.Errorf("effect %d needs its MCP server, which cannot be started here", step.Effect.ID)}
		}
		// Kept only once connected: a failed dial is a failed attempt, and
		// what it returned (often a nil pointer in the interface) is no client.
		caller, err := r.Tools(ctx, upstream, r.upstreamDir)
		if err != nil {
			return err
		}
		if caller == nil {
			return fmt.Errorf("effect %d: no connection to its MCP server", step.Effect.ID)
		}
		r.caller = caller
	}
	// Bounded: a server that never answers (or answers another id) would
	// hold the undo for good.
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := r.caller.CallTool(callCtx, tool, args)
	if (errors.Is(err, mcpclient.ErrNoAnswer) || errors.Is(err, mcpclient.ErrUnreadableAnswer)) && ctx.Err() == nil {
		return &inDoubtError{err}
	}
	return err
}

// callTimeout bounds one compensation's MCP call.
const callTimeout = 2 * time.Minute

// inDoubtError is an attempt that may have had its effect: its MCP call was
// sent and no answer came. It is not retried: compensations are not assumed
// idempotent.
type inDoubtError struct{ err error }

func (e *inDoubtError) Error() string { return e.err.Error() }
func (e *inDoubtError) Unwrap() error { return e.err }

// MCPArgs fills an mcp compensation's argument template.
func MCPArgs(e model.Effect, c model.Compensation) (json.RawMessage, error) {
	args := c.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return template.Eval(args, template.Input{Args: e.Args, Result: e.Result, Capture: c.Capture})
}

// permanentError is a failure that retrying cannot change.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// maxEnvValue is the largest args or result passed in the environment.
const maxEnvValue = 64 << 10

// runCommand runs the argv without a shell. The effect reaches it through
// UNDOLOG_EFFECT_ID, UNDOLOG_SESSION, UNDOLOG_TOOL, UNDOLOG_ARGS and
// UNDOLOG_RESULT (when under 64 KiB), UNDOLOG_ATTEMPT and UNDOLOG_EFFECT_FILE
// (the whole effect as JSON).
func (r *Runner) runCommand(ctx context.Context, step Step, attempt int, argv []string, dir string, stdin []byte) error {
	e := step.Effect
	file, err := os.CreateTemp("", "undolog-effect-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(file.Name())
	if err := json.NewEncoder(file).Encode(e); err != nil {
		file.Close()
		return err
	}
	file.Close()
	result := string(e.Result)
	if result == "" {
		result = "null"
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	child.Prepare(cmd)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Env = append(os.Environ(),
		"UNDOLOG_EFFECT_ID="+strconv.FormatUint(e.ID, 10),
		"UNDOLOG_SESSION="+e.Session,
		"UNDOLOG_TOOL="+e.Tool,
		"UNDOLOG_ATTEMPT="+strconv.Itoa(attempt),
		"UNDOLOG_EFFECT_FILE="+file.Name(),
	)
	// The kernel caps one environment string (128 KiB on Linux): large args or
	// results reach the command through the effect file only.
	for name, value := range map[string]string{"UNDOLOG_ARGS": string(e.Args), "UNDOLOG_RESULT": result} {
		if len(value) <= maxEnvValue {
			cmd.Env = append(cmd.Env, name+"="+value)
		}
	}
	var tail bytes.Buffer
	out := io.Writer(&tail)
	if r.Output != nil {
		// The command may be an agent's: what it prints is escaped as stored
		// text is. (One writer for both streams: os/exec then writes from one
		// goroutine at a time.)
		shown := textfmt.NewEscapingWriter(r.Output)
		defer shown.Flush()
		out = io.MultiWriter(shown, &tail)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		if last := lastLine(tail.String()); last != "" {
			return fmt.Errorf("%s: %v: %s", argv[0], err, last)
		}
		return fmt.Errorf("%s: %v", argv[0], err)
	}
	return nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
