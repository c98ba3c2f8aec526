package proxy

import (
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
	// *TooLargeError: that message was skipped, the next Read goes on.
	Read() ([]byte, error)
	// Write sends one message.
	Write(msg []byte) error
	// Close ends the connection (for a server it started: stops it).
	Close() error
}

// TooLargeError is a message over maxLine that a Conn skipped; ID is its
// JSON-RPC id when the part read says it, so that it can be answered.
type TooLargeError struct {
	ID json.RawMessage
}

func (e *TooLargeError) Error() string {
	return "a JSON-RPC message over 64 MiB"
}

// eachMessage calls fn with each message c reads until it ends, and tooBig
// with each message it had to skip; it returns the error that ended it
// (nil at io.EOF).
func eachMessage(c Conn, fn func(msg []byte), tooBig func(id json.RawMessage)) error {
	for {
		msg, err := c.Read()
		var big *TooLargeError
		switch {
		case errors.As(err, &big):
			if tooBig != nil {
				tooBig(big.ID)
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
