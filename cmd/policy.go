package cmd

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/mcpclient"
	"github.com/undolog/undolog/policy"
	"github.com/undolog/undolog/saga"
)

// globEscaper escapes what path.Match would read as a pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)

// policyKey is a tool's name as a policy key: bare when it is letters,
// digits, _ . and -; else a quoted YAML string with its glob characters
// escaped.
func policyKey(name string) string {
	bare := name != ""
	for _, r := range name {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '.' || r == '-') {
			bare = false
		}
	}
	if bare {
		return name
	}
	return yamlQuote(globEscaper.Replace(name))
}

// yamlQuote is s as a YAML double-quoted string in which everything but
// printable text is an escape: a control, C1, bidi or invisible character
// of a server's tool name is neither written raw into the policy nor
// refused by the YAML reader.
func yamlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == utf8.RuneError, !unicode.IsPrint(r) && r != ' ', textfmt.Unsafe(r):
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func newCmdPolicy(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "policy <command>",
		Short: "Check or write a proxy policy",
	}
	c.AddCommand(newCmdPolicyCheck(f), newCmdPolicyInit(f))
	return c
}

func newCmdPolicyCheck(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE",
		Short: "Validate a policy: tiers, globs, capture and compensate templates",
		Args:  exactArgs(1, "one policy file"),
		RunE: func(c *cobra.Command, args []string) error {
			p, err := policy.LoadPolicy(args[0])
			if err != nil {
				return usagef("%v", err)
			}
			// A policy's names are an MCP server's (policy init writes them):
			// escaped, as every stored text is (renderTable escapes cells).
			rows := make([][]cell, 0, len(p.Rules))
			var warnings []string
			for i := range p.Rules {
				r := &p.Rules[i]
				rows = append(rows, []cell{plain(r.Pattern), plain(ruleTier(r)), plain(orDash(ruleCapture(r))), plain(orDash(ruleUndo(r)))})
				if r.Compensable() && !r.HasCompensation() && !r.Files {
					warnings = append(warnings, fmt.Sprintf("warning: %s is compensable but says no compensate: undo will ask a person to confirm it was undone by hand (see docs/policy.md)", r.Pattern))
				}
				if r.Cases != nil {
					for _, c := range r.Cases.Cases {
						for _, a := range c.Unguarded() {
							warnings = append(warnings, fmt.Sprintf("warning: %s: the run argument %q begins with a value before any `--`: one that begins with - is an option of %s (-rf, --help); put `--` before it if %s takes one, or begin the argument with fixed text (./, /dir/) (see docs/policy.md)", r.Pattern, a, c.Run[0], c.Run[0]))
						}
					}
				}
			}
			if err := renderTable(f, []string{"TOOL", "TIER", "CAPTURE", "UNDO"}, rows); err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintln(f.ErrOut, textfmt.Escape(w))
			}
			fmt.Fprintf(f.ErrOut, "ok: %s in %s%s\n", textfmt.Count(len(p.Rules), "rule"), textfmt.Escape(args[0]),
				map[bool]string{true: "", false: ", " + textfmt.Count(len(warnings), "warning")}[len(warnings) == 0])
			return nil
		},
	}
}

// lineBreaks are a condition's line breaks, with the indentation around them.
var lineBreaks = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[ \t]*\r?\n[ \t]*`) })

// ruleTier is a rule's tier, or its tier cases (asked of each command of
// its shell arg, when it has one).
func ruleTier(r *policy.Rule) string {
	if len(r.Tiers) == 0 {
		return string(r.Tier)
	}
	parts := make([]string, len(r.Tiers))
	for i, t := range r.Tiers {
		if t.When == "" {
			parts[i] = string(t.Tier)
		} else {
			// A condition written over several lines is one line in a cell.
			parts[i] = fmt.Sprintf("%s if %s", t.Tier, lineBreaks().ReplaceAllString(t.When, " "))
		}
	}
	tiers := strings.Join(parts, ", else ")
	if r.Shell != "" {
		return fmt.Sprintf("each command of .args.%s, the worst: %s", r.Shell, tiers)
	}
	return tiers
}

func captureName(c *policy.Call) string {
	if c.Optional {
		return c.Tool + " (optional)"
	}
	return c.Tool
}

// ruleCapture names a rule's capture calls.
func ruleCapture(r *policy.Rule) string {
	if r.Capture != nil {
		return captureName(r.Capture)
	}
	parts := make([]string, len(r.Captures))
	for i, n := range r.Captures {
		parts[i] = n.Name + "=" + captureName(n.Call)
	}
	return strings.Join(parts, ", ")
}

// ruleUndo is what undoes a rule's calls, in brief.
func ruleUndo(r *policy.Rule) string {
	switch {
	case r.Compensate != nil:
		return saga.Shorten("mcp " + r.Compensate.Tool + " " + string(r.Compensate.Args))
	case r.Files:
		return "files"
	case r.Cases != nil:
		parts := make([]string, len(r.Cases.Cases))
		for i, c := range r.Cases.Cases {
			switch {
			case c.Tool != "":
				parts[i] = "mcp " + c.Tool
			case len(c.Run) > 0:
				parts[i] = "run " + c.Run[0]
			default:
				parts[i] = "skip"
			}
		}
		return textfmt.Count(len(parts), "case") + ": " + strings.Join(parts, " | ")
	case r.Compensable():
		return "manual"
	}
	return ""
}

type policyInitOptions struct {
	file string
}

func newCmdPolicyInit(f *Factory) *cobra.Command {
	opts := &policyInitOptions{}
	c := &cobra.Command{
		Use:   "init [--file FILE] -- SERVER_CMD [ARGS...]",
		Short: "Write a starting policy from a server's tools and their annotations",
		Long: `Start the MCP server, list its tools and write a starting policy: tools annotated
readOnlyHint are safe, the others irreversible until you say how to undo them
(the policy shows where; docs/policy.md is the reference). Review it before use.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("policy init needs the MCP server command: undolog policy init -- SERVER_CMD [ARGS...]")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(c.Context(), 60*time.Second)
			defer cancel()
			client, err := mcpclient.Dial(ctx, args)
			if err != nil {
				return err
			}
			defer client.Close()
			tools, err := client.Tools(ctx)
			if err != nil {
				return err
			}
			var b strings.Builder
			fmt.Fprintf(&b, "# undolog policy for: %s\n# Written by 'undolog policy init'; review it. Check it with 'undolog policy check FILE'.\n", textfmt.Escape(strings.Join(args, " ")))
			b.WriteString("# A compensable tool says how to undo it: an MCP call or a command, chosen by a\n")
			b.WriteString("# condition if need be, with \"{{ jq }}\" templates over .args (the call's), .result\n")
			b.WriteString("# and .capture (a call made before it). docs/policy.md is the reference, with examples.\ntools:\n")
			for _, t := range tools {
				// A tool's name is the server's to choose: quoted (a JSON string is
				// a YAML one), a name with a colon, a newline or a # stays one key;
				// its glob characters escaped, a name like "*" matches itself only.
				name := policyKey(t.Name)
				a := t.Annotations
				switch {
				case a != nil && a.ReadOnlyHint:
					fmt.Fprintf(&b, "  %s:\n    tier: safe            # readOnlyHint\n", name)
				default:
					why := "" // the server's own word, when it says the tool destroys
					if a != nil && a.DestructiveHint != nil && *a.DestructiveHint {
						why = " (destructiveHint)"
					}
					fmt.Fprintf(&b, "  %s:\n    tier: irreversible    # make it compensable%s: tier: compensable, and\n    # compensate:\n    #   tool: TOOL_THAT_UNDOES_IT   # or run: [COMMAND, ARG, ...] in place of tool and args: see docs/policy.md\n    #   args: {}\n", name, why)
				}
			}
			if opts.file == "" || opts.file == "-" {
				_, err = fmt.Fprint(f.Out, b.String())
				return err
			}
			if _, err := os.Lstat(opts.file); err == nil {
				return usagef("%s exists; not overwriting it", opts.file)
			}
			if err := os.WriteFile(opts.file, []byte(b.String()), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(f.ErrOut, "wrote %s: %d tools\n", textfmt.Escape(opts.file), len(tools))
			return nil
		},
	}
	c.Flags().SetInterspersed(false)
	c.Flags().StringVar(&opts.file, "file", "", "write to `FILE` (which must not exist) instead of standard output")
	return c
}
