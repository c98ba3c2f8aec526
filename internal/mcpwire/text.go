package mcpwire

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// TextError is a place in a message whose text a reader in Go and one in
// JavaScript read otherwise: bytes that are not UTF-8 (Go reads each bad
// byte as U+FFFD, Node.js a whole bad sequence as one), or an escaped
// surrogate with no partner (Go reads U+FFFD, JavaScript keeps it: a name
// the server stores that undo cannot send back).
type TextError struct {
	Offset int    // the byte of the message where it starts
	Escape string // the lone surrogate's escape; "" for bytes not UTF-8
}

func (e *TextError) Error() string {
	if e.Escape != "" {
		return fmt.Sprintf("the message holds a lone surrogate %s at byte %d, which a server in JavaScript keeps and Go reads as U+FFFD", e.Escape, e.Offset)
	}
	return fmt.Sprintf("the message is not UTF-8 at byte %d; servers replace such bytes, each its own way", e.Offset)
}

// TextReadTwoWays is the first place in msg (JSON) that a reader in Go and
// one in JavaScript read as different text; nil if none.
func TextReadTwoWays(msg []byte) *TextError {
	if !utf8.Valid(msg) {
		for i := 0; i < len(msg); {
			r, size := utf8.DecodeRune(msg[i:])
			if r == utf8.RuneError && size <= 1 {
				return &TextError{Offset: i}
			}
			i += size
		}
	}
	inString := false
	for i := 0; i < len(msg); i++ {
		switch {
		case msg[i] == '"':
			inString = !inString
		case !inString || msg[i] != '\\':
		case i+1 < len(msg) && msg[i+1] == 'u':
			r, ok := escapedUnit(msg, i)
			if !ok || !utf16.IsSurrogate(r) {
				i++
				continue
			}
			if r < 0xdc00 { // a high surrogate: a low one must follow
				if low, ok := escapedUnit(msg, i+6); ok && low >= 0xdc00 && low <= 0xdfff {
					i += 11
					continue
				}
			}
			return &TextError{Offset: i, Escape: string(msg[i : i+6])}
		default:
			i++ // an escaped character, '"' or '\\' say
		}
	}
	return nil
}

// escapedUnit is the UTF-16 unit of the \uXXXX escape at msg[i].
func escapedUnit(msg []byte, i int) (rune, bool) {
	if i+6 > len(msg) || msg[i] != '\\' || msg[i+1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(msg[i+2:i+6]), 16, 16)
	return rune(n), err == nil
}
