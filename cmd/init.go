package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/agenthook"
	"github.com/undolog/undolog/internal/textfmt"
)

// hookAnswerMargin is what Claude Code's timeout of the PreToolUse hook
// gives past its wait: more than the hook's own margin, so that the hook
// always answers first (a hook cut off lets the tool run).
const hookAnswerMargin = hookMargin + 40*time.Second

// postHookTimeout is the PostToolUse hooks' timeout, in seconds: they wait
// for no person.
const postHookTimeout = 60

// projectPolicy is where init writes the default policy in a project.
const projectPolicy = ".claude/undolog-policy.yaml"

type initClaudeOptions struct {
	policy   string
	wait     time.Duration
	headless bool
}

func newCmdInit(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "init <agent>",
		Short: "Set up a coding agent's project to run its tools through undolog",
	}
	c.AddCommand(newCmdInitClaudeCode(f))
	return c
}

func newCmdInitClaudeCode(f *Factory) *cobra.Command {
	opts := &initClaudeOptions{}
	c := &cobra.Command{
		Use:   "claude-code [DIR]",
		Short: "Register undolog hook in a project's .claude/settings.json",
		Long: `Register 'undolog hook' for Claude Code's PreToolUse, PostToolUse and
PostToolUseFailure events in DIR/.claude/settings.json (DIR: the current directory),
with a timeout past the hook's longest wait. The settings' other keys and the user's
own hooks are kept as they are; undolog's entries are found again and updated, so
running it again changes nothing.

Without --policy it writes undolog's default policy for Claude Code's tools to
` + projectPolicy + ` (unless that file exists: yours stays) and the hook uses it.`,
		Example: `  undolog init claude-code
  undolog init claude-code --policy ~/policies/claude.yaml --wait 10m ~/src/app
  undolog init claude-code --headless --wait 0s   # CI: claude -p defers what needs a person`,
		Args: maxArgs(1, "at most one project directory"),
		RunE: func(c *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			return runInitClaudeCode(c, f, opts, dir)
		},
	}
	c.Flags().StringVar(&opts.policy, "policy", "", "the hook's policy file (default: "+projectPolicy+", written from undolog's default)")
	durationVar(c.Flags(), &opts.wait, "wait", 5*time.Minute, "how long the hook holds an irreversible call for a decision")
	c.Flags().BoolVar(&opts.headless, "headless", false, "the hook defers, not denies, a call no decision came for (claude -p)")
	return c
}

func runInitClaudeCode(c *cobra.Command, f *Factory, opts *initClaudeOptions, dir string) error {
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return usagef("%s is not a directory", dir)
	}
	out := c.OutOrStdout()
	claude := filepath.Join(dir, ".claude")
	if err := os.MkdirAll(claude, 0o755); err != nil {
		return err
	}
	policyArg := `"$CLAUDE_PROJECT_DIR"/` + projectPolicy
	if opts.policy != "" {
		abs, err := filepath.Abs(opts.policy)
		if err != nil {
			return err
		}
		if _, err := agenthook.LoadPolicy(abs); err != nil {
			return usagef("%v", err)
		}
		policyArg = textfmt.ShellQuote(abs)
	} else {
		path := filepath.Join(dir, projectPolicy)
		switch err := writeNew(path, agenthook.DefaultPolicy); {
		case errors.Is(err, fs.ErrExist):
			if _, err := agenthook.LoadPolicy(path); err != nil {
				return usagef("%v", err)
			}
			fmt.Fprintf(out, "kept %s\n", textfmt.Escape(path))
		case err != nil:
			return err
		default:
			fmt.Fprintf(out, "wrote %s\n", textfmt.Escape(path))
		}
	}
	command := fmt.Sprintf("%s --policy %s --wait %s", agenthook.HookCommand, policyArg, opts.wait)
	if opts.headless {
		command += " --headless"
	}
	regs := []agenthook.Registration{
		{Event: agenthook.PreToolUse, Command: command, Timeout: int((opts.wait + hookAnswerMargin).Seconds())},
		{Event: agenthook.PostToolUse, Command: command, Timeout: postHookTimeout},
		{Event: agenthook.PostToolUseFailure, Command: command, Timeout: postHookTimeout},
	}
	settings := filepath.Join(claude, "settings.json")
	old, err := os.ReadFile(settings)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	updated, changed, err := agenthook.Install(old, regs)
	if err != nil {
		return usagef("%s: %v (nothing was changed)", settings, err)
	}
	if !changed {
		fmt.Fprintf(out, "%s already runs undolog hook\n", textfmt.Escape(settings))
		return nil
	}
	if err := writeReplacing(settings, updated); err != nil {
		return err
	}
	fmt.Fprintf(out, "registered undolog hook in %s\n", textfmt.Escape(settings))
	return nil
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeReplacing replaces path with data whole (a rename), keeping its mode.
func writeReplacing(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".settings-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
