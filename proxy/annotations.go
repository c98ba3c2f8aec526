package proxy

import (
	"encoding/json"
	"sync"

	"github.com/undolog/undolog/internal/mcpwire"
)

// toolAnnotations is what the server's tool lists said of each tool: its
// readOnlyHint, which classifies a call no policy rule matches. It is
// learned from any tools/list answer, the client's or the proxy's own.
type toolAnnotations struct {
	mu       sync.Mutex
	readOnly map[string]bool // tool -> readOnlyHint, for every tool listed
	// whole says the server's whole list was learned, and has not
	// changed since.
	whole bool
}

// learn keeps each tool's readOnlyHint from a tools/list result, and
// returns the cursor of the list's next page ("" on the last). An error
// says the result taught nothing.
func (a *toolAnnotations) learn(result json.RawMessage) (next string, err error) {
	var r struct {
		Tools []struct {
			Name        string `json:"name"`
			Annotations *struct {
				ReadOnlyHint bool `json:"readOnlyHint"`
			} `json:"annotations"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	if err := mcpwire.Unmarshal(result, &r); err != nil {
		return "", err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.readOnly == nil {
		a.readOnly = map[string]bool{}
	}
	for _, t := range r.Tools {
		a.readOnly[t.Name] = t.Annotations != nil && t.Annotations.ReadOnlyHint
	}
	if r.NextCursor == "" {
		a.whole = true
	}
	return r.NextCursor, nil
}

// known tells whether the whole list was learned.
func (a *toolAnnotations) known() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.whole
}

// lookup returns the tool's readOnlyHint; listed is false for a tool no
// list named.
func (a *toolAnnotations) lookup(tool string) (readOnly, listed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	readOnly, listed = a.readOnly[tool]
	return readOnly, listed
}

// changed forgets that the whole list is known: the server said it
// changed, and the next call that needs it asks again.
func (a *toolAnnotations) changed() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.whole = false
}
