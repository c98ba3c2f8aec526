package mcpwire

import (
	"encoding/json"
	"strconv"
	"testing"
)

// TestIDKey: ids a server reads as one value are one key; others differ;
// ids MCP does not allow are not valid.
func TestIDKey(t *testing.T) {
	same := [][]string{
		{`1`, `1.0`, `1e0`, ` 1 `},
		{`0`, `-0`, `1e-400`},
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
	// The fast path agrees with the decoding one.
	for _, id := range []string{`0`, `7`, `123456789012345`, `"a"`, `"req-1_B"`, `""`} {
		k, ok := plainIDKey([]byte(id))
		if !ok {
			t.Errorf("%s takes the slow path", id)
		}
		var v any
		json.Unmarshal([]byte(id), &v)
		if k != IDKey(json.RawMessage(id+" ")) { // the trailing space takes the slow path
			t.Errorf("%s: fast key %q, slow %q", id, k, IDKey(json.RawMessage(id+" ")))
		}
		if f, isNum := v.(float64); isNum && k != "n"+strconv.FormatInt(int64(f), 10) || !isNum && k != "s"+v.(string) {
			t.Errorf("%s: fast key %q", id, k)
		}
	}
	for _, id := range []string{`07`, `1234567890123456`, `-1`, `1.0`, `"a b"`, `"\u0061"`, `"`} {
		if _, ok := plainIDKey([]byte(id)); ok {
			t.Errorf("%s takes the fast path", id)
		}
	}
	for _, id := range []string{`null`, `true`, `[1]`, `{"a":1}`, `1e400`, ``, `x`,
		`1.5`, `-0.5`, `9007199254740992`, `-9007199254740992`, `9007199254740993`, `123456789012345678901234567890`} {
		if ValidRequestID(json.RawMessage(id)) {
			t.Errorf("%s is valid", id)
		}
	}
	// Ids that differ past a double's precision are still one key.
	if IDKey(json.RawMessage(`9007199254740993`)) != IDKey(json.RawMessage(`9007199254740992`)) {
		t.Error("9007199254740993 and ...992 differ")
	}
	for _, id := range []string{`9007199254740991`, `-9007199254740991`, `1e3`} {
		if !ValidRequestID(json.RawMessage(id)) {
			t.Errorf("%s is not valid", id)
		}
	}
}

// FuzzIDKey: the fast path gives what decoding gives.
func FuzzIDKey(f *testing.F) {
	for _, s := range []string{`1`, `"a"`, `123456789012345`, `"x-Y_9"`, `0`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if k, ok := plainIDKey([]byte(id)); ok && k != IDKey(json.RawMessage(id+" ")) {
			t.Fatalf("%q: fast %q, slow %q", id, k, IDKey(json.RawMessage(id+" ")))
		}
	})
}
