package policy

// A rule's `shell: FIELD` says that the call's FIELD is a shell script (a
// coding agent's Bash tool: `command`). Its tier cases are then asked of
// each command the script runs, and the call takes the highest tier found:
// `ls; git push` is as dangerous as `git push`. What cannot be read for
// sure (a command named by an expansion, a script that does not parse, code
// a shell or an interpreter gets as a string it cannot see) is a command
// with no name, which a policy classifies as the worst.

import (
	"encoding/json"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	sm "github.com/undolog/undolog/statemachine"
)

// ShellCommand is one command a script runs, as a policy's tier cases see
// it: merged into the call's args (.args.argv, .args.name, ...).
type ShellCommand struct {
	// Argv is its words; a word that is not a literal (an expansion, a
	// substitution) is null.
	Argv []*string `json:"argv"`
	// Name is the base name of its first word; null when that word is not
	// a literal, or when what runs cannot be known (Opaque says why).
	Name *string `json:"name"`
	// Writes are the files its output redirections write (null: not a
	// literal); /dev/null is left out.
	Writes []*string `json:"writes"`
	// Cd: the script changes directory somewhere, so relative paths in it
	// may be outside the project.
	Cd bool `json:"cd"`
	// Opaque says why what runs is not known ("" when it is).
	Opaque string `json:"opaque,omitempty"`
}

// shells run a script given with -c; with none they read one from a file
// or their input.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "fish": true, "busybox": true}

// interpreters run code given on their command line with one of their
// flags (python -c, node -e): a string no parser here reads.
var interpreters = map[string][]string{
	"python": {"-c"}, "python3": {"-c"}, "python2": {"-c"}, "node": {"-e", "--eval", "-p", "--print"},
	"perl": {"-e", "-E"}, "ruby": {"-e"}, "php": {"-r"}, "deno": {"eval"}, "bun": {"-e", "--eval"}, "lua": {"-e"},
	"osascript": {"-e"},
}

// wrappers run another command given in their arguments (after options
// of their own that this does not try to read): each of their literal
// words not an option may begin that command, so each such tail is a
// command too, and the worst of them counts.
var wrappers = map[string]bool{
	"env": true, "sudo": true, "doas": true, "nohup": true, "time": true, "nice": true, "ionice": true,
	"timeout": true, "command": true, "exec": true, "builtin": true, "xargs": true, "stdbuf": true,
	"setsid": true, "chrt": true, "taskset": true, "watch": true, "strace": true, "ltrace": true,
	"unbuffer": true, "flock": true, "chroot": true, "su": true, "runuser": true, "parallel": true,
	"script": true, "firejail": true, "systemd-run": true, "npx": true, "bunx": true, "pnpx": true,
	"caffeinate": true, "then": true, "do": true, "eval": true,
}

// maxDepth bounds scripts within scripts (sh -c "sh -c '...'").
const maxDepth = 8

// ShellCommands is every command script runs, nested ones included
// (substitutions, subshells, functions, pipelines, sh -c), in no promised
// order; a script that does not parse is one opaque command.
func ShellCommands(script string) []ShellCommand {
	var out []ShellCommand
	cd := false
	parseScript(script, 0, &out, &cd)
	for i := range out {
		out[i].Cd = cd
	}
	return out
}

func opaque(why string) ShellCommand { return ShellCommand{Opaque: why} }

func parseScript(script string, depth int, out *[]ShellCommand, cd *bool) {
	if depth > maxDepth {
		*out = append(*out, opaque("scripts nested too deep"))
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(script), "")
	if err != nil {
		*out = append(*out, opaque("the script does not parse: "+err.Error()))
		return
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			var writes []*string
			for _, r := range n.Redirs {
				if w, ok := redirWrite(r); ok {
					writes = append(writes, w)
				}
			}
			call, isCall := n.Cmd.(*syntax.CallExpr)
			if !isCall || len(call.Args) == 0 {
				if len(writes) > 0 { // { ...; } > file, or > file alone
					empty := ""
					*out = append(*out, ShellCommand{Argv: []*string{}, Name: &empty, Writes: writes})
				}
				return true
			}
			argv := make([]*string, len(call.Args))
			for i, w := range call.Args {
				argv[i] = literal(w)
			}
			command(argv, writes, depth, out, cd)
		case *syntax.ProcSubst, *syntax.CoprocClause:
			// Their statements are walked as any.
		}
		return true
	})
}

// command adds the command argv (with its redirections' writes) and what
// it runs in turn.
func command(argv []*string, writes []*string, depth int, out *[]ShellCommand, cd *bool) {
	c := ShellCommand{Argv: argv, Writes: writes}
	name := argv[0]
	if name == nil || strings.ContainsAny(*name, "*?[{~$`") {
		c.Opaque = "the command's name is not a literal"
		*out = append(*out, c)
		return
	}
	base := path.Base(*name)
	c.Name = &base
	*out = append(*out, c)
	switch {
	case base == "cd" || base == "pushd" || base == "popd":
		*cd = true
	case wrappers[base]:
		if base == "eval" {
			script, ok := joinLiteral(argv[1:])
			if !ok {
				*out = append(*out, opaque("eval of an expansion"))
				return
			}
			parseScript(script, depth+1, out, cd)
			return
		}
		for i := 1; i < len(argv); i++ {
			if w := argv[i]; w == nil || !strings.HasPrefix(*w, "-") && !isAssignment(*w) {
				command(argv[i:], nil, depth+1, out, cd)
			}
		}
	case shells[base]:
		shellArgs(argv, depth, out, cd)
	case base == "find":
		for i := 1; i < len(argv); i++ {
			if w := argv[i]; w != nil && (*w == "-exec" || *w == "-execdir" || *w == "-ok" || *w == "-okdir") && i+1 < len(argv) {
				end := i + 1
				for end < len(argv) && (argv[end] == nil || *argv[end] != ";" && *argv[end] != "+") {
					end++
				}
				command(argv[i+1:end], nil, depth+1, out, cd)
			}
		}
	case base == "awk" || base == "gawk" || base == "mawk":
		for _, w := range argv[1:] {
			if w == nil || strings.Contains(*w, "system") || strings.Contains(*w, "|") {
				*out = append(*out, opaque(base+" runs commands from its program"))
				return
			}
		}
	default:
		for _, w := range argv[1:] {
			for _, flag := range interpreters[base] {
				if w == nil || *w == flag || strings.HasPrefix(*w, flag+"=") {
					*out = append(*out, opaque(base+" runs code given on its command line"))
					return
				}
			}
		}
	}
}

// shellArgs reads a shell's arguments: a -c script is parsed in turn; a
// shell with none runs a file or its input, which is not seen here.
func shellArgs(argv []*string, depth int, out *[]ShellCommand, cd *bool) {
	for i := 1; i < len(argv); i++ {
		w := argv[i]
		if w == nil {
			*out = append(*out, opaque("a shell given an expansion"))
			return
		}
		if strings.HasPrefix(*w, "-") && !strings.HasPrefix(*w, "--") && strings.Contains(*w, "c") {
			if i+1 >= len(argv) || argv[i+1] == nil {
				*out = append(*out, opaque("a shell's -c script is not a literal"))
				return
			}
			parseScript(*argv[i+1], depth+1, out, cd)
			return
		}
		if !strings.HasPrefix(*w, "-") {
			*out = append(*out, opaque("a shell runs the script "+*w))
			return
		}
	}
	*out = append(*out, opaque("a shell runs the script its input gives"))
}

// literal is w's value when every part of it is known before the shell
// runs (quotes resolved), else nil.
func literal(w *syntax.Word) *string {
	var b strings.Builder
	if !literalParts(w.Parts, &b, false) {
		return nil
	}
	s := b.String()
	return &s
}

func literalParts(parts []syntax.WordPart, b *strings.Builder, quoted bool) bool {
	for _, p := range parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(p.Value, quoted))
		case *syntax.SglQuoted:
			if p.Dollar { // $'...' escapes: not read here
				return false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar || !literalParts(p.Parts, b, true) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// unescape drops the backslashes the shell drops: before any character
// outside quotes, before $ ` " \ and newline inside double quotes.
func unescape(s string, quoted bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (!quoted || strings.IndexByte("$`\"\\\n", s[i+1]) >= 0) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func joinLiteral(words []*string) (string, bool) {
	parts := make([]string, len(words))
	for i, w := range words {
		if w == nil {
			return "", false
		}
		parts[i] = *w
	}
	return strings.Join(parts, " "), true
}

// redirWrite is the file an output redirection writes (nil: not a
// literal); false for one that writes no file.
func redirWrite(r *syntax.Redirect) (*string, bool) {
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob, syntax.AppClob,
		syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob, syntax.DplOut:
	default:
		return nil, false
	}
	target := literal(r.Word)
	if target == nil {
		return nil, true
	}
	if r.Op == syntax.DplOut && (*target == "-" || strings.Trim(*target, "0123456789") == "") {
		return nil, false // >&2: a descriptor
	}
	if *target == "/dev/null" || *target == "/dev/stdout" || *target == "/dev/stderr" {
		return nil, false
	}
	return target, true
}

// shellTier is the highest tier the rule's cases give the commands of the
// script in args' field r.Shell, and why, naming the command that gave it.
func (r *Rule) shellTier(args json.RawMessage) (sm.Tier, string, error) {
	var fields map[string]any
	if err := json.Unmarshal(args, &fields); err != nil {
		return "", "", err
	}
	script, ok := fields[r.Shell].(string)
	commands := []ShellCommand{opaque(r.Shell + " is not a string")}
	if ok {
		commands = ShellCommands(script)
	}
	var worst sm.Tier
	var why string
	for i, c := range commands {
		b, err := json.Marshal(c)
		if err != nil {
			return "", "", err
		}
		var merged map[string]any
		if err := json.Unmarshal(b, &merged); err != nil {
			return "", "", err
		}
		for k, v := range fields {
			if _, ours := merged[k]; !ours {
				merged[k] = v
			}
		}
		in, err := json.Marshal(merged)
		if err != nil {
			return "", "", err
		}
		t, caseWhy, err := r.tierCase(in)
		if err != nil {
			return "", "", err
		}
		if i == 0 || tierRank(t) > tierRank(worst) {
			what := c.Opaque
			if what == "" {
				what = "`" + shownArgv(c.Argv) + "`"
			}
			worst, why = t, caseWhy+" for "+what
		}
	}
	return worst, why, nil
}

// shownArgv is argv as a line, $... for a word not a literal.
func shownArgv(argv []*string) string {
	words := make([]string, len(argv))
	for i, w := range argv {
		words[i] = "$..."
		if w != nil {
			words[i] = *w
		}
	}
	return strings.Join(words, " ")
}

func tierRank(t sm.Tier) int { return slices.Index(sm.Tiers, t) }
