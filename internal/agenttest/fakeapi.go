package agenttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Script is what the fake model answers, one Turn a request of the agent's
// main loop (a request that offers tools), in order. When the turns run out
// the model ends the conversation with a text saying so.
type Script []Turn

// Turn is one assistant message: a text, tool calls, or both. With tool
// calls the message stops for tool use, as the real model's does.
type Turn struct {
	Text  string
	Tools []ToolUse
}

// ToolUse is a tool_use block: the tool's name and its input. ID is made up
// (toolu_agenttest_N) when empty.
type ToolUse struct {
	ID    string
	Name  string
	Input map[string]any
}

// Bash is a Bash call of cmd.
func Bash(cmd string) ToolUse {
	return ToolUse{Name: "Bash", Input: map[string]any{"command": cmd, "description": "scripted: " + cmd}}
}

// Write is a Write call of content to path (absolute, as Claude Code wants).
func Write(path, content string) ToolUse {
	return ToolUse{Name: "Write", Input: map[string]any{"file_path": path, "content": content}}
}

// Edit is an Edit call replacing old with new in path. Claude Code refuses an
// Edit of a file its session has not read (or written) first.
func Edit(path, old, new string) ToolUse {
	return ToolUse{Name: "Edit", Input: map[string]any{"file_path": path, "old_string": old, "new_string": new}}
}

// Read is a Read call of path.
func Read(path string) ToolUse {
	return ToolUse{Name: "Read", Input: map[string]any{"file_path": path}}
}

// EndText is the text of the model's last message once the script has run out.
const EndText = "agenttest: the script has ended"

// Request is one request the fake Messages API got.
type Request struct {
	Method, Path string
	Body         json.RawMessage
	// Turn is the index in the Script of the turn answered, or -1 for a
	// request that took none (a side request, one without tools, or one after
	// the script's end).
	Turn int
}

// ToolResult is a tool_result block the agent sent back to the model.
type ToolResult struct {
	ToolUseID string
	Content   string // the text of its content, text blocks joined by newlines
	IsError   bool
}

// ToolResults are the tool_result blocks of the request's last message but
// system ones (Claude Code adds a reminder after many turns): what the model
// reads of the calls of the turn before.
func (r Request) ToolResults() []ToolResult {
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return nil
	}
	for len(body.Messages) > 0 && body.Messages[len(body.Messages)-1].Role == "system" {
		body.Messages = body.Messages[:len(body.Messages)-1]
	}
	if len(body.Messages) == 0 {
		return nil
	}
	var blocks []struct {
		Type      string          `json:"type"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}
	if json.Unmarshal(body.Messages[len(body.Messages)-1].Content, &blocks) != nil {
		return nil // a plain string: no tool results
	}
	var out []ToolResult
	for _, b := range blocks {
		if b.Type == "tool_result" {
			out = append(out, ToolResult{ToolUseID: b.ToolUseID, Content: blockText(b.Content), IsError: b.IsError})
		}
	}
	return out
}

// blockText is the text of a tool_result's content: a string, or text blocks.
func blockText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &blocks)
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// fakeAPI is a Messages API that answers from a Script, streaming when asked
// to, and records every request.
type fakeAPI struct {
	mu       sync.Mutex
	script   Script
	next     int // the next turn of script
	requests []Request
	ids      int // tool_use ids made up
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		Model  string            `json:"model"`
		Stream bool              `json:"stream"`
		Tools  []json.RawMessage `json:"tools"`
	}
	json.Unmarshal(body, &req)

	f.mu.Lock()
	rec := Request{Method: r.Method, Path: r.URL.Path, Body: json.RawMessage(body), Turn: -1}
	var turn Turn
	switch {
	case r.URL.Path == "/v1/messages/count_tokens":
		f.requests = append(f.requests, rec)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":10}`)
		return
	case r.URL.Path != "/v1/messages":
		f.requests = append(f.requests, rec)
		f.mu.Unlock()
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"agenttest: no such endpoint"}}`, http.StatusNotFound)
		return
	case len(req.Tools) > 0 && f.next < len(f.script):
		rec.Turn = f.next
		turn = f.script[f.next]
		f.next++
	default:
		turn = Turn{Text: EndText}
	}
	f.requests = append(f.requests, rec)
	blocks := f.blocks(turn)
	f.mu.Unlock()

	stop := "end_turn"
	if len(turn.Tools) > 0 {
		stop = "tool_use"
	}
	model := req.Model
	if model == "" {
		model = "claude-agenttest"
	}
	msgID := fmt.Sprintf("msg_agenttest_%d", len(f.requests))
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": 10, "output_tokens": 10},
		})
		return
	}
	stream(w, msgID, model, blocks, stop)
}

// blocks are the content blocks of turn, with the tool_use ids made up.
func (f *fakeAPI) blocks(turn Turn) []map[string]any {
	var blocks []map[string]any
	if turn.Text != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": turn.Text})
	}
	for _, t := range turn.Tools {
		id := t.ID
		if id == "" {
			f.ids++
			id = fmt.Sprintf("toolu_agenttest_%d", f.ids)
		}
		input := t.Input
		if input == nil {
			input = map[string]any{}
		}
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": id, "name": t.Name, "input": input})
	}
	return blocks
}

// stream writes the message as the Messages API streams one (server-sent
// events): message_start, each block's start, delta and stop, message_delta
// with the stop reason, message_stop.
func stream(w http.ResponseWriter, id, model string, blocks []map[string]any, stop string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	event := func(name string, data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 10, "output_tokens": 1},
	}})
	for i, b := range blocks {
		switch b["type"] {
		case "text":
			event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		case "tool_use":
			input, _ := json.Marshal(b["input"])
			event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		}
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 10}})
	event("message_stop", map[string]any{"type": "message_stop"})
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

// Requests returns the requests got so far.
func (f *fakeAPI) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}
