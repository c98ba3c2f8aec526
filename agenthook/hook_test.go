package agenthook

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/policy"
)

// snapshots stands in for package filesnap: it records what the hook asks.
type snapshots struct {
	before [][]string
	after  []*model.Compensation
	fail   error
}

func (s *snapshots) Before(project string, paths []string) (*model.Compensation, error) {
	if s.fail != nil {
		return nil, s.fail
	}
	s.before = append(s.before, paths)
	return &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"undolog", "files", "restore", project, "snap-1"}, Dir: project}, nil
}

func (s *snapshots) After(project string, undo *model.Compensation) (bool, error) {
	s.after = append(s.after, undo)
	return false, nil
}

func (s *snapshots) Abandon(undo *model.Compensation) {}

// A compensable call's files are captured before its effect is recorded,
// the compensation Files gives recorded with it; PostToolUse hands it back
// to Files. Safe calls capture nothing; a capture that fails denies.
func TestHookCapturesFilesOfCompensableCalls(t *testing.T) {
	project := t.TempDir()
	log := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	t.Cleanup(func() { log.Close() })
	pol, err := LoadPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	pol.Project = project // the Write's file is in it
	files := &snapshots{}
	h := &Hook{Lifecycle: &lifecycle.Lifecycle{Log: log, Lease: ToolLease}, Policy: pol, Actor: "claude-code", Wait: time.Second, Files: files}
	event := func(name, tool, input string) Event {
		return Event{SessionID: "s-1", Cwd: project, HookEventName: name, ToolName: tool, ToolInput: json.RawMessage(input),
			ToolUseID: "toolu_1", ToolResponse: json.RawMessage(`{"ok":true}`)}
	}
	write := `{"file_path":"` + filepath.Join(project, "a.txt") + `","content":"x"}`
	for _, c := range []struct{ tool, input string }{{"Read", `{"file_path":"a.txt"}`}, {"Write", write}, {"Bash", `{"command":"make"}`}} {
		if d := h.Pre(t.Context(), event(PreToolUse, c.tool, c.input)); d.Permission != Allow {
			t.Fatalf("%s: %+v", c.tool, d)
		}
		if err := h.Post(t.Context(), event(PostToolUse, c.tool, c.input)); err != nil {
			t.Fatalf("%s post: %v", c.tool, err)
		}
	}
	if len(files.before) != 2 || !slices.Equal(files.before[0], []string{filepath.Join(project, "a.txt")}) || files.before[1] != nil {
		t.Fatalf("captures %q: want Write's file, then all of the project for Bash, none for Read", files.before)
	}
	effects, _, err := log.ListEffects(t.Context(), effectlog.EffectFilter{Session: "s-1", Ascending: true})
	if err != nil || len(effects) != 2 {
		t.Fatalf("effects %+v %v", effects, err)
	}
	for i, e := range effects {
		d, err := log.GetEffect(t.Context(), e.ID)
		if err != nil || d.Undo == nil || !slices.Equal(d.Undo.Compensation.Argv, []string{"undolog", "files", "restore", project, "snap-1"}) {
			t.Fatalf("effect %d's compensation: %+v %v", e.ID, d.Undo, err)
		}
		if len(files.after) != 2 || !slices.Equal(files.after[i].Argv, d.Undo.Compensation.Argv) {
			t.Fatalf("After got %+v, want each call's compensation", files.after)
		}
	}
	files.fail = errors.New("disk full")
	if d := h.Pre(t.Context(), event(PreToolUse, "Edit", write)); d.Permission != Deny {
		t.Fatalf("a capture that failed: %+v, want deny", d)
	}
	if after, _, _ := log.ListEffects(t.Context(), effectlog.EffectFilter{Session: "s-1"}); len(after) != 2 {
		t.Fatalf("a call whose capture failed was recorded: %+v", after)
	}
}

// An irreversible call that committed is denied when made again, with its
// outcome; a rule that says replay: retry makes its repeats new calls,
// held for a decision again. A compensable repeat after its PostToolUse
// runs again.
func TestHookRepeats(t *testing.T) {
	log := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	t.Cleanup(func() { log.Close() })
	pol, err := policy.ParsePolicy([]byte("tools:\n  Push: {tier: irreversible}\n  Deploy: {tier: irreversible, replay: retry}\n  Write: {tier: compensable}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := &Hook{Lifecycle: &lifecycle.Lifecycle{Log: log, Lease: ToolLease}, Policy: pol, Actor: "claude-code", Wait: 50 * time.Millisecond}
	event := func(name, tool string) Event {
		return Event{SessionID: "s-1", HookEventName: name, ToolName: tool, ToolInput: json.RawMessage(`{"x":1}`), ToolResponse: json.RawMessage(`"done"`)}
	}
	once := func(tool string) {
		t.Helper()
		if d := h.Pre(t.Context(), event(PreToolUse, tool)); d.Permission != Deny {
			t.Fatalf("%s undecided: %+v", tool, d)
		}
		pending, _, err := log.ListEffects(t.Context(), effectlog.EffectFilter{Session: "s-1", Tool: tool, State: "pending"})
		if err != nil || len(pending) != 1 {
			t.Fatalf("%s pending: %+v %v", tool, pending, err)
		}
		if _, err := log.Approve(t.Context(), pending[0].ID, model.Change{Actor: "ops"}); err != nil {
			t.Fatal(err)
		}
		if d := h.Pre(t.Context(), event(PreToolUse, tool)); d.Permission != Allow {
			t.Fatalf("%s approved: %+v", tool, d)
		}
		if err := h.Post(t.Context(), event(PostToolUse, tool)); err != nil {
			t.Fatal(err)
		}
	}
	once("Push")
	if d := h.Pre(t.Context(), event(PreToolUse, "Push")); d.Permission != Deny || !strings.Contains(d.Reason, "already ran") || !strings.Contains(d.Reason, `"done"`) {
		t.Fatalf("Push again: %+v, want deny with its outcome", d)
	}
	once("Deploy")
	if d := h.Pre(t.Context(), event(PreToolUse, "Deploy")); d.Permission != Deny || !strings.Contains(d.Reason, "awaits a person's approval") {
		t.Fatalf("Deploy again (replay: retry): %+v, want held again as a new call", d)
	}
	for range 2 {
		if d := h.Pre(t.Context(), event(PreToolUse, "Write")); d.Permission != Allow {
			t.Fatalf("Write: %+v", d)
		}
		if err := h.Post(t.Context(), event(PostToolUse, "Write")); err != nil {
			t.Fatal(err)
		}
	}
	if writes, _, _ := log.ListEffects(t.Context(), effectlog.EffectFilter{Session: "s-1", Tool: "Write", State: "committed"}); len(writes) != 2 {
		t.Fatalf("a compensable repeat: %d committed Writes, want 2 (it ran again)", len(writes))
	}
}

// The same Bash command with another description (the model's words about
// it, not the command), or spaced otherwise, is the same call: a git push
// made again is denied with its outcome, and its PostToolUse finds the
// call its PreToolUse began.
func TestHookBashRepeatIgnoresDescriptionAndLayout(t *testing.T) {
	log := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	t.Cleanup(func() { log.Close() })
	pol, err := LoadPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	h := &Hook{Lifecycle: &lifecycle.Lifecycle{Log: log, Lease: ToolLease}, Policy: pol, Actor: "claude-code", Wait: 50 * time.Millisecond}
	command := "git push origin main"
	push := func(name, description string) Event {
		return Event{SessionID: "s-1", HookEventName: name, ToolName: "Bash", ToolResponse: json.RawMessage(`{"stdout":"pushed"}`),
			ToolInput: json.RawMessage(`{"command":` + strconv.Quote(command) + `,"description":` + strconv.Quote(description) + `}`)}
	}
	if d := h.Pre(t.Context(), push(PreToolUse, "Push the branch")); d.Permission != Deny {
		t.Fatalf("undecided push: %+v", d)
	}
	pending, _, err := log.ListEffects(t.Context(), effectlog.EffectFilter{Session: "s-1", State: "pending"})
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending: %+v %v", pending, err)
	}
	if _, err := log.Approve(t.Context(), pending[0].ID, model.Change{Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	if d := h.Pre(t.Context(), push(PreToolUse, "Push main to origin")); d.Permission != Allow {
		t.Fatalf("approved push, described otherwise: %+v", d)
	}
	if err := h.Post(t.Context(), push(PostToolUse, "Push it")); err != nil {
		t.Fatalf("post, described otherwise: %v", err)
	}
	if d := h.Pre(t.Context(), push(PreToolUse, "Retry the push")); d.Permission != Deny || !strings.Contains(d.Reason, "already ran") || !strings.Contains(d.Reason, "pushed") {
		t.Fatalf("push again with another description: %+v, want deny with its outcome", d)
	}
	// Spaced otherwise, or with a comment: the same script.
	for _, command = range []string{"git  push origin\tmain \n", "git push origin main  # once more"} {
		if d := h.Pre(t.Context(), push(PreToolUse, "Push")); d.Permission != Deny || !strings.Contains(d.Reason, "already ran") {
			t.Fatalf("push again as %q: %+v, want deny with its outcome", command, d)
		}
	}
	if ran, _, _ := log.ListEffects(t.Context(), effectlog.EffectFilter{Session: "s-1", State: "committed"}); len(ran) != 1 {
		t.Fatalf("%d committed pushes, want 1", len(ran))
	}
}
