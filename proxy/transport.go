package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// Conn is one side of the proxy (the client's, or the upstream server's): it
// carries JSON-RPC messages, each as the bytes of one message, and knows
// nothing of what they mean. The stdio transport frames them as lines
// (transport_stdio.go), Streamable HTTP as POSTs and server-sent events
// (transport_http.go, transport_listen.go).
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

// tooLarge reads what it can of the id and method of a message from its
// first bytes (a message is cut, so a full parse fails).
func tooLarge(prefix []byte) *TooLargeError {
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

// eachMessage calls fn with each message c reads until it ends, and skipped
// with each *TooLargeError or *LostError; it returns the error that ended
// it (nil at io.EOF).
func eachMessage(c Conn, fn func(msg []byte), skipped func(error)) error {
	for {
		msg, err := c.Read()
		var big *TooLargeError
		var lost *LostError
		switch {
		case errors.As(err, &big), errors.As(err, &lost):
			if skipped != nil {
				skipped(err)
			}
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		fn(msg)
	}
}
