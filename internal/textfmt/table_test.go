package textfmt

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// On a terminal a table's columns line up as the terminal shows them: 写入
// 文件 and 🚀 take two columns a character, the ZWJ of 👩‍💻 shows escaped
// (an invisible joiner is unsafe), the combining acute of e\u0301 takes
// none. Counted in runes, the column after each would shift.
func TestTableAlignsByDisplayWidth(t *testing.T) {
	rows := [][]Cell{
		{{Text: "1"}, {Text: "写入文件"}, {Text: "pending"}},
		{{Text: "2"}, {Text: "🚀 launch"}, {Text: "committed"}},
		{{Text: "3"}, {Text: "👩\u200d💻"}, {Text: "rejected"}},
		{{Text: "4"}, {Text: "cafe\u0301"}, {Text: "replayed"}},
		{{Text: "50"}, {Text: "plain"}, {Text: "-"}},
	}
	var out strings.Builder
	if err := NewTable(&out, []string{"ID", "TOOL", "STATE"}, true, false).Write(rows); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"ID  TOOL        STATE\n" +
		"1   写入文件    pending\n" +
		"2   🚀 launch   committed\n" +
		"3   👩\\u200d💻  rejected\n" +
		"4   cafe\u0301        replayed\n" +
		"50  plain       -\n"
	if out.String() != want {
		t.Fatalf("table\n%s\nwant\n%s", out.String(), want)
	}
	// Each STATE starts in display column 16, whatever the TOOL before it.
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		cut := strings.LastIndex(line, "  ") + 2
		if w := ansi.StringWidth(line[:cut]); w != 16 {
			t.Errorf("%q: STATE starts at column %d, want 16", line, w)
		}
	}
}

// Rows written in pages keep one header, and a later page's longer cell
// widens its column from there on; piped, rows are tab-separated, without
// a header.
func TestTableInPages(t *testing.T) {
	var out strings.Builder
	tab := NewTable(&out, []string{"ID", "TOOL"}, true, false)
	for _, page := range [][][]Cell{{{{Text: "1"}, {Text: "a"}}}, {{{Text: "22222"}, {Text: "b"}}}, nil} {
		if err := tab.Write(page); err != nil {
			t.Fatal(err)
		}
	}
	if want := "ID  TOOL\n1   a\n22222  b\n"; out.String() != want {
		t.Fatalf("paged table\n%q, want\n%q", out.String(), want)
	}
	out.Reset()
	if err := NewTable(&out, []string{"ID", "TOOL"}, false, true).Write([][]Cell{{{Text: "1"}, {Text: "写入文件", Color: StateColor("pending")}}}); err != nil {
		t.Fatal(err)
	}
	if want := "1\t写入文件\n"; out.String() != want {
		t.Fatalf("piped table %q, want %q", out.String(), want)
	}
}

// Stored text reaches no terminal as control bytes: the only escape
// sequences in a table are the colours it paints itself.
func TestTableEscapesStoredText(t *testing.T) {
	const hostile = "\x1b]0;owned\x07\x1b[2J\x1b[1;31m\u009b2Jred\u202eexe.txt\x7fX\rover\tcol\n\u200bnext \xff"
	painted := regexp.MustCompile("\x1b\\[[0-9;]*m")
	for _, c := range []struct{ terminal, color bool }{{false, false}, {true, false}, {true, true}} {
		var out strings.Builder
		tab := NewTable(&out, []string{"TOOL", "STATE"}, c.terminal, c.color)
		if err := tab.Write([][]Cell{{{Text: hostile}, {Text: "pending", Color: StateColor("pending")}}, {{Text: "ok"}, {Text: hostile, Color: StateColor("failed")}}}); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if c.color != painted.MatchString(got) {
			t.Errorf("terminal %v, colour %v: painted %v:\n%q", c.terminal, c.color, !c.color, got)
		}
		for _, r := range painted.ReplaceAllString(got, "") {
			if Unsafe(r) && r != '\n' && (r != '\t' || c.terminal) {
				t.Errorf("terminal %v, colour %v: %U reached the output:\n%q", c.terminal, c.color, r, got)
			}
		}
		if n := strings.Count(got, "\n"); n != 2+btoi(c.terminal) {
			t.Errorf("terminal %v: %d lines, want one a row (and the header):\n%s", c.terminal, n, got)
		}
		if !strings.Contains(got, `\x1b]0;owned\x07\x1b[2J\x1b[1;31m\u009b2Jred\u202eexe.txt\x7fX\rover\tcol\n\u200bnext \xff`) {
			t.Errorf("the stored text is not shown escaped:\n%q", got)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Piped, a table prints no header unless asked, and then one, above the
// rows of every page, tab-separated as they are.
func TestTablePipedHeader(t *testing.T) {
	page := func() [][]Cell { return [][]Cell{{{Text: "1"}, {Text: "a\tb"}}} }
	var plainOut, headed strings.Builder
	if err := NewTable(&plainOut, []string{"ID", "TOOL"}, false, false).Write(page()); err != nil {
		t.Fatal(err)
	}
	if plainOut.String() != "1\ta\\tb\n" {
		t.Fatalf("piped table %q, want its row alone", plainOut.String())
	}
	table := NewTable(&headed, []string{"ID", "TOOL"}, false, false).PipedHeader()
	for range 2 {
		if err := table.Write(page()); err != nil {
			t.Fatal(err)
		}
	}
	if want := "ID\tTOOL\n1\ta\\tb\n1\ta\\tb\n"; headed.String() != want {
		t.Fatalf("piped table with its header %q, want %q", headed.String(), want)
	}
}

// A table fitted to a terminal wraps its last column under its start, no
// line wider than the terminal; a table not fitted, or piped, keeps it.
func TestFittedTableWrapsItsLastColumn(t *testing.T) {
	reason := "compensation failed: effect 2 b: sh: exit status 3: bucket is locked; fix it by hand"
	rows := func() [][]Cell {
		return [][]Cell{{{Text: "1"}, {Text: "committed"}, {Text: reason}}, {{Text: "2"}, {Text: "halted"}, {Text: "-"}}}
	}
	var out strings.Builder
	if err := NewTable(&out, []string{"SEQ", "TO", "REASON"}, true, false).Fit(40).Write(rows()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	var text []string
	for i, l := range lines {
		if ansi.StringWidth(l) > 40 {
			t.Errorf("line %d is %d columns wide: %q", i, ansi.StringWidth(l), l)
		}
		if i > 0 && strings.HasPrefix(l, strings.Repeat(" ", 16)) {
			text = append(text, strings.TrimSpace(l))
		} else if i == 1 {
			text = append(text, strings.TrimSpace(l[16:]))
		}
	}
	if got := strings.Join(text, " "); got != reason || len(lines) < 4 || !strings.HasPrefix(lines[len(lines)-1], "2    halted") {
		t.Errorf("the reason reads %q under its column, want %q:\n%s", got, reason, out.String())
	}
	out.Reset()
	NewTable(&out, []string{"SEQ", "TO", "REASON"}, false, false).Fit(40).Write(rows())
	if !strings.Contains(out.String(), "\t"+reason+"\n") {
		t.Errorf("piped, the reason is cut:\n%s", out.String())
	}
}

// A table whose other columns leave its last too little keeps its header
// and its rows on their lines (the terminal wraps what overflows), and a
// wrapped cell breaks only at spaces: a flag or a path stays whole for
// copying (a new user saw `undolog resolve 6 -` / `-reason` and the UNDO
// header gone).
func TestFittedTableKeepsHeadersAndWords(t *testing.T) {
	var out strings.Builder
	wide := strings.Repeat("x", 30)
	if err := NewTable(&out, []string{"ID", "TOOL", "UNDO"}, true, false).Fit(40).Write([][]Cell{{{Text: "1"}, {Text: wide}, {Text: "not undone"}}}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "UNDO") || !strings.HasSuffix(lines[1], "not undone") {
		t.Errorf("a narrow table, want its header and one line a row:\n%s", out.String())
	}
	out.Reset()
	hint := "fix it by hand, then: undolog resolve 6 --reason WHAT_WAS_DONE"
	if err := NewTable(&out, []string{"SEQ", "REASON"}, true, false).Fit(34).Write([][]Cell{{{Text: "1"}, {Text: hint}}}); err != nil {
		t.Fatal(err)
	}
	for _, word := range strings.Fields(hint) {
		if !slices.Contains(strings.Fields(out.String()), word) {
			t.Errorf("%q is broken in:\n%s", word, out.String())
		}
	}
}
