package mcpwire

import (
	"encoding/json"
	"strconv"
)

// IDKey is what a JSON-RPC id is known by: its value as a server reads it,
// not its spelling. A server reads an id and writes it back its own way,
// and its answer must still find its request: "\u0061" as "a", a number as
// the double it reads (1.0 as 1, 9007199254740993 as ...992, -0 as 0),
// bytes that are not UTF-8 and lone surrogates as U+FFFD. Ids that differ
// only so are one id.
func IDKey(id json.RawMessage) string {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return "?" + string(id)
	}
	switch x := v.(type) {
	case float64:
		if x == 0 {
			x = 0 // -0 too
		}
		return "n" + strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return "s" + x
	}
	return "?" + string(id) // not an id MCP allows
}

// ValidRequestID tells whether id is one MCP allows a request: a string or
// a number a server can read (not null, a boolean, an array, an object, or
// a number past a double's range, which a server in JavaScript reads as
// Infinity and writes back as null).
func ValidRequestID(id json.RawMessage) bool {
	k := IDKey(id)
	return len(k) > 0 && k[0] != '?'
}
