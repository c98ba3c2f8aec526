package mcpwire

import (
	"encoding/json"
	"math"
	"strconv"
)

// IDKey is what a JSON-RPC id is known by: its value as a server reads it,
// not its spelling. A server reads an id and writes it back its own way,
// and its answer must still find its request: "\u0061" as "a", a number as
// the double it reads (1.0 as 1, 9007199254740993 as ...992, -0 as 0),
// bytes that are not UTF-8 and lone surrogates as U+FFFD. Ids that differ
// only so are one id.
func IDKey(id json.RawMessage) string {
	if k, ok := plainIDKey(id); ok {
		return k
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return "?" + string(id)
	}
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 { // as plainIDKey writes it; -0 as 0
			return "n" + strconv.FormatInt(int64(x), 10)
		}
		return "n" + strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return "s" + x
	}
	return "?" + string(id) // not an id MCP allows
}

// plainIDKey is IDKey of the ids clients send (a small integer, a string of
// letters, digits, - and _) without decoding them: a message's id is keyed
// several times on its way.
func plainIDKey(id []byte) (string, bool) {
	switch {
	case len(id) == 0:
		return "", false
	case id[0] >= '1' && id[0] <= '9' && len(id) <= 15, string(id) == "0":
		for _, c := range id {
			if c < '0' || c > '9' {
				return "", false
			}
		}
		return "n" + string(id), true
	case id[0] == '"' && len(id) >= 2 && id[len(id)-1] == '"':
		for _, c := range id[1 : len(id)-1] {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", false
			}
		}
		return "s" + string(id[1:len(id)-1]), true
	}
	return "", false
}

// ValidRequestID tells whether id is one MCP allows a request: a string, or
// an integer a server reads exactly (at most 2^53-1 either way: the MCP SDK
// for JavaScript refuses any other number, 1.5 or a 30-digit one, and then
// answers nothing, so the client would wait for good). Not null, a
// boolean, an array or an object.
func ValidRequestID(id json.RawMessage) bool {
	k := IDKey(id)
	if len(k) == 0 || k[0] == '?' {
		return false
	}
	if k[0] != 'n' {
		return true
	}
	x, err := strconv.ParseFloat(k[1:], 64)
	return err == nil && x == math.Trunc(x) && math.Abs(x) <= 1<<53-1
}
