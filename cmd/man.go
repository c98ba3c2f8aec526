package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/undolog/undolog/internal/textfmt"
)

type manOptions struct {
	dir string
}

func newCmdMan(f *Factory) *cobra.Command {
	opts := &manOptions{}
	return &cobra.Command{
		Use:   "man [DIR]",
		Short: "Write the man pages (undolog.1, undolog-exec.1, ...) for man to find",
		Long: `Write a man page for every command into DIR: then 'man undolog' or
'man undolog-exec'. By default DIR is $XDG_DATA_HOME/man/man1 if XDG_DATA_HOME is set;
else beside the binary, PREFIX/share/man/man1 for a binary in PREFIX/bin (~/go/bin after
'go install'), where man looks for the commands on its PATH; else
~/.local/share/man/man1, which man reads when ~/.local/bin is on PATH or the directory's
parent is in MANPATH. Release archives hold the same pages.`,
		Args: maxArgs(1, "at most one directory"),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.dir = args[0]
			}
			return manRun(f, c.Root(), opts)
		},
	}
}

func manRun(f *Factory, root *cobra.Command, opts *manOptions) error {
	dir := opts.dir
	if data := f.Getenv("XDG_DATA_HOME"); dir == "" && filepath.IsAbs(data) {
		dir = filepath.Join(data, "man", "man1") // the user's own choice first (a relative one is ignored, as the XDG spec says)
	}
	if dir == "" {
		dir = besideBinary()
	}
	if dir == "" {
		home := f.Getenv("HOME")
		if home == "" {
			return usagef("neither $XDG_DATA_HOME nor $HOME is set: name the directory, undolog man DIR")
		}
		dir = filepath.Join(home, ".local", "share", "man", "man1")
	}
	n, err := WriteManPages(root, dir)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f.Out, "wrote %s to %s\n", textfmt.Count(n, "man page"), textfmt.Escape(dir))
	return err
}

// besideBinary is PREFIX/share/man/man1 for this binary run as
// PREFIX/bin/undolog, made if need be: man-db and mandoc look there for a
// command found on the PATH. The binary is taken as it was run (a link's
// folder, not its target's), and it is "" for a binary elsewhere (go run's),
// in the system's own folders (/bin, /usr/bin: the package manager's), or a
// folder this user cannot write.
func besideBinary() string {
	exe := os.Args[0]
	if !strings.ContainsRune(exe, filepath.Separator) {
		var err error
		if exe, err = exec.LookPath(exe); err != nil {
			return ""
		}
	}
	exe, err := filepath.Abs(exe)
	if err != nil || filepath.Base(filepath.Dir(exe)) != "bin" {
		return ""
	}
	prefix := filepath.Dir(filepath.Dir(exe))
	if prefix == "/" || prefix == "/usr" {
		return ""
	}
	dir := filepath.Join(prefix, "share", "man", "man1")
	if os.MkdirAll(dir, 0o755) != nil {
		return ""
	}
	probe, err := os.CreateTemp(dir, ".undolog-man-*")
	if err != nil {
		return "" // there, but not this user's to write
	}
	probe.Close()
	os.Remove(probe.Name())
	return dir
}

// WriteManPages writes a man page for root and every command under it into
// dir, creating it, and returns how many it wrote. The pages are written
// here rather than by cobra/doc: its Markdown renderer costs every process
// half a millisecond of package init, `undolog version` too.
func WriteManPages(root *cobra.Command, dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	n := 0
	var write func(c *cobra.Command) error
	write = func(c *cobra.Command) error {
		if c != root && !c.IsAvailableCommand() {
			return nil
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "-")
		if err := os.WriteFile(filepath.Join(dir, name+".1"), manPage(c), 0o644); err != nil {
			return err
		}
		n++
		for _, sub := range c.Commands() {
			if err := write(sub); err != nil {
				return err
			}
		}
		return nil
	}
	return n, write(root)
}

// manPage is c's page in man(7) roff.
func manPage(c *cobra.Command) []byte {
	var b strings.Builder
	name := strings.ReplaceAll(c.CommandPath(), " ", "-")
	fmt.Fprintf(&b, ".TH %q 1 \"\" \"undolog\" \"undolog manual\"\n", strings.ToUpper(name))
	b.WriteString(".SH NAME\n")
	fmt.Fprintf(&b, "%s \\- %s\n", roff(name), roff(c.Short))
	b.WriteString(".SH SYNOPSIS\n")
	fmt.Fprintf(&b, "\\fB%s\\fR\n", roff(c.UseLine()))
	b.WriteString(".SH DESCRIPTION\n")
	desc := c.Long
	if desc == "" {
		desc = c.Short
	}
	// As --help shows it: the text is wrapped and indented by hand.
	b.WriteString(".nf\n" + roffText(desc) + ".fi\n")
	flags := func(title string, fs *pflag.FlagSet) {
		if !fs.HasAvailableFlags() {
			return
		}
		fmt.Fprintf(&b, ".SH %s\n", title)
		fs.VisitAll(func(fl *pflag.Flag) {
			if fl.Hidden {
				return
			}
			b.WriteString(".TP\n")
			spec := "\\-\\-" + roff(fl.Name)
			if fl.Shorthand != "" {
				spec = "\\-" + roff(fl.Shorthand) + ", " + spec
			}
			varname, usage := pflag.UnquoteUsage(fl)
			if varname != "" {
				spec += " " + roff(varname)
			}
			fmt.Fprintf(&b, "\\fB%s\\fR\n", spec)
			if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "[]" && fl.DefValue != "0s" {
				usage += fmt.Sprintf(" (default %s)", fl.DefValue)
			}
			b.WriteString(roffText(usage))
		})
	}
	flags("OPTIONS", c.NonInheritedFlags())
	flags("OPTIONS INHERITED FROM PARENT COMMANDS", c.InheritedFlags())
	if c.Example != "" {
		b.WriteString(".SH EXAMPLE\n.EX\n")
		b.WriteString(roffText(c.Example))
		b.WriteString(".EE\n")
	}
	var see []string
	if c.HasParent() {
		see = append(see, strings.ReplaceAll(c.Parent().CommandPath(), " ", "-")+"(1)")
	}
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			see = append(see, strings.ReplaceAll(sub.CommandPath(), " ", "-")+"(1)")
		}
	}
	if len(see) > 0 {
		fmt.Fprintf(&b, ".SH SEE ALSO\n%s\n", roff(strings.Join(see, ", ")))
	}
	return []byte(b.String())
}

// roff escapes text for a roff line: a backslash is the escape character,
// and a hyphen is a minus sign (what options are spelled with).
func roff(s string) string {
	return strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
}

// roffText is text as roff lines: a line that would start with a control
// character (. or ') is kept as text.
func roffText(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			b.WriteString("\n")
		case strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'"):
			b.WriteString(`\&` + roff(line) + "\n")
		default:
			b.WriteString(roff(line) + "\n")
		}
	}
	return b.String()
}
