package saga

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/filesnap"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/mcpclient"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
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
	// Files are what a files restore (undolog files restore) puts back:
	// the files its call changed.
	Files []filesnap.Change `json:"files,omitempty"`
	// runs is the kind of call undo makes for it: a command, an mcp call
	// (for cases, the case chosen), else "".
	runs string
	// abandoned says why a call skipped was abandoned between its input
	// rounds (effectlog.AbandonedRound): it is failed first.
	abandoned string
	// elsewhere says the Problem is where undo runs (placeProblem): the
	// step could run where its call ran.
	elsewhere bool
}

// Plan is what undo would do.
type Plan struct {
	Session string `json:"session"`
	Steps   []Step `json:"steps"`
	// NotUndoable lists effects that ran but have no undo entry (irreversible).
	NotUndoable []model.Effect `json:"not_undoable"`
	// Closes are the approval requests waiting in the session: undo
	// closes them (their calls never run) as the session stops taking
	// effects.
	Closes []effectlog.PendingApproval `json:"closes_approvals,omitempty"`
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

// NothingToUndo says why a skipped step has nothing to undo, for a
// person: its call never ran, or its run failed (the effect records the
// error), and either way did not take effect.
func (s Step) NothingToUndo() string {
	if s.Effect.Error != "" {
		return "nothing to undo (its run failed)"
	}
	return "nothing to undo (never ran)"
}

// DoneWords say what an earlier walk or a person did with a done step.
func (s Step) DoneWords() string {
	if s.Entry.State == sm.EntrySkipped {
		return "nothing to undo"
	}
	return "already " + textfmt.UndoWord(string(s.Entry.State))
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
	if plan.Closes, _, err = store.PendingApprovals(ctx, session, 0); err != nil {
		return Plan{}, err
	}
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
		case model.CompensationCommand:
			if store, id, ok := filesnap.ParseRestore(u.Compensation); ok {
				if step.Files, err = filesnap.OpenDir(store).Changes(id); err != nil {
					step.Problem = "its files' snapshot: " + err.Error()
				}
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
		case effectlog.AbandonedRound(d, now) != "":
			// Its server asked the client for input and never acted.
			step.Action, step.abandoned = ActionSkip, effectlog.AbandonedRound(d, now)
			step.Note = "its call was " + step.abandoned + ": its server had not acted, and it is failed, not undone"
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
			step.elsewhere = step.Problem != ""
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
