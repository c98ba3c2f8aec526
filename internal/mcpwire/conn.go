// Package mcpwire owns MCP's transports as byte-level connections: Conn (one
// JSON-RPC message at a time, as bytes, meaning nothing to it), the stdio
// transport (a server command started, or any reader and writer) and the
// client side of Streamable HTTP (with the headers 2026-07-28 asks of each
// request, taken from the request: stateless.go), with the errors a Conn
// reports for a message it skipped or lost. The proxy (its upstream, and its stdio client
// side) and mcpclient both talk MCP through it; it imports nothing of
// undolog.
package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
)

// MaxMessage bounds one JSON-RPC message (on every transport).
const MaxMessage = 64 << 20

const maxLine = MaxMessage

// ErrClosed is what Write returns once the Conn is closed.
var ErrClosed = errors.New("the MCP connection is closed")

// Conn is one side of an MCP connection (for the proxy: the client's, or the
// upstream server's): it carries JSON-RPC messages, each as the bytes of one
// message, and knows nothing of what they mean. The stdio transport frames
// them as lines (stdio.go), Streamable HTTP as POSTs and server-sent events
// (http.go here, the server side in proxy/transport_listen.go).
type Conn interface {
	// Read returns the next message. io.EOF: the peer is done. A
	// *TooLargeError or *LostError: that message was skipped or lost, the
	// next Read goes on.
	Read() ([]byte, error)
	// Write sends one message.
	Write(msg []byte) error
	// Close ends the connection (for a server it started: stops it).
	Close() error
}

// TooLargeError is a message over maxLine that a Conn skipped; ID is its
// JSON-RPC id when the part read says it, so that it can be answered, and
// Request tells that part named a method.
type TooLargeError struct {
	ID      json.RawMessage
	Request bool
}

// TooLarge reads what it can of the id and method of a message from its
// first bytes (a message is cut, so a full parse fails).
func TooLarge(prefix []byte) *TooLargeError {
	e := &TooLargeError{}
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return e
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return e
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return e
		}
		switch key {
		case "id":
			if v[0] != '{' && v[0] != '[' {
				e.ID = v
			}
		case "method":
			e.Request = true
		}
	}
	return e
}

func (e *TooLargeError) Error() string {
	return "a JSON-RPC message over 64 MiB"
}

// LostError is the answer to request ID that a Conn lost after sending
// the request (an HTTP exchange that broke, a 5xx, a stream that ended
// without it): the server may have acted on it.
type LostError struct {
	ID     json.RawMessage
	Reason string
}

func (e *LostError) Error() string { return e.Reason }

// Peek reads the id and method of a message, if it is an object (an id of
// null reads as none).
func Peek(msg []byte) (id json.RawMessage, method string, ok bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return nil, "", false
	}
	if string(m.ID) == "null" {
		m.ID = nil
	}
	return m.ID, m.Method, true
}

// codeInternal is JSON-RPC's Internal error.
const codeInternal = -32603

// ErrorResponse is a JSON-RPC error answer to id (null when none).
func ErrorResponse(id json.RawMessage, code int, msg string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": msg}})
	return b
}
