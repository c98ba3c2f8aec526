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
	if _, err := cmd.WriteManPages(root, filepath.Join(out, "man")); err != nil {
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
