package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/undolog/undolog/internal/mcpwire"
)

// serverLacks tells whether the server does not have the tool: not in its
// tools/list, asked for whole now if the tool is not among those known (it
// may have been added since). Such a call is the server's to answer ("tool
// not found"), not a call to log or hold for approval. A list that cannot
// be had says nothing: the call is classified as any other.
func (p *Proxy) serverLacks(ctx context.Context, tool string) bool {
	if p.listed(tool) {
		return false
	}
	// Bounded: a server that does not answer tools/list (or the end of the
	// run) must not hold the call.
	ctx, stop := p.approvalContext(ctx)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, toolListWait)
	defer cancel()
	if !p.fetchTools(ctx) {
		return false
	}
	return !p.listed(tool)
}

// toolListWait bounds how long a call waits for the server's tool list.
const toolListWait = 10 * time.Second

func (p *Proxy) listed(tool string) bool {
	_, ok := p.tools.lookup(tool)
	return ok
}

// fetchTools asks the server for its whole tool list (every page) and
// learns it; false if it could not be had.
func (p *Proxy) fetchTools(ctx context.Context) bool {
	cursor := ""
	for range 1000 { // a bound against a server whose cursors never end
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		m, err := p.request(ctx, "tools/list", params)
		if err != nil {
			p.note("tools/list: %v", err)
			return false
		}
		var page struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if mcpwire.Unmarshal(m.Result, &page) != nil || page.Tools == nil {
			p.note("tools/list: no tool list in the answer")
			return false
		}
		if cursor = p.learnAnnotations(m.Result); cursor == "" {
			return true
		}
	}
	return false
}

// toolsChanged forgets that the tool list is known when the server says it
// changed: the next call that needs it asks again.
func (p *Proxy) toolsChanged(m message) {
	if m.Method == "notifications/tools/list_changed" {
		p.tools.changed()
	}
}

// learnAnnotations keeps each tool's readOnlyHint from a tools/list result
// and returns the cursor of its next page ("" on the last, or when it
// taught nothing).
func (p *Proxy) learnAnnotations(result json.RawMessage) string {
	next, err := p.tools.learn(result)
	if errors.As(err, new(*mcpwire.KeyError)) {
		p.note("a tool list the client may read otherwise was not learned from: %v", err)
	}
	return next
}

// readOnly tells whether the server annotates the tool readOnlyHint, asking
// for the whole tool list first if it is not known (the client has not
// asked for it, or it changed since).
func (p *Proxy) readOnly(ctx context.Context, tool string) (readOnly, known bool) {
	if !p.tools.known() {
		p.fetchTools(ctx)
	}
	return p.tools.lookup(tool)
}
