package textfmt

import (
	"bytes"
	"image/color"
	"io"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Cell is one cell of a table: its text, as stored (the table escapes it),
// and the colour it is shown in on a terminal in colour (nil: plain).
type Cell struct {
	Text  string
	Color color.Color
}

// Table prints the rows of a listing: on a terminal, columns aligned by
// the cells' display width (a wide character, an emoji takes two columns,
// a combining mark none) under a header; piped, tab-separated rows without
// a header (as gh does), for cut and awk, unless PipedHeader asks for one
// (a CI log, a tutorial piped through tee). Every cell is escaped (Escape): a
// tab or newline in a stored value shows as \t or \n and breaks no column
// or row, and no stored text reaches the terminal as control bytes.
type Table struct {
	w       io.Writer
	header  []string
	aligned bool // a terminal: columns and a header
	color   bool
	widths  []int // each column's width so far, in terminal cells
	headed  bool
	piped   bool         // not a terminal, and a header asked for
	fit     int          // on a terminal, the width the last column wraps to fit (0: none)
	under   bool         // Under: a last column left too little goes under its row
	line    bytes.Buffer // the line being laid out, its memory kept for the next
}

// bold sets a table's header off on a terminal in colour.
var bold = ansi.NewStyle().Bold()

// NewTable prints to w; terminal says w is one (aligned columns, a header),
// color that the header and coloured cells are painted.
func NewTable(w io.Writer, header []string, terminal, color bool) *Table {
	return &Table{w: w, header: header, aligned: terminal, color: color}
}

// PipedHeader makes a table that is not on a terminal print its header too,
// tab-separated as its rows, before the first row.
func (t *Table) PipedHeader() *Table {
	t.piped = true
	return t
}

// minWrapped is the least width the last column wraps to: a table whose
// other columns leave it less overflows rather than break it a word a line.
const minWrapped = 16

// Fit makes a table on a terminal fit width columns: its last column's
// cells (a reason, a command: the free text) wrap at spaces to the width
// the other columns leave, their lines under its start. Where the others
// leave it too little, or a word is wider, the line overflows: a header
// and a column stay where a person looks for them, and a flag or a path
// stays whole for copying.
func (t *Table) Fit(width int) *Table {
	t.fit = width
	return t
}

// Under makes a fitted table whose other columns leave its last too
// little put each last cell under its row, from the second column, its
// header left out: for a table whose last column is free text (a
// history's reasons), read on its own.
func (t *Table) Under() *Table {
	t.under = true
	return t
}

// Write prints rows, escaping their text in place. Rows may come in
// several writes (a listing printed a page at a time): the header goes out
// with the first, and a column is as wide as the rows written so far need
// (a later page's longer cell widens its column from there on).
func (t *Table) Write(rows [][]Cell) error {
	for _, r := range rows {
		for i := range r {
			r[i].Text = Escape(r[i].Text)
		}
	}
	if !t.aligned {
		if t.piped && !t.headed {
			t.headed = true
			t.line.Reset()
			t.line.WriteString(strings.Join(t.header, "\t"))
			if err := t.flushLine(); err != nil {
				return err
			}
		}
		for _, r := range rows {
			t.line.Reset()
			for i, c := range r {
				if i > 0 {
					t.line.WriteByte('\t')
				}
				t.line.WriteString(c.Text)
			}
			if err := t.flushLine(); err != nil {
				return err
			}
		}
		return nil
	}
	if t.widths == nil {
		t.widths = make([]int, len(t.header))
		for i, h := range t.header {
			t.widths[i] = ansi.StringWidth(h)
		}
	}
	for _, r := range rows {
		for i, c := range r[:min(len(r), len(t.widths))] {
			t.widths[i] = max(t.widths[i], ansi.StringWidth(c.Text))
		}
	}
	if !t.headed {
		t.headed = true
		t.line.Reset()
		header := t.header
		if t.below() {
			header = header[:len(header)-1] // its cells go under their rows
		}
		for i, h := range header {
			text := h
			if t.color {
				text = bold.Styled(h)
			}
			t.cell(i, len(header), text, ansi.StringWidth(h))
		}
		if err := t.flushLine(); err != nil {
			return err
		}
	}
	for _, r := range rows {
		t.line.Reset()
		var more []string // the last cell's wrapped lines after its first
		for i, c := range r {
			text := c.Text
			if i == len(r)-1 && i == len(t.widths)-1 {
				text, more = t.wrapLast(text)
			}
			width := ansi.StringWidth(text)
			if t.color {
				text = Paint(text, c.Color)
			}
			t.cell(i, len(r), text, width)
		}
		if err := t.flushLine(); err != nil {
			return err
		}
		indent := t.lastStart()
		if t.below() {
			indent = t.widths[0] + 2
		}
		for _, l := range more {
			t.line.Reset()
			t.line.WriteString(strings.Repeat(" ", indent))
			t.line.WriteString(l)
			if err := t.flushLine(); err != nil {
				return err
			}
		}
	}
	return nil
}

// lastStart is the column the last cell starts at.
func (t *Table) lastStart() int {
	start := 0
	for _, w := range t.widths[:len(t.widths)-1] {
		start += w + 2
	}
	return start
}

// below tells whether the last column's cells go under their rows (Under):
// the other columns leave it too little of the width Fit asks for.
func (t *Table) below() bool {
	return t.under && t.fit > 0 && len(t.widths) > 1 && t.fit-t.lastStart() < minWrapped
}

// wrapLast wraps the last cell's text at spaces to the width Fit leaves
// it: its first line, and the lines after; under its row, all are after
// ("-", nothing, takes no line).
func (t *Table) wrapLast(text string) (string, []string) {
	room := t.fit - t.lastStart()
	if t.below() {
		if text == "-" || text == "" {
			return "", nil
		}
		return "", strings.Split(WrapWords(text, t.fit-t.widths[0]-2), "\n")
	}
	if t.fit <= 0 || room < minWrapped || ansi.StringWidth(text) <= room {
		return text, nil
	}
	lines := strings.Split(WrapWords(text, room), "\n")
	return lines[0], lines[1:]
}

// cell adds cell i of n, shown as text, width cells wide, and the spaces
// that take the next cell to its column (two between columns).
func (t *Table) cell(i, n int, text string, width int) {
	t.line.WriteString(text)
	if i < n-1 {
		pad := 2
		if i < len(t.widths) {
			pad += max(t.widths[i]-width, 0)
		}
		t.line.WriteString(strings.Repeat(" ", pad))
	}
}

func (t *Table) flushLine() error {
	if t.aligned {
		// A row whose last cell goes under it ends in its padding.
		trimmed := bytes.TrimRight(t.line.Bytes(), " ")
		t.line.Truncate(len(trimmed))
	}
	t.line.WriteByte('\n')
	_, err := t.w.Write(t.line.Bytes())
	return err
}

// WrapWords fills lines of at most width columns with s's words, breaking
// only at spaces (ansi.Wordwrap also breaks at hyphens: --retry-in-doubt,
// ->); a word wider than width has a line of its own.
func WrapWords(s string, width int) string {
	var b strings.Builder
	line := 0
	for _, word := range strings.Fields(s) {
		w := ansi.StringWidth(word)
		switch {
		case line == 0:
		case line+1+w > width:
			b.WriteByte('\n')
			line = 0
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += w
	}
	return b.String()
}
