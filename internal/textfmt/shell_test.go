package textfmt

import (
	"os/exec"
	"strings"
	"testing"
)

func TestShellQuote(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rm", "-f", "out/a.txt", "--log=postgres://db:5432/x,y@z+1"}, "rm -f out/a.txt --log=postgres://db:5432/x,y@z+1"},
		{[]string{""}, "''"},
		{[]string{"a b", "it's", "~/x", "50%", "$HOME", "*.go"}, `'a b' 'it'\''s' '~/x' '50%' '$HOME' '*.go'`},
		{[]string{"日本"}, "'日本'"},
		{[]string{"line\nnext", `a\b'` + "\x1b[2J", "bad \xff", "rtl\u202e"}, `$'line\x0anext' $'a\\b\'\x1b[2J' $'bad \xff' $'rtl\xe2\x80\xae'`},
	} {
		if got := ShellQuote(c.args...); got != c.want {
			t.Errorf("ShellQuote(%q) = %s, want %s", c.args, got, c.want)
		}
	}
}

// What ShellQuote writes shows on one line, without control bytes, and
// pasted into a shell it is the words it was given, byte for byte: in bash,
// and in a POSIX sh for words that need no $'...'.
func TestShellQuotePastes(t *testing.T) {
	words := []string{"plain", "", "a b", "it's", `back\slash`, "~/x", "$HOME `id` $(id)", "*.go", "a;b|c&d", "日本 e\u0301",
		"line\nnext", "esc\x1b]0;t\x07", "bad \xff\xfe", "rtl\u202eexe", "tab\tcr\r", "quote' and \\", "nl\n'q' \\b \\x41"}
	check := func(shell string, words []string) {
		quoted := ShellQuote(words...)
		if i := strings.IndexFunc(quoted, Unsafe); i >= 0 {
			t.Fatalf("%q shows as itself in %s", quoted[i:], quoted)
		}
		out, err := exec.Command(shell, "-c", `printf '%s\0' `+quoted).Output()
		if err != nil {
			t.Fatalf("%s: %v", shell, err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if strings.Join(got, "\x00") != strings.Join(words, "\x00") {
			t.Errorf("%s read %q\nwant %q", shell, got, words)
		}
	}
	check("bash", words)
	check("sh", words[:10])
}

// OneLine keeps a message's first line that says something.
func TestOneLine(t *testing.T) {
	cases := []string{ // in, then what OneLine makes of it
		"", "",
		"plain", "plain",
		"  padded \n", "padded",
		"yaml: line 3: bad\nmore", "yaml: line 3: bad",
		"\n  second first\nthird", "second first",
		"crlf\r\nnext", "crlf",
	}
	for i := 0; i < len(cases); i += 2 {
		if got := OneLine(cases[i]); got != cases[i+1] {
			t.Errorf("OneLine(%q) = %q, want %q", cases[i], got, cases[i+1])
		}
	}
}
