// Command gendocs writes undolog's command reference (markdown, one page a
// command, committed in docs/cli), its man pages (committed in cmd/manpages,
// which `undolog man` writes out) and, for the release archives
// (.goreleaser.yaml), the man pages and shell completions. All of it comes
// from the command tree, so that each fact has one source.
//
//	go run ./tools/gendocs                         # docs/cli and cmd/manpages
//	go run ./tools/gendocs -out .release/docs      # and man/, completions/ there
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/undolog/undolog/cmd"
)

func main() {
	cli := flag.String("cli", "docs/cli", "where to write the command reference (markdown)")
	man := flag.String("man", "cmd/manpages", "where to write the man pages the binary carries")
	out := flag.String("out", "", "where to write the man pages and completions (`directory`; none when empty)")
	flag.Parse()
	if err := run(*cli, *man, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

// regenerate is the command that writes docs/cli and cmd/manpages, as
// their pages say.
const regenerate = "go run ./tools/gendocs"

// manDate is the date the man pages show: fixed, so that the pages are the
// same wherever and whenever they are generated (cobra's would be today).
var manDate = time.Date(2026, time.December, 1, 0, 0, 0, 0, time.UTC)

func run(cli, man, out string) error {
	if cli != "" {
		if err := writeReference(newRoot(), cli); err != nil {
			return err
		}
	}
	if man != "" {
		if err := writeManPages(newRoot(), man); err != nil {
			return err
		}
	}
	if out == "" {
		return nil
	}
	root := newRoot()
	if err := writeManPages(root, filepath.Join(out, "man")); err != nil {
		return err
	}
	comp := filepath.Join(out, "completions")
	if err := os.MkdirAll(comp, 0o755); err != nil {
		return err
	}
	for name, gen := range map[string]func(*bytes.Buffer) error{
		"undolog.bash": func(b *bytes.Buffer) error { return cmd.GenBashCompletion(root, b, true) },
		"_undolog":     func(b *bytes.Buffer) error { return root.GenZshCompletion(b) },
		"undolog.fish": func(b *bytes.Buffer) error { return root.GenFishCompletion(b, true) },
		"undolog.ps1":  func(b *bytes.Buffer) error { return root.GenPowerShellCompletionWithDesc(b) },
	} {
		var b bytes.Buffer
		if err := gen(&b); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(comp, name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// newRoot is the command tree, over an empty environment: the pages are
// the same wherever they are generated.
func newRoot() *cobra.Command {
	f := &cmd.Factory{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, Getenv: func(string) string { return "" }, Now: time.Now}
	return cmd.NewRootCmd(f)
}

// writeReference replaces dir's pages with a page for root and every
// command under it.
func writeReference(root *cobra.Command, dir string) error {
	if err := emptyDir(dir, "*.md"); err != nil {
		return err
	}
	header := func(string) string {
		return "<!-- Generated from the command tree by `" + regenerate + "`: edit the commands, not this page. -->\n\n"
	}
	return doc.GenMarkdownTreeCustom(root, dir, header, func(link string) string { return link })
}

// writeManPages replaces dir's man pages with a page for root and every
// command under it.
func writeManPages(root *cobra.Command, dir string) error {
	if err := emptyDir(dir, "*.1"); err != nil {
		return err
	}
	return doc.GenManTree(root, &doc.GenManHeader{Source: "undolog", Manual: "undolog manual", Date: &manDate}, dir)
}

// emptyDir makes dir, or removes from it the files glob matches: the pages
// of commands that are gone go with them.
func emptyDir(dir, glob string) error {
	old, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil {
		return err
	}
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return os.MkdirAll(dir, 0o755)
}
