package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/undolog/undolog/internal/mcpwire"
)

// unparsed is the answer to a client message encoding/json refused, with
// its id: a message nested deeper than the decoder's limit (10000 levels)
// is still JSON, so it is an invalid request answered with the id read
// from its top level, and its caller is not left waiting; anything else is
// a parse error (id null).
func unparsed(msg []byte, err error) (id json.RawMessage, code int, text string) {
	var syn *json.SyntaxError
	if errors.As(err, &syn) && strings.HasSuffix(syn.Error(), "exceeded max depth") {
		return topLevelID(msg), codeInvalidRequest, "invalid request: the message nests deeper than 10000 levels, the proxy's limit; it was not passed on"
	}
	return nil, codeParse, "parse error: " + err.Error()
}

// topLevelID is the "id" member of the object msg, read without decoding
// the other members (which may nest deeper than a decoder allows); nil when
// msg is not an object or its id is not a string or a number. Of two ids
// the last counts, as encoding/json has it; in a message broken further on
// (cut short, say), the last before the break.
func topLevelID(msg []byte) json.RawMessage {
	var id json.RawMessage
	eachTopLevelID(msg, func(start, end int) {
		id = nil
		if v := msg[start:end]; (v[0] == '"' || v[0] == '-' || v[0] >= '0' && v[0] <= '9') && json.Valid(v) {
			id = bytes.Clone(v)
		}
	})
	return id
}

// eachTopLevelID calls found with where the value of each "id" member of
// the object msg is, in order, up to the end of msg or a break in it.
func eachTopLevelID(msg []byte, found func(start, end int)) {
	i := skipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return
	}
	for i = skipSpace(msg, i+1); i < len(msg) && msg[i] != '}'; {
		keyEnd := skipValue(msg, i)
		if msg[i] != '"' || keyEnd < 0 {
			return
		}
		key := msg[i:keyEnd]
		if i = skipSpace(msg, keyEnd); i >= len(msg) || msg[i] != ':' {
			return
		}
		i = skipSpace(msg, i+1)
		end := skipValue(msg, i)
		if end < 0 {
			return
		}
		if string(key) == `"id"` || bytes.IndexByte(key, '\\') >= 0 && isIDKey(key) {
			found(i, end)
		}
		if i = skipSpace(msg, end); i < len(msg) && msg[i] == ',' {
			i = skipSpace(msg, i+1)
		}
	}
}

// isIDKey tells whether the JSON string key, escaped, reads "id".
func isIDKey(key []byte) bool {
	var k string
	return json.Unmarshal(key, &k) == nil && k == "id"
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipValue is the end of the JSON value that starts at b[i], found by
// counting brackets outside strings (no depth limit), or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	depth := 0
	for j := i; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			for j++; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
			if j >= len(b) {
				return -1
			}
			if depth == 0 {
				return j + 1
			}
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth == 0 { // the end of the scalar at b[i:j], if any
				if j == i {
					return -1
				}
				return j
			}
			if depth--; depth == 0 {
				return j + 1
			}
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n'):
			if j == i {
				return -1
			}
			return j
		}
	}
	if depth == 0 && i < len(b) {
		return len(b) // a scalar that ends the input
	}
	return -1
}

// clientTooBig answers a client message over maxLine, which was not passed
// on: the proxy goes on with the next one. The reply has the message's id
// when its first bytes say it, so a request gets its answer.
func (p *Proxy) clientTooBig(err error) {
	var big *TooLargeError
	if !errors.As(err, &big) {
		return
	}
	p.note("a client message over 64 MiB was refused (id %s)", idOrNone(big.ID))
	if big.Request && len(big.ID) == 0 {
		return // a notification: nothing to answer
	}
	p.writeClient(errorResponse(big.ID, codeInvalidRequest, "invalid request: the message is over 64 MiB, the proxy's limit; it was not passed on"))
}

// upstreamSkipped drops a server message over maxLine, or handles an answer
// the transport lost: a request of the server's is answered with an error,
// an answer to the client becomes an error for that id, and one the proxy
// waits for is lost as if the server had gone (a logged call stays in
// doubt, for the server may have acted on it).
func (p *Proxy) upstreamSkipped(err error) {
	var big *TooLargeError
	var lost *LostError
	var id json.RawMessage
	text := "the upstream server's answer is over 64 MiB, the proxy's limit; it was dropped"
	switch {
	case errors.As(err, &big):
		p.note("a server message over 64 MiB was dropped (id %s)", idOrNone(big.ID))
		if big.Request && len(big.ID) > 0 {
			p.writeUpstream(errorResponse(big.ID, codeInvalidRequest, "invalid request: the message is over 64 MiB, the proxy's limit"))
			return
		}
		id = big.ID
	case errors.As(err, &lost):
		p.note("the answer to %s was lost: %s", idOrNone(lost.ID), lost.Reason)
		id, text = lost.ID, lost.Reason+"; it may have run"
	}
	if len(id) == 0 {
		return
	}
	if ch, ours := p.awaited.take(id); ours {
		// As when the server is gone: a logged call it answered stays
		// executing (in doubt), for it may have had its effect.
		close(ch)
		return
	}
	p.writeClient(errorResponse(id, codeInternal, text))
}

// idKey is what the proxy knows a JSON-RPC id by: its value, as a server
// reads it (mcpwire.IDKey).
func idKey(id json.RawMessage) string { return mcpwire.IDKey(id) }

// oneLineID is an id as an error message quotes it: at most 64 bytes.
func oneLineID(id json.RawMessage) string {
	if len(id) > 64 {
		return string(id[:64]) + "..."
	}
	return string(id)
}

func idOrNone(id json.RawMessage) string {
	if len(id) == 0 {
		return "none"
	}
	return string(id)
}
