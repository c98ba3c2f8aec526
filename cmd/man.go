package cmd

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/internal/textfmt"
)

// manPages are the man pages of every command, generated from the command
// tree by cobra's generator (`go run ./tools/gendocs`, which a test holds to
// the tree): the binary writes them out and carries no markdown renderer.
//
//go:embed manpages/*.1
var manPages embed.FS

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
			return manRun(f, opts)
		},
	}
}

func manRun(f *Factory, opts *manOptions) error {
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
	n, err := writeManPages(dir)
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

// writeManPages writes the man pages into dir, creating it, and returns
// how many it wrote.
func writeManPages(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	pages, err := fs.Glob(manPages, "manpages/*.1")
	if err != nil {
		return 0, err
	}
	for _, p := range pages {
		data, err := manPages.ReadFile(p)
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), data, 0o644); err != nil {
			return 0, err
		}
	}
	return len(pages), nil
}
