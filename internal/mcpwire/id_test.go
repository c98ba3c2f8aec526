package mcpwire

import (
	"encoding/json"
	"testing"
)

// TestIDKey: ids a server reads as one value are one key; others differ;
// ids MCP does not allow are not valid.
func TestIDKey(t *testing.T) {
	same := [][]string{
		{`1`, `1.0`, `1e0`, ` 1 `},
		{`0`, `-0`, `1e-400`},
		{`9007199254740993`, `9007199254740992`},
		{`"a"`, `"\u0061"`},
		{`"a/b"`, `"a\/b"`},
		{`"\ud800"`, `"\ufffd"`, "\"\xff\""},
	}
	seen := map[string]int{}
	for i, group := range same {
		for _, id := range group {
			k := IDKey(json.RawMessage(id))
			if j, ok := seen[k]; ok && j != i {
				t.Errorf("%s has the key of group %d", id, j)
			}
			seen[k] = i
			if IDKey(json.RawMessage(group[0])) != k {
				t.Errorf("%s and %s differ", id, group[0])
			}
			if !ValidRequestID(json.RawMessage(id)) {
				t.Errorf("%s is not valid", id)
			}
		}
	}
	for _, id := range []string{`null`, `true`, `[1]`, `{"a":1}`, `1e400`, ``, `x`} {
		if ValidRequestID(json.RawMessage(id)) {
			t.Errorf("%s is valid", id)
		}
	}
}
