// Command gendocs writes undolog's man pages and shell completions; the
// release build (.goreleaser.yaml) ships them in the archives.
//
//	go run ./tools/gendocs -out .release/docs
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra/doc"

	"github.com/undolog/undolog/cmd"
)

func main() {
	out := flag.String("out", "docs", "output `directory`")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	f := &cmd.Factory{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, Getenv: os.Getenv, Now: time.Now}
	root := cmd.NewRootCmd(f)
	root.DisableAutoGenTag = true
	man := filepath.Join(out, "man")
	if err := os.MkdirAll(man, 0o755); err != nil {
		return err
	}
	header := &doc.GenManHeader{Title: "UNDOLOG", Section: "1", Source: "undolog", Manual: "undolog manual"}
	if err := doc.GenManTree(root, header, man); err != nil {
		return err
	}
	comp := filepath.Join(out, "completions")
	if err := os.MkdirAll(comp, 0o755); err != nil {
		return err
	}
	for name, gen := range map[string]func(*bytes.Buffer) error{
		"undolog.bash": func(b *bytes.Buffer) error { return root.GenBashCompletionV2(b, true) },
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
