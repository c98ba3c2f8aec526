package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/agenthook"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/logaddr"
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
	policy    string
	wait      time.Duration
	headless  bool
	noSandbox bool
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
running it again changes nothing. Settings it cannot update as they are (a key
twice, comments, a read-only file) are refused before anything is written; a link
is written through.

The entries name this undolog by its absolute path, and PreToolUse's ends in
'|| exit 2': a hook that cannot run, crashes or is killed blocks the call (Claude
Code runs a tool whose hook fails otherwise). Run init again after moving undolog.

It turns Claude Code's sandbox on for the agent's Bash (sandbox.enabled and
failIfUnavailable true, allowUnsandboxedCommands false; Linux needs bubblewrap and
socat, and init warns when bwrap or socat is not on the PATH), with writes denied to
the project's .claude, the log's directory and undolog's snapshot store (and a
--policy file elsewhere), and permission rules that deny Write and Edit there (and in
every .claude): the agent cannot rewrite the log, the settings or the policy, or
approve its own calls, whatever its shell line says. A log or store inside the
project, in a directory that holds it, or in a directory every user shares (/tmp),
and a --policy file in the project outside .claude, are refused: move it (--log,
$UNDOLOG_LOG, $UNDOLOG_FILES_DIR) and run init with the log the hook uses. A log file
other than the default is written into the hook's command (--log); a postgres:// URL
never is: give Claude Code $UNDOLOG_LOG yourself. Settings that turn the sandbox off,
in settings.json or settings.local.json, are refused, not overridden; so are commands
listed in sandbox.excludedCommands there (Claude Code runs them outside its sandbox),
and such a list in your own settings ($CLAUDE_CONFIG_DIR/settings.json, else
~/.claude/settings.json) is warned of. --no-sandbox
leaves the sandbox out (the hook then holds no shell command for it), still writes
the permission rules, and says what that leaves open.

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
	c.Flags().BoolVar(&opts.noSandbox, "no-sandbox", false, "leave Claude Code's sandbox off: only the policy stands between the agent's shell and the log")
	return c
}

func runInitClaudeCode(c *cobra.Command, f *Factory, opts *initClaudeOptions, dir string) error {
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return usagef("%s is not a directory", dir)
	}
	out := c.OutOrStdout()
	bin, err := hookBinary()
	if err != nil {
		return err
	}
	claude := filepath.Join(dir, ".claude")
	// Everything is checked before anything is written: a settings file
	// init cannot update leaves no policy file behind either.
	policyArg := `"$CLAUDE_PROJECT_DIR"/` + projectPolicy
	policyPath, writePolicy := filepath.Join(dir, projectPolicy), opts.policy == ""
	if opts.policy != "" {
		abs, err := filepath.Abs(opts.policy)
		if err != nil {
			return err
		}
		if _, err := agenthook.LoadPolicy(abs); err != nil {
			return usagef("%v", err)
		}
		policyArg = textfmt.ShellQuote(abs)
	} else if _, err := os.Lstat(policyPath); err == nil {
		if _, err := agenthook.LoadPolicy(policyPath); err != nil {
			return usagef("%v", err)
		}
		writePolicy = false
	}
	logFile, logArg := "", ""
	if addr := f.LogPath(); logaddr.IsFile(addr) {
		if logFile, err = filepath.Abs(addr); err != nil {
			return err
		}
		if addr != DefaultLogPath(f.Getenv) {
			// The hook's log is the one the sandbox keeps the agent from,
			// whatever Claude Code's environment says. A URL is never
			// written: it may hold a password.
			logArg = " --log " + textfmt.ShellQuote(logFile)
		}
	}
	command := fmt.Sprintf("%s hook%s --policy %s --wait %s", textfmt.ShellQuote(bin), logArg, policyArg, opts.wait)
	if opts.headless {
		command += " --headless"
	}
	if opts.noSandbox {
		command += " --no-sandbox"
	}
	guarded, err := agenthook.GuardedFor(dir, logFile, opts.policy)
	if err != nil {
		return usagef("%v (nothing was changed)", err)
	}
	if !opts.noSandbox {
		// Install would keep them: Claude Code runs those commands outside
		// its sandbox, the agent's Makefile recipe too.
		// A file that cannot be parsed is refused below, as it is.
		for _, file := range agenthook.ProjectSettings(dir) {
			if _, _, err := agenthook.Excluding([]string{file}); err == nil {
				if why := agenthook.ExcludedCommands([]string{file}); why != "" {
					return usagef("%s (nothing was changed)", why)
				}
			}
		}
	}
	regs := []agenthook.Registration{
		// A hook Claude Code cannot run (exit 127), or one that crashes or is
		// killed, lets the tool run; exit 2 blocks it.
		{Event: agenthook.PreToolUse, Command: command + " || exit 2", Timeout: int((opts.wait + hookAnswerMargin).Seconds())},
		{Event: agenthook.PostToolUse, Command: command, Timeout: postHookTimeout},
		{Event: agenthook.PostToolUseFailure, Command: command, Timeout: postHookTimeout},
	}
	settings := filepath.Join(claude, "settings.json")
	// A link is written through, not replaced by a file.
	if target, err := filepath.EvalSymlinks(settings); err == nil {
		settings = target
	}
	old, err := os.ReadFile(settings)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	updated, changed, err := agenthook.Install(old, regs)
	if err == nil {
		var sandboxed bool
		updated, sandboxed, err = agenthook.InstallSandbox(updated, guarded, !opts.noSandbox)
		changed = changed || sandboxed
	}
	if err != nil {
		return usagef("%s: %v (nothing was changed)", settings, err)
	}
	if !opts.noSandbox {
		// Its keys win over settings.json's, as in Claude Code (and the hook).
		local := filepath.Join(claude, "settings.local.json")
		b, err := os.ReadFile(local)
		if err == nil {
			err = agenthook.CheckLocalSandbox(b)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return usagef("%s: %v (nothing was changed)", local, err)
		}
	}
	if info, err := os.Stat(settings); err == nil && changed && info.Mode().Perm()&0o200 == 0 {
		return usagef("%s is read-only: make it writable to register the hook (nothing was changed)", settings)
	}
	if err := os.MkdirAll(claude, 0o755); err != nil {
		return err
	}
	if writePolicy {
		switch err := writeNew(policyPath, agenthook.DefaultPolicy); {
		case errors.Is(err, fs.ErrExist):
			return fmt.Errorf("%s appeared while init ran: run it again", policyPath)
		case err != nil:
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", textfmt.Escape(policyPath))
	} else if opts.policy == "" {
		fmt.Fprintf(out, "kept %s\n", textfmt.Escape(policyPath))
	}
	if missing := sandboxToolsMissing(); !opts.noSandbox && missing != "" {
		fmt.Fprintf(c.ErrOrStderr(), "undolog: warning: %s not on the PATH: Claude Code's sandbox needs bubblewrap and socat on Linux, and will not run Bash without them (apt install bubblewrap socat)\n", missing)
	}
	if opts.noSandbox {
		fmt.Fprintf(c.ErrOrStderr(), "undolog: warning: --no-sandbox: the agent's Bash runs outside Claude Code's sandbox, as you; only the policy (a guess at what a shell line does) keeps it from writing %s, changing .claude/ and approving its own calls\n",
			textfmt.Escape(strings.Join(guarded.Paths()[1:], " and ")))
	}
	if user := agenthook.UserSettings(f.Getenv); !opts.noSandbox {
		if why := agenthook.ExcludedCommands([]string{user}); why != "" {
			fmt.Fprintf(c.ErrOrStderr(), "undolog: warning: %s; the hook holds the agent's every shell command for a person while it does\n", textfmt.Escape(why))
		}
	}
	if !changed {
		fmt.Fprintf(out, "%s already runs undolog hook\n", textfmt.Escape(settings))
		return nil
	}
	if err := writeReplacing(settings, updated); err != nil {
		return err
	}
	fmt.Fprintf(out, "registered undolog hook in %s\n", textfmt.Escape(settings))
	if !opts.noSandbox {
		fmt.Fprintf(out, "sandboxed the agent's Bash: no writes to %s\n", textfmt.Escape(strings.Join(guarded.Paths(), ", ")))
	}
	return nil
}

// sandboxToolsMissing names the programs Claude Code's sandbox needs on
// Linux (bubblewrap's bwrap, socat) that are not on the PATH; "" if none.
func sandboxToolsMissing() string {
	if runtime.GOOS != "linux" {
		return ""
	}
	var missing []string
	for _, name := range []string{"bwrap", "socat"} {
		if _, err := exec.LookPath(name); err != nil {
			missing = append(missing, name)
		}
	}
	return strings.Join(missing, " and ")
}

// hookBinary is the absolute path the hook entries run undolog by: a
// hook Claude Code looks up on its PATH may find none. The PATH's
// undolog if it is this one (a link an upgrade moves stays right), else
// this executable; a `go run` build, deleted when it ends, is refused.
func hookBinary() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("the path of undolog's executable: %w", err)
	}
	if strings.Contains(filepath.ToSlash(self), "/go-build") {
		return "", usagef("undolog runs from a temporary `go run` build (%s), which the hook could not run later: install it (go install) and run init with that", self)
	}
	if onPath, err := exec.LookPath("undolog"); err == nil {
		if abs, err := filepath.Abs(onPath); err == nil && sameFile(abs, self) {
			return abs, nil
		}
	}
	return self, nil
}

func sameFile(a, b string) bool {
	x, err := os.Stat(a)
	if err != nil {
		return false
	}
	y, err := os.Stat(b)
	return err == nil && os.SameFile(x, y)
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
