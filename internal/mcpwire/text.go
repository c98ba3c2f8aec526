package mcpwire

import (
	"fmt"
	"unicode/utf8"
)

// TextError is where a message stops being UTF-8: Go reads each bad byte as
// U+FFFD, Node.js a whole bad sequence as one, so a server in JavaScript
// would read other text than the proxy logged and classified.
type TextError struct {
	Offset int // the first bad byte
}

func (e *TextError) Error() string {
	return fmt.Sprintf("the message is not UTF-8 at byte %d; servers replace such bytes, each its own way", e.Offset)
}

// TextReadTwoWays is the first place in msg that a reader in Go and one in
// JavaScript read as different text; nil if none. (An escaped lone
// surrogate, "\ud800", is read one way where it matters: the log keeps the
// escape as sent.)
func TextReadTwoWays(msg []byte) *TextError {
	if utf8.Valid(msg) {
		return nil
	}
	for i := 0; i < len(msg); {
		r, size := utf8.DecodeRune(msg[i:])
		if r == utf8.RuneError && size <= 1 {
			return &TextError{Offset: i}
		}
		i += size
	}
	return nil
}
