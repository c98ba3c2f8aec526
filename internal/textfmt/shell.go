package textfmt

import (
	"strings"
	"unicode/utf8"
)

// ShellQuote renders args as words a person can paste into a POSIX shell
// (bash, zsh, ksh, dash): a word of letters, digits and -_./=:,@+ as it is,
// any other in single quotes. A word holding what must not reach a
// terminal as itself (a newline, an ESC: see Unsafe) or bytes that are no
// UTF-8 is written $'...' with those as \xHH escapes, so that it stays on
// its line and pastes as the bytes it holds (single quotes would keep it as
// it is, and a line cut at its newline would paste another value).
func ShellQuote(args ...string) string {
	out := make([]string, len(args))
	for i, a := range args {
		switch {
		case !utf8.ValidString(a) || strings.ContainsFunc(a, Unsafe):
			out[i] = ansiCQuote(a)
		case a != "" && strings.Trim(a, shellBare) == "":
			out[i] = a
		default:
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// shellBare are the bytes a word may hold unquoted: none is special to a
// shell anywhere in a word. Not ~: at a word's start it is a home directory.
const shellBare = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@+"

// ansiCQuote is s as a $'...' word of bash, zsh and ksh: backslash and
// quote escaped, every byte of an unsafe character or of no character as
// \xHH.
func ansiCQuote(s string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case Unsafe(r) || r == utf8.RuneError && n == 1:
			for _, c := range []byte(s[i : i+n]) {
				b.WriteString(`\x`)
				writeHex(&b, uint64(c), 2)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	b.WriteByte('\'')
	return b.String()
}
