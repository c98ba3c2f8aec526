package textfmt

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// Unsafe reports whether r must not reach a terminal as itself: a control
// character (C0 with tab and newline, DEL, C1: a terminal acts on ESC and
// CSI sequences, so stored text could retitle the window or clear the
// screen), a bidirectional mark, embedding, override or isolate (they
// reorder what is shown, so a reviewer reads another text than the stored
// one), a line or paragraph separator (U+2028, U+2029: they break a line
// where a field must stay on one), or a character that shows as nothing:
// invisible joiners and spaces (U+200B to U+200D, U+2060, U+FEFF), the soft
// hyphen and every other format character (invisible operators, tags,
// interlinear annotation marks...), the combining grapheme joiner, the
// Hangul and braille blanks, Khmer's invisible vowels and the variation
// selectors: two texts that differ would look the same (/etc/pass\u00adwd
// is not /etc/passwd), or one could carry bytes nobody sees.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, 0x7f <= r && r <= 0x9f:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	case r >= 0xad && unicode.Is(unicode.Cf, r):
		// Every format character: the bidirectional marks, embeddings,
		// overrides and isolates, the zero-width joiners and spaces, the
		// soft hyphen, the tags, ...
		return true
	case r == 0x034f, r == 0x115f, r == 0x1160, r == 0x3164, r == 0xffa0, r == 0x17b4, r == 0x17b5, r == 0x2800,
		0x180b <= r && r <= 0x180f, 0xfe00 <= r && r <= 0xfe0f, 0xe0000 <= r && r <= 0xe0fff, r == 0x2065, 0xfff0 <= r && r <= 0xfff8:
		return true // invisible, a variation selector (which can carry hidden bytes), or reserved to be ignored
	}
	return false
}

// Escape is the one way text output and the terminal view print a stored
// string: each unsafe character (see Unsafe) and each byte that is not UTF-8
// is written visibly as an escape (\n, \t, \r, \x1b, \x7f, \u009b, \u202e,
// and \xff for a stray byte), so that one field stays one line, one column,
// and shows what it holds. Everything else, backslashes too, is unchanged:
// -o json is the exact form.
func Escape(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if Unsafe(r) || r == utf8.RuneError && n == 1 {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			writeHex(&b, uint64(s[i]), 2)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case !Unsafe(r):
			b.WriteString(s[i : i+n])
		case r < 0x80:
			b.WriteString(`\x`)
			writeHex(&b, uint64(r), 2)
		case r > 0xffff:
			b.WriteString(`\U`)
			writeHex(&b, uint64(r), 8)
		default:
			b.WriteString(`\u`)
			writeHex(&b, uint64(r), 4)
		}
		i += n
	}
	return b.String()
}

func writeHex(b *strings.Builder, v uint64, width int) {
	h := strconv.FormatUint(v, 16)
	for range width - len(h) {
		b.WriteByte('0')
	}
	b.WriteString(h)
}

// EscapeCut is s escaped (Escape) and cut to at most n columns, with "…"
// where it was cut: a character's escape is kept whole or left out, never
// cut in two.
func EscapeCut(s string, n int) string {
	if esc := Escape(s); ansi.StringWidth(esc) <= n {
		return esc
	}
	var b strings.Builder
	width := 0
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		piece := Escape(s[i : i+size])
		w := ansi.StringWidth(piece)
		if width+w > n-1 {
			break
		}
		b.WriteString(piece)
		width += w
		i += size
	}
	return b.String() + "…"
}
