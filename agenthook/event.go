// Package agenthook owns the door of a coding agent's hooks (Claude Code
// first): reading the events its hooks get, answering them in its format,
// and taking each tool call through the call flow across two processes:
// Begin in the PreToolUse hook (the call held there for a person when it is
// irreversible), Adopt and Finish in the PostToolUse or PostToolUseFailure
// one. The agent runs the tool itself, between them; the door only
// translates.
package agenthook

import (
	"encoding/json"
	"fmt"

	"github.com/undolog/undolog/internal/textfmt"
)

// Claude Code's hook events the door acts on; any other is answered as a
// no-op.
const (
	PreToolUse         = "PreToolUse"
	PostToolUse        = "PostToolUse"
	PostToolUseFailure = "PostToolUseFailure"
)

// Event is one hook event as Claude Code writes it on the hook's stdin.
type Event struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	HookEventName  string          `json:"hook_event_name"`
	PermissionMode string          `json:"permission_mode"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	// PostToolUse.
	ToolResponse json.RawMessage `json:"tool_response"`
	DurationMS   int64           `json:"duration_ms"`
	// PostToolUseFailure.
	Error       json.RawMessage `json:"error"`
	IsInterrupt bool            `json:"is_interrupt"`
}

// ReadEvent parses one event.
func ReadEvent(data []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return Event{}, fmt.Errorf("the hook's input is not a Claude Code hook event: %v", err)
	}
	if ev.HookEventName == "" {
		return Event{}, fmt.Errorf("the hook's input has no hook_event_name")
	}
	return ev, nil
}

// freeText are the fields of a tool's input that are the model's
// commentary on the call rather than the call: Bash's description.
var freeText = map[string][]string{"Bash": {"description"}}

// CallArgs are the call's args as the log records and matches them: the
// tool input without its free-text fields, so that the same command
// described in other words is the same call (a git push made again is
// answered from the log). Input that is no JSON object is kept as it is.
func (ev Event) CallArgs() json.RawMessage {
	drop := freeText[ev.ToolName]
	if len(drop) == 0 {
		return ev.ToolInput
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(ev.ToolInput, &fields) != nil || fields == nil {
		return ev.ToolInput
	}
	for _, f := range drop {
		delete(fields, f)
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return ev.ToolInput
	}
	return out
}

// Tool tells whether the event is about a tool call the door acts on.
func (ev Event) Tool() bool {
	switch ev.HookEventName {
	case PreToolUse, PostToolUse, PostToolUseFailure:
		return true
	}
	return false
}

// Permission decisions of a PreToolUse answer.
const (
	Allow = "allow"
	Deny  = "deny"
	// Defer ends a headless run (claude -p) with the call pending; a later
	// claude -p --resume asks the hook again.
	Defer = "defer"
)

// Decision is a PreToolUse hook's answer: the permission, and the reason
// the model reads.
type Decision struct {
	Permission string
	Reason     string
}

// Answer is what the hook writes on stdout for event: a PreToolUse
// decision, or nothing to say ({}).
func Answer(event string, d *Decision) []byte {
	if event != PreToolUse || d == nil {
		return []byte("{}\n")
	}
	out := struct {
		HookSpecificOutput struct {
			HookEventName            string `json:"hookEventName"`
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason,omitempty"`
		} `json:"hookSpecificOutput"`
	}{}
	out.HookSpecificOutput.HookEventName = PreToolUse
	out.HookSpecificOutput.PermissionDecision = d.Permission
	// Claude Code shows the reason in its terminal: stored text (a
	// person's reason, a result) is escaped as undolog prints it.
	out.HookSpecificOutput.PermissionDecisionReason = textfmt.Escape(d.Reason)
	b, _ := json.Marshal(out)
	return append(b, '\n')
}
