package agenthook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/filesnap"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/policy"
	sm "github.com/undolog/undolog/statemachine"
)

// ToolLease is the lease of a tool call's owner (the agent) between its
// hooks: nobody renews it while the agent runs the tool, and Claude Code's
// Bash runs 10 minutes at most. Only other hosts judge by it; on this one
// the agent's pid decides.
const ToolLease = 11 * time.Minute

// Files is the write-ahead undo of the files a call changes (package
// filesnap): Before, at PreToolUse, captures paths of project (all of it,
// for none) and says how to undo the call; After, at PostToolUse or
// PostToolUseFailure (a failed command may have changed files too),
// records what the call left, for undo to tell the call's changes from
// later ones, and whether it changed any file; Abandon ends the window of
// a call that did not run, or whose end is not known (in doubt: its
// after-state is never recorded).
type Files interface {
	Before(project string, paths []string) (*model.Compensation, error)
	After(project string, undo *model.Compensation) (changed bool, err error)
	Abandon(undo *model.Compensation)
}

// Hook takes an agent's tool calls through the log.
type Hook struct {
	Lifecycle *lifecycle.Lifecycle
	Policy    *policy.Policy
	// Session, if set, is the undolog session of every call
	// ($UNDOLOG_SESSION); else the agent's session id.
	Session string
	// Actor is recorded as who made the calls: the agent ("claude-code").
	Actor string
	// Wait bounds a PreToolUse hook's wait for a decision on an
	// irreversible call; it answers within it, denying (or deferring) the
	// call if no decision came.
	Wait time.Duration
	// ApprovalTimeout is how long an approval request stays open for the
	// same call made again.
	ApprovalTimeout time.Duration
	// Headless answers defer rather than deny when no decision came in
	// time (claude -p: a later --resume asks again).
	Headless bool
	// Door names the hook in the flow's texts.
	Door lifecycle.Door
	// Files, if set, captures the files a compensable call may change.
	Files Files
	// Project is the project's directory ($CLAUDE_PROJECT_DIR), whose
	// files a shell command may change; empty: the event's cwd.
	Project string
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// SandboxOff, if set, says why the project's Bash runs outside Claude
	// Code's sandbox ("" when it runs inside, see SandboxOff): a shell
	// command the policy takes for compensable is then held for a person,
	// since nothing keeps it from the log, the snapshots or the settings.
	// Nil: the user chose to run without the sandbox (init --no-sandbox).
	SandboxOff func(project string) string
	// PermissionsOff, if set, says why the project's settings let Claude
	// Code's file tools write undolog's files ("" when they do not, see
	// PermissionsOff): a file tool's call the policy takes for compensable
	// is then held for a person.
	PermissionsOff func(project string) string
}

func (h *Hook) now() time.Time {
	if h.Now == nil {
		return time.Now()
	}
	return h.Now()
}

func (h *Hook) project(ev Event) string {
	if h.Project != "" {
		return h.Project
	}
	return ev.Cwd
}

func (h *Hook) session(ev Event) string {
	if h.Session != "" {
		return h.Session
	}
	return ev.SessionID
}

// classify is the tier of the event's call under the policy.
func (h *Hook) classify(ev Event) (policy.Classification, error) {
	unknown := func() (bool, bool) { return false, false }
	// A Bash call runs where the agent's shell is (it keeps a cd between
	// calls): its relative paths are read from there.
	cls, err := h.Policy.Classify(ev.ToolName, unknown).In(ev.Cwd).ForArgs(ev.ToolInput)
	if err == nil && cls.Tier == sm.Compensable && inBackground(ev.ToolInput) {
		// Its PostToolUse comes when it starts, not when it ends: what it
		// changes after is in no snapshot, so it cannot be undone.
		cls.Tier = sm.Irreversible
		cls.Reason += " (run in the background: what it changes after it starts cannot be undone)"
	}
	if err == nil && cls.Tier == sm.Compensable && ev.ToolName == "Bash" && h.SandboxOff != nil {
		if why := h.SandboxOff(h.project(ev)); why != "" {
			cls.Tier = sm.Irreversible
			cls.Reason += " (unguarded: " + why + ")"
		}
	}
	if err == nil && cls.Tier == sm.Compensable && cls.Rule != nil && cls.Rule.Path != "" && h.PermissionsOff != nil {
		if why := h.PermissionsOff(h.project(ev)); why != "" {
			cls.Tier = sm.Irreversible
			cls.Reason += " (unguarded: " + why + "; `undolog init claude-code` writes it)"
		}
	}
	return cls, err
}

// inBackground says whether a call's input asks Claude Code to run it in
// the background (Bash's run_in_background).
func inBackground(input json.RawMessage) bool {
	var in struct {
		RunInBackground bool `json:"run_in_background"`
	}
	return json.Unmarshal(input, &in) == nil && in.RunInBackground
}

func deny(format string, args ...any) *Decision {
	return &Decision{Permission: Deny, Reason: "undolog: " + fmt.Sprintf(format, args...)}
}

// Pre decides whether the agent runs the event's call. Any failure denies
// it: the agent runs a tool whose hook errs or answers nothing, so the
// hook never does.
func (h *Hook) Pre(ctx context.Context, ev Event) *Decision {
	cls, err := h.classify(ev)
	if err != nil {
		return deny("%s could not be classified by the policy (%v): it did not run", ev.ToolName, err)
	}
	if cls.Tier == sm.Safe {
		return &Decision{Permission: Allow}
	}
	req := effectlog.InterceptRequest{Session: h.session(ev), Tool: ev.ToolName, Tier: cls.Tier, Args: ev.CallArgs(),
		ApprovalTimeout: h.ApprovalTimeout, CreateSession: true, Actor: h.Actor, Reason: cls.Reason,
		Owner: model.OwnerOf(agentPID(), h.now()), RunAgainAnswered: h.runsAgain(ev.ToolName, cls.Tier)}
	ran := false
	if cls.Tier == sm.Compensable && h.Files != nil {
		fresh, d := h.captureFiles(ctx, ev, &req)
		if d != nil {
			return d
		}
		defer func() {
			if fresh != nil && !ran {
				h.Files.Abandon(fresh)
			}
		}()
	}
	lc := h.Lifecycle
	call, err := lc.Intercept(ctx, req)
	if errors.Is(err, model.ErrSessionNotActive) {
		// The log's text names the command that resumes the session: the
		// person's, not the model's.
		d := deny("%s did not run: this session takes no new calls until a person decides (it is halted or was undone); stop and tell the user", ev.ToolName)
		d.Message = "undolog: " + textfmt.OneLine(err.Error()) +
			" (a new Claude Code session, or UNDOLOG_SESSION set to a new name in Claude Code's environment and Claude Code restarted)"
		return d
	}
	if err != nil {
		return deny("%s could not be recorded in the log (%v): it did not run", ev.ToolName, textfmt.OneLine(err.Error()))
	}
	end, err := lc.Begin(ctx, call, lifecycle.Ask{Door: h.Door, Wait: h.Wait})
	if err != nil {
		return deny("effect %d (%s): %v; it did not run", call.Effect.ID, ev.ToolName, textfmt.OneLine(err.Error()))
	}
	switch end.Ending {
	case lifecycle.Ran:
		// The agent runs it now: its lease stops here, its end comes with
		// the PostToolUse hook.
		if err := lc.Finish(ctx, call, lifecycle.Result{Unsettled: true}); err != nil {
			return deny("effect %d (%s): its lease could not be kept (%v); it did not run", call.Effect.ID, ev.ToolName, err)
		}
		ran = true
		return &Decision{Permission: Allow}
	case lifecycle.Replay:
		return deny("effect %d (%s) already ran in this session and is not run again; its recorded outcome: %s",
			*call.Effect.ReplayOf, ev.ToolName, shortResult(call.Effect.Result))
	}
	d := deny("%s", forModel(end, h.Door))
	if end.Ending == lifecycle.Undecided && h.Headless {
		d.Permission = Defer
	}
	if person := "undolog: " + end.Text(h.Door); person != d.Reason {
		d.Message = person
	}
	return d
}

// forModel is what the model reads of a call that did not run: what
// happened and what it does about it (make the same call again later),
// never the command a person runs to decide (approve, reject, resolve,
// session resume), which would hand the agent the way to decide its own
// call. The person gets those in Decision.Message and the log's feeds.
func forModel(end lifecycle.End, door lifecycle.Door) string {
	e := end.Call.Effect
	switch end.Ending {
	case lifecycle.Undecided:
		return fmt.Sprintf("effect %d (%s) awaits a person's approval, and none came within %s: it did not run. "+
			"A person must decide it; you cannot. Make the same %s call again later, with the same input: it runs once approved",
			e.ID, e.Tool, door.Bound, e.Tool)
	case lifecycle.Rejected:
		msg := fmt.Sprintf("effect %d (%s) was rejected by a person; it did not run", e.ID, e.Tool)
		if a := end.Detail.Approval; a != nil {
			msg = fmt.Sprintf("effect %d (%s) was rejected by %s", e.ID, e.Tool, a.DecidedBy)
			if a.Decision != "" {
				msg += " (" + a.Decision + ")"
			}
			msg += "; it did not run"
		}
		if s := end.Session; s != nil {
			msg += fmt.Sprintf(", and session %s is halted until a person resumes it: stop and tell the user", s.ID)
		}
		return msg
	case lifecycle.Interrupted:
		return fmt.Sprintf("effect %d (%s) did not run: the hook was cut short. Make the same %s call again later, with the same input",
			e.ID, e.Tool, e.Tool)
	case lifecycle.InDoubt:
		return fmt.Sprintf("effect %d (%s) is in doubt: it may or may not have taken effect, and a person must check and resolve it "+
			"before it runs again; it did not run", e.ID, e.Tool)
	}
	return end.Text(door)
}

// captureFiles gives req the undo of the files its call may change,
// captured now; or a denial. The same call still executing (in progress,
// or in doubt) keeps the undo it has, and the log answers it. The same
// call left pending (it failed without changing a file, or never began)
// runs again as an effect of its own, with its own snapshot. fresh is the
// undo captured now, whose window a call that does not run ends.
func (h *Hook) captureFiles(ctx context.Context, ev Event, req *effectlog.InterceptRequest) (fresh *model.Compensation, _ *Decision) {
	args, err := model.CanonicalArgs(req.Args)
	if err != nil {
		return nil, deny("%s's input: %v; it did not run", ev.ToolName, err)
	}
	sig := model.Signature(req.Session, req.Tool, args, "")
	prior := func(state sm.State) (*model.Effect, error) {
		list, _, err := h.Lifecycle.Log.ListEffects(ctx, effectlog.EffectFilter{Session: req.Session, Tool: req.Tool, State: state})
		for i := range list {
			if list[i].CallSignature == sig {
				return &list[i], err
			}
		}
		return nil, err
	}
	running, err := prior(sm.Executing)
	if err != nil {
		return nil, deny("%s could not be looked up in the log (%v): it did not run", ev.ToolName, textfmt.OneLine(err.Error()))
	}
	if running != nil {
		if d, err := h.Lifecycle.Log.GetEffect(ctx, running.ID); err == nil && d.Undo != nil {
			req.Compensation = &d.Undo.Compensation
		}
		return nil, nil // not captured: the log denies it
	}
	pending, err := prior(sm.Pending)
	if err != nil {
		return nil, deny("%s could not be looked up in the log (%v): it did not run", ev.ToolName, textfmt.OneLine(err.Error()))
	}
	undo, err := h.Files.Before(h.project(ev), filesOf(ev))
	if errors.Is(err, ErrFilesBusy) {
		return nil, deny("%v: %s did not run; make this call again once that one has ended", err, ev.ToolName)
	}
	if err != nil {
		return nil, deny("the files %s may change could not be captured for its undo (%v): it did not run", ev.ToolName, err)
	}
	req.Compensation = undo
	if _, id, ok := filesnap.ParseRestore(*undo); ok && pending != nil {
		req.Key = "files " + id
	}
	return undo, nil
}

// runsAgain tells whether a call of tool made again after it committed
// is a new call: a compensable one is, unless its rule says replay:
// always; an irreversible one (a git push tried again) is not, unless its
// rule says replay: retry.
func (h *Hook) runsAgain(tool string, tier sm.Tier) bool {
	if tier == sm.Irreversible {
		return h.Policy.RepeatsAreNew(tool)
	}
	return h.Policy.RunsAgainAnswered(tool)
}

// shortResult is a recorded result for the model to read: one line.
func shortResult(result json.RawMessage) string {
	return textfmt.EscapeCut(string(result), 2000)
}

// filesOf are the files the call names (Write, Edit, NotebookEdit); none
// for a shell command, which may change any.
func filesOf(ev Event) []string {
	var in struct {
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
	}
	if json.Unmarshal(ev.ToolInput, &in) != nil {
		return nil
	}
	switch {
	case in.FilePath != "":
		return []string{in.FilePath}
	case in.NotebookPath != "":
		return []string{in.NotebookPath}
	}
	return nil
}

// ErrNoCall is a PostToolUse event whose call the log does not hold as
// executing for this agent: its PreToolUse hook did not start it.
var ErrNoCall = errors.New("no call started by this agent's PreToolUse hook")

// Post records how the agent's run of the event's call ended: committed
// with the tool's response, failed with its error; an interrupted one stays
// executing, in doubt once the agent is gone.
func (h *Hook) Post(ctx context.Context, ev Event) error {
	cls, err := h.classify(ev)
	if err != nil || cls.Tier == sm.Safe {
		return err
	}
	args, err := model.CanonicalArgs(ev.CallArgs())
	if err != nil {
		return err
	}
	session := h.session(ev)
	agent := model.OwnerOf(agentPID(), h.now())
	lc := h.Lifecycle
	executing, _, err := lc.Log.ListEffects(ctx, effectlog.EffectFilter{Session: session, Tool: ev.ToolName, State: sm.Executing})
	if err != nil {
		return err
	}
	var found *model.Effect
	for i := range executing {
		if e := &executing[i]; e.CallSignature == model.Signature(session, ev.ToolName, args, e.Key) && e.Owner.SameProcess(agent) {
			found = e
			break
		}
	}
	if found == nil {
		return fmt.Errorf("%w: %s in session %s", ErrNoCall, ev.ToolName, session)
	}
	call, err := lc.Adopt(ctx, found.ID, found.Owner.Identity(), h.Actor)
	if err != nil {
		return err
	}
	interrupted := ev.HookEventName == PostToolUseFailure && ev.IsInterrupt
	changedFiles := false
	if undo := call.Undo; h.Files != nil && found.Tier == sm.Compensable && undo != nil {
		if interrupted {
			h.Files.Abandon(&undo.Compensation)
		} else if changedFiles, err = h.Files.After(h.project(ev), &undo.Compensation); err != nil {
			return fmt.Errorf("effect %d: the files it left could not be recorded: %w", found.ID, err)
		}
	}
	var r lifecycle.Result
	switch {
	case interrupted:
		// Whether it took effect is not known: it stays executing, and is
		// in doubt once the agent is gone, for a person to resolve.
		r.Unsettled = true
	case ev.HookEventName == PostToolUseFailure && changedFiles:
		// A failed effect is one that did nothing (undo passes it by);
		// this one changed files: it committed, its error its outcome,
		// and undo restores them.
		r.Value, _ = json.Marshal(map[string]string{"error": failure(ev.Error)})
	case ev.HookEventName == PostToolUseFailure:
		r.Failed = failure(ev.Error)
	default:
		r.Value = ev.ToolResponse
		if len(r.Value) == 0 {
			r.Value = json.RawMessage("null")
		}
	}
	if err := lc.Finish(ctx, call, r); err != nil {
		return err
	}
	if r.Value != nil && found.Tier != sm.Safe && h.runsAgain(ev.ToolName, found.Tier) {
		if _, err := lc.Log.Answered(ctx, found.ID, model.Change{Actor: h.Actor}); err != nil {
			return fmt.Errorf("effect %d committed, but recording that the agent got its answer failed (the same call is answered from the log): %w", found.ID, err)
		}
	}
	return nil
}

// failure is a PostToolUseFailure's error as a line.
func failure(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return "the tool failed: " + textfmt.OneLine(s)
	}
	if len(raw) == 0 || string(raw) == "null" {
		return "the tool failed"
	}
	return "the tool failed: " + textfmt.OneLine(string(raw))
}

// ExecutingSnapshot is ProjectFiles.Executing over log: whether a call the
// log holds as executing has the snapshot as its undo.
func ExecutingSnapshot(ctx context.Context, log effectlog.Log) func(snapshot string) (bool, error) {
	return func(snapshot string) (bool, error) {
		executing, _, err := log.ListEffects(ctx, effectlog.EffectFilter{State: sm.Executing, Tier: sm.Compensable})
		if err != nil {
			return false, err
		}
		for _, e := range executing {
			d, err := log.GetEffect(ctx, e.ID)
			if err != nil {
				return false, err
			}
			if d.Undo == nil {
				continue
			}
			if _, id, ok := filesnap.ParseRestore(d.Undo.Compensation); ok && id == snapshot {
				return true, nil
			}
		}
		return false, nil
	}
}
