package textfmt

import (
	"bytes"
	"io"
	"unicode/utf8"
)

// EscapingWriter passes what is written to it on to its writer escaped as
// Escape does, newlines aside: for a command's output shown to an operator,
// which must not retitle the window either. A character cut across two
// writes is held until its rest comes, so that it is escaped (or kept) as one.
type EscapingWriter struct {
	w       io.Writer
	pending []byte // the start of a character whose rest has not come yet
}

// NewEscapingWriter writes to w; call Flush once the output has ended.
func NewEscapingWriter(w io.Writer) *EscapingWriter { return &EscapingWriter{w: w} }

// Write escapes p; it reports all of p written when w took its escaped form.
func (e *EscapingWriter) Write(p []byte) (int, error) {
	buf := append(e.pending, p...)
	done := len(buf) - incompleteTail(buf)
	if err := e.write(buf[:done]); err != nil {
		return 0, err
	}
	e.pending = append(e.pending[:0], buf[done:]...)
	return len(p), nil
}

// Flush writes what is held: a character that never completed is bytes
// that are not UTF-8, escaped as such.
func (e *EscapingWriter) Flush() error {
	err := e.write(e.pending)
	e.pending = e.pending[:0]
	return err
}

func (e *EscapingWriter) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	// A newline is never part of a longer UTF-8 sequence: lines are escaped
	// one by one.
	var out []byte
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if out != nil {
			out = append(out, '\n')
		} else {
			out = make([]byte, 0, len(b)+8)
		}
		out = append(out, Escape(string(line))...)
	}
	_, err := e.w.Write(out)
	return err
}

// incompleteTail is how many bytes at the end of b begin a UTF-8 character
// that b does not complete.
func incompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		switch c := b[i]; {
		case c < 0x80:
			return 0
		case c >= 0xc0: // a first byte
			if utf8.FullRune(b[i:]) {
				return 0
			}
			return len(b) - i
		}
	}
	return 0
}
