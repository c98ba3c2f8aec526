package mcpwire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"
)

// stdioConn is the stdio transport: one JSON-RPC message a line.
type stdioConn struct {
	r     *bufio.Reader
	mu    sync.Mutex
	w     io.Writer
	close func() error
}

// NewStdioConn is the stdio transport over r and w (a client's stdin and
// stdout); closing it closes w if w is an io.Closer.
func NewStdioConn(r io.Reader, w io.Writer) Conn {
	c := &stdioConn{r: bufio.NewReaderSize(r, 64<<10), w: w, close: func() error { return nil }}
	if wc, ok := w.(io.Closer); ok {
		c.close = wc.Close
	}
	return c
}

// Read returns the next non-blank line (a copy, trimmed). A line over
// maxLine is read to its end and skipped: a *TooLargeError, after which the
// next line is read as usual.
func (c *stdioConn) Read() ([]byte, error) {
	for {
		var line []byte
		over := false
		for {
			chunk, err := c.r.ReadSlice('\n')
			if !over && len(line)+len(chunk) > maxLine+2 { // +2: a CRLF ending
				over = true
				line = append(line, chunk[:min(len(chunk), 64<<10)]...)
			} else if !over {
				line = append(line, chunk...)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			if over {
				return nil, TooLarge(line)
			}
			if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
				if len(trimmed) > maxLine {
					return nil, TooLarge(trimmed)
				}
				return trimmed, nil
			}
			if err != nil {
				return nil, io.EOF
			}
			break
		}
	}
}

// Write writes msg as one line. A message that spans lines (pretty-printed
// by an HTTP peer: a POST to --listen, an answer over --url) is compacted,
// for a reader takes each line for a message and would answer none.
func (c *stdioConn) Write(msg []byte) error {
	msg = bytes.TrimRight(msg, "\r\n")
	if bytes.ContainsAny(msg, "\r\n") {
		var line bytes.Buffer
		if err := json.Compact(&line, msg); err != nil {
			return fmt.Errorf("a message on many lines that is not JSON: %w", err)
		}
		msg = line.Bytes()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.w.Write(append(append(make([]byte, 0, len(msg)+1), msg...), '\n')) // not into the caller's array
	return err
}

func (c *stdioConn) Close() error { return c.close() }

// Start starts an MCP server command set up by the caller (its directory,
// environment, stderr; its stdin and stdout unset) and connects to its
// stdio. Closing the Conn closes the server's stdin, waits up to 5 s for it
// to exit, then kills it; it returns how the server ended.
func Start(cmd *exec.Cmd) (Conn, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start upstream server %s: %w", cmd.Args[0], err)
	}
	c := NewStdioConn(stdout, stdin).(*stdioConn)
	var once sync.Once
	var exit error // how the server ended: the proxy's error names it when it exited first
	c.close = func() error {
		once.Do(func() {
			stdin.Close()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case exit = <-done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				exit = <-done
			}
		})
		return exit
	}
	return c, nil
}
