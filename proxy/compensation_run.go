package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/template"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/mcpclient"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/policy"
	sm "github.com/undolog/undolog/statemachine"
)

// dir is the directory the upstream runs in: where a command compensation
// runs at undo.
func (p *Proxy) dir() string {
	if p.Dir != "" {
		return p.Dir
	}
	d, _ := os.Getwd()
	return d
}

// compensationOf is the compensation a rule records, without its capture.
func (p *Proxy) compensationOf(r *policy.Rule) *model.Compensation {
	switch {
	case r.Compensate != nil:
		return &model.Compensation{Kind: model.CompensationMCP, Tool: r.Compensate.Tool, Args: r.Compensate.Args}
	case r.Cases != nil:
		cases, _ := json.Marshal(r.Cases)
		return &model.Compensation{Kind: model.CompensationCases, Args: cases, Dir: p.dir()}
	}
	return nil
}

// intercept registers a call with its rule's compensation. A rule that
// captures first looks the call up without writing: a repeat the log
// answers never reaches the server, and only a call that is to run anew
// pays for its capture. failed is the tool error to answer with when a
// capture failed and the call was not made.
func (p *Proxy) intercept(ctx context.Context, lc *lifecycle.Lifecycle, req effectlog.InterceptRequest, r *policy.Rule) (call *lifecycle.Call, failed []byte, err error) {
	logCall := func(req effectlog.InterceptRequest) (*lifecycle.Call, []byte, error) {
		call, refusal, err := p.logCall(ctx, lc, req)
		if refusal != "" {
			return nil, toolErrorResult(refusal), nil
		}
		return call, nil, err
	}
	if r == nil || req.Tier != sm.Compensable || !r.HasCompensation() {
		return logCall(req)
	}
	comp := p.compensationOf(r)
	req.Compensation = comp
	if !r.HasCapture() {
		return logCall(req)
	}
	look := req
	look.NoNewEffect = true
	call, failed, err = logCall(look)
	if err != nil || failed != nil || call.Outcome != model.OutcomeUnregistered {
		return call, failed, err
	}
	capture, failed, err := p.captureAll(ctx, r, req.Tool, req.Args)
	if failed != nil || err != nil {
		return nil, failed, err
	}
	c := *comp
	c.Capture = capture
	req.Compensation = &c
	return logCall(req)
}

// captureAll runs a rule's captures: the one (.capture) or the named ones
// (.capture.NAME).
func (p *Proxy) captureAll(ctx context.Context, r *policy.Rule, tool string, args json.RawMessage) (json.RawMessage, []byte, error) {
	if r.Capture != nil {
		return p.captureCall(ctx, r.Capture, tool, args)
	}
	all := map[string]json.RawMessage{}
	for _, n := range r.Captures {
		v, failed, err := p.captureCall(ctx, n.Call, tool, args)
		if failed != nil || err != nil {
			return nil, failed, err
		}
		all[n.Name] = v
	}
	b, err := json.Marshal(all)
	return b, nil, err
}

// captureCall makes one capture: one tools/call, or one per element when
// its args give an array.
func (p *Proxy) captureCall(ctx context.Context, c *policy.Call, tool string, args json.RawMessage) (json.RawMessage, []byte, error) {
	capArgs, err := template.Eval(c.Args, template.Input{Args: args})
	if err != nil {
		return nil, nil, err
	}
	var list []json.RawMessage
	if json.Unmarshal(capArgs, &list) != nil {
		return p.captureOne(ctx, c, tool, capArgs)
	}
	results := make([]json.RawMessage, 0, len(list))
	for _, a := range list {
		res, failed, err := p.captureOne(ctx, c, tool, a)
		if failed != nil || err != nil {
			return nil, failed, err
		}
		results = append(results, res)
	}
	b, err := json.Marshal(results)
	return b, nil, err
}

// captureOne calls the capture's tool. Its result, failed or not, is the
// whole tool result. A failure stops the call unless the capture is
// optional: the client is then told so with the server's own error, as
// the server gave it.
func (p *Proxy) captureOne(ctx context.Context, c *policy.Call, tool string, capArgs json.RawMessage) (json.RawMessage, []byte, error) {
	r, err := p.request(ctx, "tools/call", map[string]any{"name": c.Tool, "arguments": capArgs})
	var result json.RawMessage
	switch {
	case errors.Is(err, errUpstreamGone) || ctx.Err() != nil:
		return nil, nil, err // the call cannot be made either
	case err != nil:
		// A JSON-RPC error: its message whole, as a tool error would be.
		result = encode(map[string]any{"content": []map[string]string{{"type": "text", "text": err.Error()}}, "isError": true})
	default:
		result = r.Result
	}
	// A capture that is no tool result captured nothing: a failed one.
	if failed, rerr := mcpclient.ToolResult(result); !failed && rerr == nil && err == nil {
		return result, nil, nil
	}
	if c.Optional {
		return result, nil, nil
	}
	return nil, captureFailed(c.Tool, tool, result), nil
}

// captureFailed is the tool error of a call whose capture failed: undolog's
// line, then the content the server answered the capture with.
func captureFailed(captureTool, tool string, result json.RawMessage) []byte {
	var r struct {
		Content []json.RawMessage `json:"content"`
	}
	json.Unmarshal(result, &r)
	note := encode(map[string]string{"type": "text", "text": fmt.Sprintf(
		"undolog: the capture call %s before %s failed, so %s was not made (the policy can mark the capture optional: docs/policy.md). The server said:", captureTool, tool, tool)})
	content := append([]json.RawMessage{note}, r.Content...)
	return encode(map[string]any{"content": content, "isError": true})
}
