package textfmt

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"":                               "",
		"plain text, ünïcødé, 日本, \\x1b": "plain text, ünïcødé, 日本, \\x1b",
		"\x1b]0;owned\x07":               `\x1b]0;owned\x07`,
		"\x1b[2J\x1b[H":                  `\x1b[2J\x1b[H`,
		"a\u009b31mb":                    `a\u009b31mb`,
		"\u0085\u0080\u009f":             `\u0085\u0080\u009f`,
		"invoice\u202efdp.exe":           `invoice\u202efdp.exe`,
		"\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069": `\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069`,
		"\u200e\u200f\u061c":                            `\u200e\u200f\u061c`,
		"del\x7f":                                       `del\x7f`,
		"one\ntwo\r\tthree\x00":                         `one\ntwo\r\tthree\x00`,
		"bad \x9b byte \xff":                            `bad \x9b byte \xff`,
		"zero\u200bwidth\u200c\u200d\u2060\ufeff":       `zero\u200bwidth\u200c\u200d\u2060\ufeff`,
		"line\u2028para\u2029graph":                     `line\u2028para\u2029graph`,
		"keep\u00a0\u202f\u200a":                        "keep\u00a0\u202f\u200a",
		"/etc/pass\u00adwd\u034f\u3164\U000e0041\ufff9": `/etc/pass\u00adwd\u034f\u3164\U000e0041\ufff9`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// Whatever goes in, nothing unsafe comes out, and safe text is unchanged.
func TestEscapeLeavesNothingUnsafe(t *testing.T) {
	var all strings.Builder
	for r := rune(0); r < 0x10000; r++ {
		if 0xd800 <= r && r <= 0xdfff {
			continue // surrogates are no runes
		}
		all.WriteRune(r)
	}
	all.WriteString("\xff\xc3\x28")
	out := Escape(all.String())
	if !utf8.ValidString(out) {
		t.Fatal("escaped text is not UTF-8")
	}
	for _, r := range out {
		if Unsafe(r) {
			t.Fatalf("%U survived escaping", r)
		}
	}
	safe := "SEQ  AT  send_wire {\"to\":\"ACME\"} ✓"
	if Escape(safe) != safe {
		t.Fatal("safe text changed")
	}
}

func TestUnsafe(t *testing.T) {
	for _, r := range []rune{0, '\t', '\n', 0x1b, 0x7f, 0x80, 0x9b, 0x9f, 0x61c, 0x200e, 0x200f, 0x202a, 0x202e, 0x2066, 0x2069,
		0x200b, 0x200c, 0x200d, 0x2028, 0x2029, 0x2060, 0xfeff,
		0xad, 0x34f, 0x115f, 0x1160, 0x180e, 0x3164, 0xffa0, 0x2061, 0x2064, 0x206a, 0x206f, 0xfff9, 0xfffb, 0xe0000, 0xe0041, 0xe007f,
		0x600, 0x605, 0x6dd, 0x70f, 0x180b, 0x180f, 0x17b4, 0x2800, 0xfe00, 0xfe0f, 0xe0100, 0xe01ef, 0x13430, 0x1d173, 0x1d17a, 0x2065, 0xfff0, 0xfff8, 0xe0080, 0xe0fff} {
		if !Unsafe(r) {
			t.Errorf("%U is not unsafe", r)
		}
	}
	for _, r := range []rune{' ', '~', 0xa0, 'é', 0x200a, 0x2027, 0x202f, 0xfefe, 0xff00, '日', 0xac, 0xae, 0x1161, 0xfffc, 0xe1000, 0x1f600} {
		if Unsafe(r) {
			t.Errorf("%U is unsafe", r)
		}
	}
}

// A cut keeps each character's escape whole, and the text within n columns.
func TestEscapeCutKeepsEscapesWhole(t *testing.T) {
	s := strings.Repeat("a", 26) + "\x01\x02\u200d写写"
	for n := 1; n <= 60; n++ {
		got := EscapeCut(s, n)
		if w := ansi.StringWidth(got); w > n && n > 0 {
			t.Fatalf("EscapeCut(_, %d) = %q, %d columns", n, got, w)
		}
		body := strings.TrimSuffix(got, "…")
		if !strings.HasPrefix(Escape(s), body) {
			t.Fatalf("EscapeCut(_, %d) = %q is not a start of the escaped text", n, got)
		}
		if tail := body[strings.LastIndexByte(body, '\\')+1:]; strings.Contains(body, `\`) && (strings.HasPrefix(tail, "u") && len(tail) < 5 || strings.HasPrefix(tail, "x") && len(tail) < 3) {
			t.Fatalf("EscapeCut(_, %d) = %q cuts an escape", n, got)
		}
	}
	if got := EscapeCut("short", 60); got != "short" {
		t.Errorf("EscapeCut of a short text = %q", got)
	}
}
