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
		for i, h := range t.header {
			text := h
			if t.color {
				text = bold.Styled(h)
			}
			t.cell(i, len(t.header), text, ansi.StringWidth(h))
		}
		if err := t.flushLine(); err != nil {
			return err
		}
	}
	for _, r := range rows {
		t.line.Reset()
		for i, c := range r {
			text := c.Text
			if t.color {
				text = Paint(text, c.Color)
			}
			t.cell(i, len(r), text, ansi.StringWidth(c.Text))
		}
		if err := t.flushLine(); err != nil {
			return err
		}
	}
	return nil
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
	t.line.WriteByte('\n')
	_, err := t.w.Write(t.line.Bytes())
	return err
}
