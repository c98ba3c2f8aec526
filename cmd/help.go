package cmd

import (
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/undolog/undolog/internal/textfmt"
)

// The root's help lists its commands in groups, a newcomer's first: the
// everyday ones, sessions, a program's own steps, log maintenance, setup.
var commandGroups = []struct {
	group    cobra.Group
	commands []string
}{
	{cobra.Group{ID: "everyday", Title: "Everyday commands:"},
		[]string{"exec", "proxy", "hook", "tui", "approvals", "approve", "reject", "undo", "list", "show"}},
	{cobra.Group{ID: "sessions", Title: "Sessions and undo:"},
		[]string{"session", "resolve", "files"}},
	{cobra.Group{ID: "steps", Title: "A program's own steps (see 'undolog intercept --help'):"},
		[]string{"intercept", "start", "commit", "fail", "transition"}},
	{cobra.Group{ID: "maintenance", Title: "Log maintenance:"},
		[]string{"verify", "export", "import", "compact", "gc", "migrate"}},
	{cobra.Group{ID: "setup", Title: "Setup and reference:"},
		[]string{"init", "policy", "demo", "completion", "man", "version", "help"}},
}

// groupCommands puts each of root's commands in its group; it is called
// once the help and completion commands exist.
func groupCommands(root *cobra.Command) {
	for _, g := range commandGroups {
		root.AddGroup(&g.group)
		for _, name := range g.commands {
			if c := subcommand(root, name); c != nil {
				c.GroupID = g.group.ID
			}
		}
	}
}

// defaultHelpWidth is the width help is wrapped at when it is piped and
// $COLUMNS says nothing.
const defaultHelpWidth = 80

// helpWidth is the width to wrap help at: the terminal's, else $COLUMNS
// (`COLUMNS=60 undolog --help | less`), else defaultHelpWidth.
func (f *Factory) helpWidth() int {
	if w := f.terminalWidth(); w > 0 {
		return w
	}
	if n, err := strconv.Atoi(f.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return defaultHelpWidth
}

// minHelpWidth keeps a very narrow terminal's help readable: below it,
// lines are left long rather than cut to a word each.
const minHelpWidth = 40

// wrapForHelp makes c's help fit width columns: its long text reflowed
// (wrapHelp) and its flags' descriptions wrapped under them.
func wrapForHelp(c *cobra.Command, width int) {
	if width < minHelpWidth {
		return
	}
	c.Long = wrapHelp(c.Long, width)
	w := strconv.Itoa(width)
	usage := c.UsageTemplate()
	usage = strings.ReplaceAll(usage, ".LocalFlags.FlagUsages ", ".LocalFlags.FlagUsagesWrapped "+w+" ")
	usage = strings.ReplaceAll(usage, ".InheritedFlags.FlagUsages ", ".InheritedFlags.FlagUsagesWrapped "+w+" ")
	// A command's line in a list: its summary wrapped under itself.
	cobra.AddTemplateFunc("wrapSummary", wrapSummary)
	usage = strings.ReplaceAll(usage, "{{rpad .Name .NamePadding }} {{.Short}}", "{{rpad .Name .NamePadding }} {{wrapSummary .Short .NamePadding "+w+"}}")
	c.SetUsageTemplate(usage)
}

// wrapSummary wraps a command's summary, shown after its name padded to
// pad, to width columns, each line after the first indented under the first.
func wrapSummary(short string, pad, width int) string {
	indent := len("  ") + pad + len(" ")
	if width-indent < minHelpWidth/2 {
		return short
	}
	return strings.ReplaceAll(textfmt.WrapWords(short, width-indent), "\n", "\n"+strings.Repeat(" ", indent))
}

// wrapHelp reflows a help text, written wrapped at no width in particular,
// to width columns. Paragraphs (blank-line separated) of prose are joined
// and wrapped; a list's items ("  - ", "  * ") are wrapped under their
// text; indented blocks (tables, commands) are kept as written.
func wrapHelp(text string, width int) string {
	paragraphs := strings.Split(text, "\n\n")
	for i, p := range paragraphs {
		paragraphs[i] = wrapParagraph(p, width)
	}
	return strings.Join(paragraphs, "\n\n")
}

func wrapParagraph(p string, width int) string {
	lines := strings.Split(p, "\n")
	// An intro line ending in ':' stays on its own above what it introduces.
	var out []string
	var prose []string
	flush := func() {
		if len(prose) > 0 {
			out = append(out, textfmt.WrapWords(strings.Join(prose, " "), width))
			prose = nil
		}
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case listItem(l) != "":
			flush()
			marker := listItem(l)
			item := strings.TrimPrefix(l, marker)
			indent := strings.Repeat(" ", len(marker))
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], indent) && listItem(lines[i+1]) == "" {
				i++
				item += " " + strings.TrimSpace(lines[i])
			}
			wrapped := textfmt.WrapWords(item, width-len(marker))
			out = append(out, marker+strings.ReplaceAll(wrapped, "\n", "\n"+indent))
		case strings.HasPrefix(l, " ") || l == "":
			flush()
			out = append(out, l) // a table or a command: as written
		default:
			prose = append(prose, l)
			if strings.HasSuffix(l, ":") {
				flush()
			}
		}
	}
	flush()
	return strings.Join(out, "\n")
}

// listItem is the marker ("  - ", "  * ") a list item's line starts with, or "".
func listItem(l string) string {
	for _, m := range []string{"  - ", "  * ", "- ", "* "} {
		if strings.HasPrefix(l, m) {
			return m
		}
	}
	return ""
}
