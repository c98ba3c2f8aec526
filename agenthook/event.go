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
	"strings"

	"mvdan.cc/sh/v3/syntax"

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

// shellCommand is the field of a tool's input that is a shell script.
var shellCommand = map[string]string{"Bash": "command"}

// CallArgs are the call's args as the log records and matches them: the
// tool input without its free-text fields, and a shell command in the
// shell parser's layout (its spacing and comments aside), so that the
// same command described or spaced otherwise is the same call (a git push
// made again is answered from the log). Input that is no JSON object, and
// a script that does not parse, are kept as they are.
func (ev Event) CallArgs() json.RawMessage {
	drop, script := freeText[ev.ToolName], shellCommand[ev.ToolName]
	if len(drop) == 0 && script == "" {
		return ev.ToolInput
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(ev.ToolInput, &fields) != nil || fields == nil {
		return ev.ToolInput
	}
	for _, f := range drop {
		delete(fields, f)
	}
	if raw, ok := fields[script]; ok {
		fields[script] = canonicalScript(raw)
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

// Decision is a PreToolUse hook's answer: the permission, the reason the
// model reads, and a message for the person (Claude Code's systemMessage,
// shown to the user, not to the model): what to run to decide.
type Decision struct {
	Permission string
	Reason     string
	Message    string
}

// Answer is what the hook writes on stdout for event: a PreToolUse
// decision, or nothing to say ({}).
func Answer(event string, d *Decision) []byte {
	if event != PreToolUse || d == nil {
		return []byte("{}\n")
	}
	out := struct {
		SystemMessage      string `json:"systemMessage,omitempty"`
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
	out.SystemMessage = textfmt.Escape(d.Message)
	b, _ := json.Marshal(out)
	return append(b, '\n')
}

// canonicalScript is a JSON string holding a shell script, printed again
// by the shell parser: one layout, whatever spacing or comments it was
// written with. Anything else comes back as it is.
func canonicalScript(raw json.RawMessage) json.RawMessage {
	var src string
	if json.Unmarshal(raw, &src) != nil {
		return raw
	}
	file, err := syntax.NewParser().Parse(strings.NewReader(src), "")
	if err != nil {
		return raw
	}
	var b strings.Builder
	if syntax.NewPrinter().Print(&b, file) != nil {
		return raw
	}
	out, err := json.Marshal(strings.TrimSpace(b.String()))
	if err != nil {
		return raw
	}
	return out
}
