// Command shotcolors makes a terminal capture (tmux capture-pane -e) say
// every cell's colours outright, for a renderer that knows only colours:
// freeze draws 24-bit foreground and background colours and ignores
// reverse video and faint text, which the view marks its selection and the
// screen under a dialog with. Each cell's colours are resolved here as a
// terminal of the chosen theme shows them: the default foreground and
// background and the sixteen basic colours from the theme's palette,
// reverse swapping the two, faint mixing the foreground halfway to the
// background. tools/screenshots.sh runs it.
//
//	tmux capture-pane -p -e | go run ./tools/shotcolors -theme light
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"strings"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
)

// theme is a terminal's colours: its default foreground and background and
// its sixteen basic colours.
type theme struct {
	fg, bg color.RGBA
	basic  [16]color.RGBA
}

func hex(v uint32) color.RGBA { return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff} }

func palette(v ...uint32) (p [16]color.RGBA) {
	for i := range p {
		p[i] = hex(v[i])
	}
	return p
}

// themes are two common terminal themes, dark and light (the basic colours
// of GNOME Terminal's Tango on dark, and of a light one).
var themes = map[string]theme{
	"dark": {fg: hex(0xd0d0d0), bg: hex(0x1c1c1c), basic: palette(
		0x2e3436, 0xcc0000, 0x4e9a06, 0xc4a000, 0x3465a4, 0x75507b, 0x06989a, 0xd3d7cf,
		0x555753, 0xef2929, 0x8ae234, 0xfce94f, 0x729fcf, 0xad7fa8, 0x34e2e2, 0xeeeeec)},
	"light": {fg: hex(0x1f1f1f), bg: hex(0xffffff), basic: palette(
		0x000000, 0xc91b00, 0x00a600, 0x9e7b00, 0x0033cc, 0xb200b2, 0x00a6b2, 0xbfbfbf,
		0x666666, 0xe50000, 0x00c200, 0xb8a000, 0x0000ff, 0xe500e5, 0x00b2cc, 0xe5e5e5)},
}

func main() {
	name := flag.String("theme", "dark", "the terminal's colours: dark or light")
	flag.Parse()
	t, ok := themes[*name]
	if !ok {
		fmt.Fprintf(os.Stderr, "shotcolors: no theme %q: dark or light\n", *name)
		os.Exit(2)
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shotcolors:", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	io.WriteString(out, t.flatten(string(in)))
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "shotcolors:", err)
		os.Exit(1)
	}
}

// flatten is capture with each run of cells in its resolved colours: a
// 24-bit foreground always, a background where it is not the theme's, and
// no other attribute. A capture's pen goes on from one line to the next,
// as on the terminal (tmux writes only what changes).
func (t theme) flatten(capture string) string {
	var b strings.Builder
	for i, cells := range uv.NewStyledString(strings.TrimSuffix(capture, "\n")).Lines(ansi.WcWidth) {
		if i > 0 {
			b.WriteString("\n")
		}
		last := ""
		for _, c := range cells {
			if c.Width == 0 { // the second cell of a wide character
				continue
			}
			fg, bg := t.colors(c.Style)
			pen := "\x1b[0;38;2;" + rgb(fg)
			if bg != t.bg {
				pen += ";48;2;" + rgb(bg)
			}
			pen += "m"
			if pen != last {
				b.WriteString(pen)
				last = pen
			}
			b.WriteString(c.Content)
		}
		b.WriteString("\x1b[0m")
	}
	return b.String() + "\n"
}

// colors are the foreground and background a cell in style s shows.
func (t theme) colors(s uv.Style) (fg, bg color.RGBA) {
	fg, bg = t.resolve(s.Fg, t.fg), t.resolve(s.Bg, t.bg)
	if s.Attrs&uv.AttrReverse != 0 {
		fg, bg = bg, fg
	}
	if s.Attrs&uv.AttrFaint != 0 {
		fg = mix(fg, bg)
	}
	return fg, bg
}

// resolve is c as the theme shows it; def for none.
func (t theme) resolve(c color.Color, def color.RGBA) color.RGBA {
	switch c := c.(type) {
	case nil:
		return def
	case ansi.BasicColor:
		return t.basic[c&15]
	case ansi.IndexedColor:
		if c < 16 {
			return t.basic[c]
		}
	}
	r, g, b, _ := c.RGBA()
	return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 0xff}
}

// mix is halfway from a to b.
func mix(a, b color.RGBA) color.RGBA {
	return color.RGBA{uint8((int(a.R) + int(b.R)) / 2), uint8((int(a.G) + int(b.G)) / 2), uint8((int(a.B) + int(b.B)) / 2), 0xff}
}

func rgb(c color.RGBA) string { return fmt.Sprintf("%d;%d;%d", c.R, c.G, c.B) }
