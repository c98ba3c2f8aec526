package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"github.com/charmbracelet/x/ansi"

	"github.com/undolog/undolog/internal/textfmt"
)

// The view draws its own few styles and boxes, without lipgloss: lipgloss
// v2's package init detects the colour profile of stdout (it reads the
// terminfo database on a terminal, and runs `tmux info` in tmux: 3.6 ms),
// and it would do so in every command, `undolog version` too. The program's
// renderer brings the colours written here down to what the terminal shows
// (Run detects that, when the view starts).

// style is one SGR: an attribute or colour set on text, reset after it.
type style struct{ sgr string }

// Render styles each line of text.
func (s style) Render(text string) string {
	if s.sgr == "" || text == "" {
		return text
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "\x1b[" + s.sgr + "m" + l + ansi.ResetStyle
		}
	}
	return strings.Join(lines, "\n")
}

// fg is a foreground colour: 0-15 the terminal's own, or #rrggbb.
func fg(c string) string {
	var n, r, g, b int
	if _, err := fmt.Sscanf(c, "#%02x%02x%02x", &r, &g, &b); err == nil {
		return fmt.Sprintf("38;2;%d;%d;%d", r, g, b)
	}
	fmt.Sscanf(c, "%d", &n)
	if n < 8 {
		return fmt.Sprint(30 + n)
	}
	return fmt.Sprint(90 + n - 8)
}

// styles holds every style of the view. Without colour (NO_COLOR, or no
// colour terminal) every style is plain: attributes go too, as colours do,
// so the screen is text alone.
type styles struct {
	color    bool
	title    style
	header   style
	selected style
	dim      style
	status   style
	errText  style
	badge    style
	box      box
	label    style
	cursor   style // the text input's cursor
}

func newStyles(color bool) styles {
	s := func(sgr string) style {
		if !color {
			return style{}
		}
		return style{sgr}
	}
	return styles{
		color:    color,
		title:    s("1"),
		header:   s("1;4"),
		selected: s("7"),
		dim:      s("2"),
		errText:  s("1;" + fg("9")),
		badge:    s("1;" + fg("11")),
		label:    s("1"),
		cursor:   s("7"),
	}
}

// state renders a state name in its colour, the commands' palette.
func (s styles) state(name string) string {
	if !s.color {
		return name
	}
	return textfmt.PaintState(name)
}

// box draws text in a thin border, one cell of padding either side. Every
// line is as wide as the widest, or as width when it is set (inside the
// border); then longer lines wrap, at spaces where they have some.
type box struct{ width int }

// boxWidth is the box w cells wide inside its border.
func (s styles) boxWidth(w int) box { return box{width: w} }

func (b box) Render(text string) string {
	text = strings.ReplaceAll(text, "\t", "    ")
	if b.width > 0 {
		text = wrapStyled(ansi.Wrap(text, max(1, b.width-2), ""))
	}
	lines := strings.Split(text, "\n")
	w := max(0, b.width-2)
	for _, l := range lines {
		w = max(w, ansi.StringWidth(l))
	}
	var out strings.Builder
	out.WriteString("┌" + strings.Repeat("─", w+2) + "┐")
	for _, l := range lines {
		out.WriteString("\n│ " + l + strings.Repeat(" ", w-ansi.StringWidth(l)) + " │")
	}
	out.WriteString("\n└" + strings.Repeat("─", w+2) + "┘")
	return out.String()
}

// wrapStyled closes a style a wrap left open at a line's end and opens it
// again on the next line, so that the border after it stays plain.
func wrapStyled(text string) string {
	lines := strings.Split(text, "\n")
	open := ""
	for i, l := range lines {
		l = open + l
		for rest := l; ; {
			j := strings.Index(rest, "\x1b[")
			if j < 0 {
				break
			}
			k := strings.IndexByte(rest[j:], 'm')
			if k < 0 {
				break
			}
			if seq := rest[j : j+k+1]; seq == "\x1b[m" || seq == "\x1b[0m" {
				open = ""
			} else {
				open = seq
			}
			rest = rest[j+k+1:]
		}
		if open != "" {
			l += ansi.ResetStyle
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}

// helpStyles are the footer's and the help screen's, as bubbles' help has
// them for a dark or a light background; none without colour.
type helpStyles struct {
	key, desc, sep style
}

func newHelpStyles(color, dark bool) helpStyles {
	if !color {
		return helpStyles{}
	}
	if dark {
		return helpStyles{key: style{fg("#626262")}, desc: style{fg("#4A4A4A")}, sep: style{fg("#3C3C3C")}}
	}
	return helpStyles{key: style{fg("#909090")}, desc: style{fg("#B2B2B2")}, sep: style{fg("#DADADA")}}
}

const (
	shortSeparator = " • "
	fullSeparator  = "    "
)

// fullHelp lays out groups of keys side by side, each a column of keys and
// one of what they do; a group that does not fit in width is left out for
// an ellipsis.
func (h helpStyles) fullHelp(groups [][]key.Binding, width int) string {
	var cols []string
	total := 0
	for _, g := range groups {
		var keys, descs []string
		for _, b := range g {
			if b.Enabled() {
				keys, descs = append(keys, b.Help().Key), append(descs, b.Help().Desc)
			}
		}
		if len(keys) == 0 {
			continue
		}
		var parts []string
		if total > 0 {
			parts = append(parts, h.sep.Render(fullSeparator))
		}
		parts = append(parts, h.key.Render(padBlock(keys)), " ", h.desc.Render(padBlock(descs)))
		col := joinHorizontal(parts...)
		w := ansi.StringWidth(strings.SplitN(col, "\n", 2)[0])
		if width > 0 && total+w > width {
			if tail := " " + h.sep.Render("…"); total+ansi.StringWidth(tail) < width {
				cols = append(cols, tail)
			}
			break
		}
		total += w
		cols = append(cols, col)
	}
	return joinHorizontal(cols...)
}

// padBlock joins lines, each padded to the widest.
func padBlock(lines []string) string {
	w := 0
	for _, l := range lines {
		w = max(w, ansi.StringWidth(l))
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l + strings.Repeat(" ", w-ansi.StringWidth(l))
	}
	return strings.Join(out, "\n")
}

// joinHorizontal sets blocks of lines side by side, tops aligned, each
// block as wide as its widest line.
func joinHorizontal(blocks ...string) string {
	var split [][]string
	var widths []int
	height := 0
	for _, b := range blocks {
		lines := strings.Split(b, "\n")
		w := 0
		for _, l := range lines {
			w = max(w, ansi.StringWidth(l))
		}
		split, widths = append(split, lines), append(widths, w)
		height = max(height, len(lines))
	}
	out := make([]string, height)
	for i := range out {
		var b strings.Builder
		for j, lines := range split {
			l := ""
			if i < len(lines) {
				l = lines[i]
			}
			b.WriteString(l + strings.Repeat(" ", widths[j]-ansi.StringWidth(l)))
		}
		out[i] = b.String()
	}
	return strings.Join(out, "\n")
}
