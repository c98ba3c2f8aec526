package cmd

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

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
		Long: `Write a man page for every command into DIR, default
$XDG_DATA_HOME/man/man1 (~/.local/share/man/man1), where man looks on most systems:
then 'man undolog' or 'man undolog-exec'. For users of 'go install'; release archives
hold the same pages.`,
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
	if dir == "" {
		data := f.Getenv("XDG_DATA_HOME")
		if data == "" {
			home := f.Getenv("HOME")
			if home == "" {
				return usagef("neither $XDG_DATA_HOME nor $HOME is set: name the directory, undolog man DIR")
			}
			data = filepath.Join(home, ".local", "share")
		}
		dir = filepath.Join(data, "man", "man1")
	}
	n, err := WriteManPages(root, dir)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f.Out, "wrote %s to %s\n", textfmt.Count(n, "man page"), textfmt.Escape(dir))
	return err
}

// WriteManPages writes a man page for root and every command under it into
// dir, creating it, and returns how many it wrote.
func WriteManPages(root *cobra.Command, dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	root.DisableAutoGenTag = true
	header := &doc.GenManHeader{Title: "UNDOLOG", Section: "1", Source: "undolog", Manual: "undolog manual"}
	if err := doc.GenManTree(root, header, dir); err != nil {
		return 0, err
	}
	n := 0
	var count func(c *cobra.Command)
	count = func(c *cobra.Command) {
		if c.IsAvailableCommand() || c == root {
			n++
		}
		for _, sub := range c.Commands() {
			count(sub)
		}
	}
	count(root)
	return n, nil
}
