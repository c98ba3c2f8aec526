package textfmt

import (
	"strings"
	"testing"
)

// What a command prints reaches the terminal escaped, with its newlines
// kept, however its output is cut into writes: a character split across two
// writes is one character, not two stray bytes.
func TestEscapingWriter(t *testing.T) {
	in := "title \x1b]0;PWNED\x07 ok\nrtl \u202eexe.txt and 日本 \u2028done\r\nbad \xff\x9b and cut \xe6\x97"
	want := `title \x1b]0;PWNED\x07 ok` + "\n" + `rtl \u202eexe.txt and 日本 \u2028done\r` + "\n" + `bad \xff\x9b and cut \xe6\x97`
	for size := 1; size <= len(in); size++ {
		var out strings.Builder
		w := NewEscapingWriter(&out)
		for i := 0; i < len(in); i += size {
			chunk := in[i:min(i+size, len(in))]
			if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Fatalf("in writes of %d bytes:\n got %q\nwant %q", size, out.String(), want)
		}
	}
}
