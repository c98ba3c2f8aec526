package cmd

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	sm "github.com/undolog/undolog/statemachine"
)

// What a shell completes beyond command and flag names: the vocabularies
// (states, tiers, formats) and, read from the log, session ids and effect
// ids. Registered once over the whole tree, by flag name and command path,
// so that each command's file stays about its work.

// completeLimit bounds what one completion reads from the log.
const completeLimit = 200

type completeFunc = func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective)

// addCompletions registers the completions of every command under root.
func addCompletions(f *Factory, root *cobra.Command) {
	effectStates := words(sm.States)
	sessionStates := words(sm.SessionStates)
	tiers := words(sm.Tiers)
	entryStates := words(sm.EntryStates)
	positional := map[string]completeFunc{
		"undolog session show":     first(sessionIDs(f)),
		"undolog session complete": first(sessionIDs(f)),
		"undolog session fail":     first(sessionIDs(f)),
		"undolog session resume":   first(sessionIDs(f)),
		"undolog undo":             first(sessionIDs(f)),
		"undolog approve":          waitingIDs(f),
		"undolog reject":           waitingIDs(f),
		"undolog show":             effectIDs(f),
		"undolog start":            effectIDs(f),
		"undolog commit":           first(effectIDs(f)),
		"undolog fail":             first(effectIDs(f)),
		"undolog resolve":          first(effectIDs(f)),
		"undolog transition": func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 1 {
				return nextStates(f, effectStates)(c, args, toComplete)
			}
			return first(effectIDs(f))(c, args, toComplete)
		},
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if fn, ok := positional[c.CommandPath()]; ok {
			c.ValidArgs, c.ValidArgsFunction = nil, fn
		}
		flags := map[string]completeFunc{"session": sessionIDs(f), "tier": fixed(tiers)}
		if c.CommandPath() == "undolog list" {
			flags["undo"] = fixed(entryStates) // exec's --undo is a command
		}
		if c.HasParent() && c.Parent().Name() == "session" {
			flags["state"] = fixed(sessionStates)
		} else {
			flags["state"] = fixed(effectStates)
		}
		if o := c.Flags().Lookup("output"); o != nil && strings.HasPrefix(o.Usage, "output format") {
			formats := []string{formatText, formatJSON, formatJSONL}
			if strings.Contains(o.Usage, formatIDs) {
				formats = append(formats, formatIDs)
			}
			flags["output"] = fixed(formats)
		}
		for name, fn := range flags {
			if c.Flags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, fn)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func words[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

func fixed(vs []string) completeFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return vs, cobra.ShellCompDirectiveNoFileComp
	}
}

// first completes the first argument only.
func first(fn completeFunc) completeFunc {
	return func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return fn(c, args, toComplete)
	}
}

// completionLog is the log to read candidates from, without the warning
// about its mode (it would land in the middle of the command line).
func completionLog(f *Factory) effectlog.Log {
	f.logs.warnedMode = true
	return f.Log()
}

// candidate is one completion: the value, a tab, and a description made
// safe for the terminal (stored text is an agent's to choose).
func candidate(value, description string) string {
	return value + "\t" + textfmt.Escape(description)
}

func sessionIDs(f *Factory) completeFunc {
	return func(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		list, _, err := completionLog(f).ListSessions(c.Context(), effectlog.SessionFilter{Limit: completeLimit})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, s := range list {
			if strings.HasPrefix(s.ID, toComplete) {
				out = append(out, candidate(s.ID, string(s.State)))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// waitingIDs completes the effects awaiting a decision, not already given.
func waitingIDs(f *Factory) completeFunc {
	return func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		list, _, err := completionLog(f).PendingApprovals(c.Context(), "", completeLimit)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, a := range list {
			id := fmt.Sprint(a.EffectID)
			if strings.HasPrefix(id, toComplete) && !slices.Contains(args, id) {
				out = append(out, candidate(id, a.Effect.Tool+" in "+a.Effect.Session))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// effectIDs completes the newest effects, not already given.
// nextStates completes the states the effect args[0] can move to, as the
// spec says; all of them when the effect cannot be read.
func nextStates(f *Factory, all []string) completeFunc {
	return func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		id, err := parseID(args[0])
		if err != nil {
			return fixed(all)(c, args, toComplete)
		}
		d, err := completionLog(f).GetEffect(c.Context(), id)
		if err != nil {
			return fixed(all)(c, args, toComplete)
		}
		var out []string
		for _, to := range sm.States {
			if _, err := sm.Validate(d.Effect.Tier, d.Effect.State, to); err == nil {
				out = append(out, string(to))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func effectIDs(f *Factory) completeFunc {
	return func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		list, _, err := completionLog(f).ListEffects(c.Context(), effectlog.EffectFilter{Limit: completeLimit})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, e := range list {
			id := fmt.Sprint(e.ID)
			if strings.HasPrefix(id, toComplete) && !slices.Contains(args, id) {
				out = append(out, candidate(id, e.Tool+" "+string(e.State)+" in "+e.Session))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// bashCompletion makes `completion bash` write GenBashCompletion's script,
// and its help say that the bash-completion package is not needed.
func bashCompletion(root *cobra.Command) {
	comp := subcommand(root, "completion")
	if comp == nil {
		return
	}
	bash := subcommand(comp, "bash")
	if bash == nil {
		return
	}
	bash.Long = strings.Replace(bash.Long, `This script depends on the 'bash-completion' package.
If it is not installed already, you can install it via your OS's package manager.`,
		`The script uses the 'bash-completion' package when it is loaded, and works
without it (words are then split at spaces only: a quoted argument with spaces is
not completed).`, 1)
	bash.RunE = func(c *cobra.Command, _ []string) error {
		noDesc, _ := c.Flags().GetBool("no-descriptions")
		return GenBashCompletion(c.Root(), c.OutOrStdout(), !noDesc)
	}
}

// GenBashCompletion writes cobra's bash completion script for root, made to
// work without the bash-completion package: cobra's calls
// _get_comp_words_by_ref and _filedir, which only that package defines, and
// without it each Tab printed "command not found". Here they go through
// functions of the script's own that use the package's when it is loaded.
func GenBashCompletion(root *cobra.Command, w io.Writer, descriptions bool) error {
	var b bytes.Buffer
	if err := root.GenBashCompletionV2(&b, descriptions); err != nil {
		return err
	}
	script := b.String()
	name := root.Name()
	const words = "\n    _get_comp_words_by_ref \"$@\" cur prev words cword\n"
	if !strings.Contains(script, words) {
		return fmt.Errorf("bash completion: cobra's script no longer reads its words with _get_comp_words_by_ref")
	}
	script = strings.Replace(script, words, "\n    __"+name+"_comp_words \"$@\"\n", 1)
	script = filedirCall().ReplaceAllString(script, "${1}__"+name+"_filedir")
	script = strings.Replace(script, "\n__start_"+name+"()", strings.ReplaceAll(bashFallbacks, "NAME", name)+"\n__start_"+name+"()", 1)
	_, err := io.WriteString(w, script)
	return err
}

// filedirCall is a call of bash-completion's _filedir in cobra's script.
var filedirCall = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[\s"])_filedir\b`) })

// bashFallbacks stand in for the bash-completion package's functions when it
// is not loaded. Without it bash splits words at = and : too: the words are
// the command line up to the cursor split at spaces, so that --flag=value
// stays one word, as the package makes it.
const bashFallbacks = `
# Without the bash-completion package: its functions' minimal equivalents.
__NAME_comp_words()
{
    if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
        _get_comp_words_by_ref "$@" cur prev words cword
        return
    fi
    local line=${COMP_LINE:0:COMP_POINT}
    read -r -a words <<< "$line"
    if [[ -z $line || $line == *[[:space:]] ]]; then
        words+=("")
    fi
    cword=$((${#words[@]}-1))
    cur=${words[cword]}
    prev=${words[cword-1]-}
}

__NAME_filedir()
{
    if declare -F _filedir >/dev/null 2>&1; then
        _filedir "$@"
        return
    fi
    local IFS=$'\n'
    if [[ ${1-} == -d ]]; then
        COMPREPLY=($(compgen -d -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
`
