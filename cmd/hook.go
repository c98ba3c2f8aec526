package cmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/agenthook"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
)

// hookMargin is how long a PreToolUse hook has, past its wait for a
// decision, to answer: it answers deny by then whatever the log does, and
// `undolog init claude-code` gives Claude Code's timeout more than both.
const hookMargin = 20 * time.Second

// hookCloseBound is how long the hook, once it has answered, waits to let
// go of the log: Claude Code waits for the hook to exit, and runs the tool
// of a hook it cuts off.
const hookCloseBound = 3 * time.Second

// hookInputLimit bounds the event read from stdin (a Write's content
// comes in it).
const hookInputLimit = 64 << 20

type hookOptions struct {
	policy          string
	wait            time.Duration
	approvalTimeout time.Duration
	headless        bool
	noSandbox       bool
	as              string
}

func newCmdHook(f *Factory) *cobra.Command {
	opts := &hookOptions{}
	c := &cobra.Command{
		Use:   "hook [--policy FILE] [--wait D] [--headless]",
		Short: "Take a coding agent's tool calls through the log (Claude Code's hooks)",
		Long: `Handle one Claude Code hook event read on stdin, and answer in Claude Code's
format on stdout. 'undolog init claude-code' registers it for PreToolUse, PostToolUse
and PostToolUseFailure in a project's .claude/settings.json.

PreToolUse classifies the call by the policy (--policy, else undolog's default for
Claude Code's tools) and answers:
  - safe: allow; nothing is logged;
  - compensable: recorded, then allow;
  - irreversible: recorded and held for a person ('undolog approve ID' from any shell,
    the terminal view, another machine on PostgreSQL) for --wait at most: allow once
    approved; else deny with a reason naming the effect and asking the model to make
    the same call again later, which runs once approved (--headless: defer instead,
    for claude -p --resume). A rejection denies with the person's reason and halts
    the session;
  - a repeat of an irreversible call that committed in the session: deny with its
    recorded outcome (unless its rule says replay: retry);
  - anything that goes wrong (the log busy, damaged or slow, a bad policy): deny. The
    hook answers within --wait plus 20s whatever happens: Claude Code runs the tool
    when a hook errs or times out.
PostToolUse commits the call with the tool's response, PostToolUseFailure fails it; an
interrupted call stays executing, in doubt once the agent has ended. Other events are
answered as no-ops.

A shell command the policy takes for compensable is held as irreversible when the
project's .claude/settings.json (and settings.local.json) do not run Claude Code's Bash
in its sandbox as 'undolog init claude-code' sets it, writes to this hook's log's
directory, the snapshot store and .claude denied, or when they or the user's settings
($CLAUDE_CONFIG_DIR/settings.json, else ~/.claude/settings.json) list commands in
sandbox.excludedCommands, which Claude Code runs outside its sandbox: nothing else keeps
the agent's shell from the log, the snapshots and the settings. A Write, Edit, MultiEdit
or NotebookEdit the policy takes for compensable is held so when the project's settings
lack a permission rule init writes (permissions.deny Edit of .claude, the log's
directory, the snapshot store). --no-sandbox (written by init
--no-sandbox) is the user's choice to run without it: the policy alone guards then.

A compensable call's files are captured before it runs: a Write's or Edit's file, a
shell command's whole project ($CLAUDE_PROJECT_DIR, else the cwd); its compensation is
'undolog files restore', which undo runs. A shell command of a project runs alone: while
one is between its PreToolUse and PostToolUse, another call that changes the project's
files is denied, to be made again. A failed command that changed files is committed
with its error, so that undo restores them.

The session is Claude Code's session id (or $UNDOLOG_SESSION); the tool is the tool's
name, the args its input; the actor is the agent. The call's owner while the agent
runs it is the agent's process (the hook's parent): a call whose agent died before
its PostToolUse is in doubt.

` + exitCodesHelp("Exit codes:", hookExitCodes),
		Example: `  undolog hook --policy .claude/undolog-policy.yaml --wait 5m
  undolog hook --headless --wait 0s   # CI with claude -p: defer what needs a person`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			if !c.Flags().Changed("headless") && f.Getenv("UNDOLOG_HOOK_HEADLESS") == "1" {
				// The job's switch over the project's settings, whose --wait is
				// for a person at hand: a headless run defers at once.
				opts.headless, opts.wait = true, 0
			}
			return runHook(c.Context(), f, opts, c.OutOrStdout())
		},
	}
	c.Flags().StringVar(&opts.policy, "policy", "", "policy file (default: undolog's for Claude Code's tools)")
	durationVar(c.Flags(), &opts.wait, "wait", 5*time.Minute, "irreversible: how long PreToolUse waits for a decision before it denies (or defers)")
	durationVar(c.Flags(), &opts.approvalTimeout, "approval-timeout", 24*time.Hour, "how long an approval request stays open for the same call made again")
	c.Flags().BoolVar(&opts.headless, "headless", false, "answer defer, not deny, when no decision came in time (claude -p); without it, $UNDOLOG_HOOK_HEADLESS=1 is --headless --wait 0s")
	c.Flags().BoolVar(&opts.noSandbox, "no-sandbox", false, "the project runs Claude Code without its sandbox by the user's choice (init --no-sandbox): its shell commands are not held for that")
	c.Flags().StringVar(&opts.as, "as", "", "actor recorded in history (default $UNDOLOG_ACTOR, else claude-code)")
	return c
}

func runHook(ctx context.Context, f *Factory, opts *hookOptions, out io.Writer) error {
	input, err := io.ReadAll(io.LimitReader(f.In, hookInputLimit+1))
	if err == nil && len(input) > hookInputLimit {
		err = fmt.Errorf("the hook's input is over %d MiB", hookInputLimit>>20)
	}
	var ev agenthook.Event
	if err == nil {
		ev, err = agenthook.ReadEvent(input)
	}
	if err != nil {
		// Exit 2 blocks the call in Claude Code, with this on stderr.
		return &exitError{code: ExitHookUnreadable, msg: textfmt.OneLine(err.Error())}
	}
	if !ev.Tool() {
		_, err := out.Write(agenthook.Answer(ev.HookEventName, nil))
		return err
	}
	h, err := opts.hook(ctx, f)
	if ev.HookEventName != agenthook.PreToolUse {
		if err == nil {
			err = h.Post(ctx, ev)
		}
		if _, werr := out.Write(agenthook.Answer(ev.HookEventName, nil)); err == nil {
			err = werr
		}
		if err != nil {
			return &exitError{code: ExitError, msg: fmt.Sprintf("%s %s: its end was not recorded: %v", ev.HookEventName, ev.ToolName, err)}
		}
		return nil
	}
	var d *agenthook.Decision
	if err != nil {
		d = &agenthook.Decision{Permission: agenthook.Deny, Reason: "undolog: " + err.Error() + "; the call did not run"}
	} else {
		d = preInTime(ctx, h, ev, opts.wait+hookMargin)
	}
	if _, err := out.Write(agenthook.Answer(ev.HookEventName, d)); err != nil {
		return err
	}
	if timedOut, err := f.logs.closeWithin(hookCloseBound); timedOut {
		// The answer is out; the write it gave up on ends with the process.
		fmt.Fprintf(f.ErrOut, "undolog: the log was not let go of within %s of the answer: the hook exits without it\n", hookCloseBound)
	} else if err != nil {
		fmt.Fprintf(f.ErrOut, "undolog: closing the log: %s\n", textfmt.Escape(textfmt.OneLine(err.Error())))
	}
	return nil
}

// preInTime is the PreToolUse decision, or deny once bound has passed
// without one (a log that does not answer): the hook must answer before
// Claude Code's timeout, which runs the tool.
func preInTime(ctx context.Context, h *agenthook.Hook, ev agenthook.Event, bound time.Duration) *agenthook.Decision {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	decided := make(chan *agenthook.Decision, 1)
	go func() { decided <- h.Pre(ctx, ev) }()
	select {
	case d := <-decided:
		return d
	case <-time.After(bound + time.Second):
		// Pre did not end even with its context done (a lock it waits in):
		// the answer goes now, and the process ends with it.
		return &agenthook.Decision{Permission: agenthook.Deny, Reason: fmt.Sprintf(
			"undolog: the log did not answer within %s; %s did not run: make the same call again later", textfmt.Duration(bound), ev.ToolName)}
	}
}

// hook is the door as the options and the environment set it up.
func (o *hookOptions) hook(ctx context.Context, f *Factory) (*agenthook.Hook, error) {
	pol, err := agenthook.LoadPolicy(o.policy)
	if err != nil {
		return nil, err
	}
	// A Bash command's writes are judged against the project the snapshot
	// covers (else the working directory, where Claude Code runs hooks).
	pol.Project = f.Getenv("CLAUDE_PROJECT_DIR")
	// The log's file is held wherever it is: the agent does not delete it.
	if addr := f.LogPath(); logaddr.IsFile(addr) {
		pol.LogFile = addr
	}
	actor := o.as
	if actor == "" {
		actor = f.Getenv("UNDOLOG_ACTOR")
	}
	if actor == "" {
		actor = "claude-code"
	}
	lc := &lifecycle.Lifecycle{Log: f.Log(), Now: f.Now, Lease: agenthook.ToolLease}
	door := lifecycle.Door{CLI: f.CLI(), Bound: "the hook's --wait " + o.wait.String(),
		Again: func(e model.Effect) string {
			return fmt.Sprintf("make the same %s call again, with the same input: it runs then", e.Tool)
		}}
	files := agenthook.ProjectFiles{Now: f.Now, Executing: agenthook.ExecutingSnapshot(ctx, lc.Log)}
	userFile := agenthook.UserSettings(f.Getenv)
	sandboxOff := func(project string) string {
		if why := agenthook.SandboxOff(project, pol.LogFile, o.policy); why != "" {
			return why
		}
		return agenthook.ExcludedCommands(append(agenthook.ProjectSettings(project), userFile))
	}
	if o.noSandbox {
		sandboxOff = nil
	}
	permissionsOff := func(project string) string { return agenthook.PermissionsOff(project, pol.LogFile, o.policy) }
	return &agenthook.Hook{SandboxOff: sandboxOff, PermissionsOff: permissionsOff, Lifecycle: lc, Policy: pol, Session: f.Getenv("UNDOLOG_SESSION"), Actor: actor, Wait: o.wait,
		ApprovalTimeout: o.approvalTimeout, Headless: o.headless, Door: door, Now: f.Now,
		Files: files, Project: f.Getenv("CLAUDE_PROJECT_DIR")}, nil
}
