package proxy

import (
	"context"
	"encoding/json"

	"github.com/undolog/undolog/internal/mcpwire"
	"github.com/undolog/undolog/lifecycle"
)

// Task-augmented calls (MCP 2025-11-25: a tools/call whose params carry
// "task") are answered by a task handle and their result fetched later with
// tasks/result. A logged call's outcome must be the call's, so the proxy
// runs logged calls as plain calls: it drops "task" (a receiver that does
// not take a task for a call processes it normally, so every client must
// be ready for a plain result). Safe calls pass through as they came.

// plainCall returns the tools/call without its task augmentation.
func (p *Proxy) plainCall(m message) message {
	var params map[string]json.RawMessage
	if json.Unmarshal(m.Params, &params) != nil {
		return m
	}
	if _, ok := params["task"]; !ok {
		return m
	}
	delete(params, "task")
	m.Params = encode(params)
	m.raw = encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "method": m.Method, "params": m.Params})
	p.note("a task-augmented %s call runs as a plain call: its outcome is logged", m.Method)
	return m
}

// taskHandle tells whether a result is a task handle (CreateTaskResult, or
// a result typed "task" as later drafts have it) rather than the outcome.
func taskHandle(result json.RawMessage) bool {
	var r struct {
		Task *struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
		ResultType string `json:"resultType"`
	}
	if mcpwire.Unmarshal(result, &r) != nil {
		return false
	}
	return (r.Task != nil && r.Task.TaskID != "") || r.ResultType == "task"
}

// taskAnswer handles a logged call the server answered with a task handle
// all the same: the outcome is unknown to the log, so nothing is committed
// (a repeat never replays a handle that dies with the server): the effect
// stays executing, its lease stopped, in doubt once this proxy is gone. The
// client gets the handle and can follow the task.
func (p *Proxy) taskAnswer(ctx context.Context, lc *lifecycle.Lifecycle, call *lifecycle.Call, resp message) {
	lc.Finish(ctx, call, lifecycle.Result{Unsettled: true})
	p.note("effect %d (%s): the server answered with a task handle, not the outcome: it stays executing (in doubt): %s",
		call.Effect.ID, call.Effect.Tool, p.resolveHint(call.Effect.ID))
	p.reply(ctx, resp.raw)
}
