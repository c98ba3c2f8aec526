package proxy

import (
	"errors"
	"io"
	"net/http"
	"os/exec"

	"github.com/undolog/undolog/internal/child"
	"github.com/undolog/undolog/internal/mcpwire"
)

// The transports live in internal/mcpwire, below both the proxy and
// mcpclient; these names keep the proxy's code and its callers as they were.
type (
	// Conn is one side of the proxy (the client's, or the upstream
	// server's); see mcpwire.Conn.
	Conn          = mcpwire.Conn
	TooLargeError = mcpwire.TooLargeError
	LostError     = mcpwire.LostError
)

// NewStdioConn is the stdio transport over r and w (a client's stdin and
// stdout).
func NewStdioConn(r io.Reader, w io.Writer) Conn { return mcpwire.NewStdioConn(r, w) }

// StartCommand starts the upstream server command, its stderr to stderr,
// and connects to its stdio (mcpwire.Start). The server dies with the proxy
// (child.Prepare): a proxy killed outright leaves its calls in doubt,
// and a server finishing one meanwhile would make it beside the retry.
func StartCommand(argv []string, stderr io.Writer) (Conn, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	child.Prepare(cmd)
	return mcpwire.Start(cmd)
}

// DialHTTP is the Streamable HTTP transport to the upstream server at url;
// see mcpwire.DialHTTP.
func DialHTTP(url string, header http.Header, diag io.Writer) Conn {
	return mcpwire.DialHTTP(url, header, diag)
}

func tooLarge(prefix []byte) *TooLargeError { return mcpwire.TooLarge(prefix) }

// eachClientMessage calls fn with each client message c reads, as
// readClientMessage reads it; a message a listen session's POST already
// read is not read again.
func eachClientMessage(c Conn, fn func(message, *refusal), skipped func(error)) error {
	ss, ok := c.(*listenSession)
	if !ok {
		return eachMessage(c, func(line []byte) { fn(readClientMessage(line)) }, skipped)
	}
	for {
		d, err := ss.readDelivered()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		case d.parsed != nil:
			fn(*d.parsed, nil)
		default:
			fn(readClientMessage(d.raw))
		}
	}
}

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
