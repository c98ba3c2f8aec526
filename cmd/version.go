package cmd

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set by -ldflags "-X github.com/undolog/undolog/cmd.version=..." at release.
var (
	version = ""
	commit  = ""
	date    = ""
)

// BuildInfo returns version, commit and date: the ldflags values, else what
// the Go toolchain recorded in the binary.
func BuildInfo() (v, c, d string) {
	v, c, d = version, commit, date
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" && info.Main.Version != "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && c == "":
				c = s.Value
			case s.Key == "vcs.time" && d == "":
				d = s.Value
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if c == "" {
		c = "unknown"
	}
	if d == "" {
		d = "unknown"
	}
	return v, c, d
}

func init() { cobra.AddTemplateFunc("undologVersion", versionText) }

// versionText is what `undolog version` and `undolog --version` print.
func versionText() string {
	v, cm, d := BuildInfo()
	return fmt.Sprintf("undolog %s\ncommit: %s\nbuilt:  %s\n", v, cm, d)
}

type versionOptions struct {
	output string
}

func newCmdVersion(f *Factory) *cobra.Command {
	opts := &versionOptions{}
	c := &cobra.Command{
		Use:   "version",
		Short: "Print version, commit and build date",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			return versionRun(f, opts)
		},
	}
	addFormatFlag(c, &opts.output, false)
	return c
}

func versionRun(f *Factory, opts *versionOptions) error {
	if opts.output != formatText {
		v, cm, d := BuildInfo()
		return writeObject(f.Out, opts.output, map[string]string{"version": v, "commit": cm, "date": d})
	}
	_, err := io.WriteString(f.Out, versionText())
	return err
}
