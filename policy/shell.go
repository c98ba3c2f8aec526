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
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
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
	// a literal, names a program by a path outside the system's own
	// directories, or when what runs cannot be known (Opaque says why).
	Name *string `json:"name"`
	// Opts are the words before its first operand (the options, and the
	// values of those known to take one: git -C DIR); Words its operands,
	// every word after them that is not an option (null: not a literal).
	// Words[0] is a subcommand, for a command that has them.
	Opts  []*string `json:"opts"`
	Words []*string `json:"words"`
	// Assigns are the environment variables set for it (FOO=1 cmd, env
	// FOO=1 cmd, export FOO=1): what they name is what a program runs
	// (PATH, LD_PRELOAD, GIT_CONFIG_*).
	Assigns []string `json:"assigns"`
	// Writes are the files it writes: its output redirections' (/dev/null
	// left out), and those its operands name for the commands known to
	// write them (tee, cp, mv, touch, rm, sed -i, ...); null: not a literal.
	Writes []*string `json:"writes"`
	// Outside: one of Writes is not a literal or is outside the project
	// (symbolic links followed), where the project's snapshot does not
	// reach; /tmp is scratch, and inside. Guarded: one of Writes is the
	// agent's or undolog's own configuration (.claude/, .git/config,
	// .git/hooks/), which arms what runs later.
	Outside bool `json:"outside"`
	Guarded bool `json:"guarded"`
	// Cd: the script changes directory somewhere its relative paths may
	// not be the project's (anywhere but one literal directory inside).
	Cd bool `json:"cd"`
	// Opaque says why what runs is not known ("" when it is).
	Opaque string `json:"opaque,omitempty"`
}

// shells run a script given with -c; with none they read one from a file
// or their input.
var shells = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "fish": true, "busybox": true}
})

// interpreters run code given on their command line with one of their
// flags (python -c, node -e): a string no parser here reads. With no
// operand they read code from their input.
var interpreters = sync.OnceValue(func() map[string][]string {
	return map[string][]string{
		"python": {"-c"}, "python3": {"-c"}, "python2": {"-c"}, "node": {"-e", "--eval", "-p", "--print"},
		"perl": {"-e", "-E"}, "ruby": {"-e"}, "php": {"-r"}, "deno": {"eval"}, "bun": {"-e", "--eval"}, "lua": {"-e"},
		"osascript": {"-e"}, "Rscript": {"-e"}, "pwsh": {"-c", "-Command"}, "irb": {}, "tclsh": {}, "julia": {"-e"},
		"dc": {"-e", "--expression"}, "m4": {}, "expect": {"-c"}, "wish": {},
	}
})

// editors run the commands they are given (vim -c '!git push', ed's !),
// and so do debuggers (gdb -ex run --args git push).
var editors = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"vi": true, "vim": true, "nvim": true, "ex": true, "emacs": true, "ed": true, "view": true, "gdb": true, "lldb": true}
})

// multiplexers run commands in a session that outlives the call (tmux
// new -d CMD, send-keys, run-shell); only their listings are read.
var multiplexers = sync.OnceValue(func() map[string][]string {
	return map[string][]string{
		"tmux":   {"ls", "list-sessions", "list-windows", "list-panes", "list-clients", "has-session", "has", "capture-pane", "capturep", "-V"},
		"screen": {"-ls", "-list", "-v", "--version"},
	}
})

// programOptions are options that make a command run a program or
// commands named in their value (sort --compress-program, rg --pre, tar
// --to-command): what runs then is not known.
var programOptions = sync.OnceValue(func() map[string][]string {
	return map[string][]string{
		"sort": {"--compress-program"}, "rg": {"--pre", "--hostname-bin"},
		"tar": {"--to-command", "--use-compress-program", "-I", "--checkpoint-action", "--info-script", "--new-volume-script", "-F", "--rsh-command", "--rmt-command"},
		"git": {"--upload-pack", "--receive-pack", "--exec", "--open-files-in-pager", "-O", "--exec-path=", "--extcmd", "--tool"},
		"zip": {"-TT", "--unzip-command"}, "man": {"-P", "--pager", "-H", "--html"}, "less": {"-o", "-O", "--log-file", "--LOG-FILE"},
		"compgen": {"-C"}, "complete": {"-C"}, "mapfile": {"-C"}, "readarray": {"-C"}, "fzf": {"--preview", "--bind"},
		"hash": {"-p"}, "enable": {"-f"},
	}
})

// sourcing runs a file's code in the shell itself, or arms the shell to
// run code later (trap, alias): not read here.
var sourcing = sync.OnceValue(func() map[string]bool { return map[string]bool{"source": true, ".": true, "fc": true} })

// valued are the options that take the next word as their value, before
// a command's first operand: git -C DIR status (DIR is not a subcommand).
var valued = sync.OnceValue(func() map[string][]string {
	return map[string][]string{
		"git":     {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix"},
		"undolog": {"--log", "--lock-timeout"},
		"go":      {"-C"},
		"npm":     {"--prefix", "-w", "--workspace"}, "pnpm": {"-C", "--dir", "--filter", "-F"}, "yarn": {"--cwd"},
		"make": {"-C", "-f", "--directory", "--file", "--makefile", "-I", "-o", "-W"},
	}
})

// messages are the options of a command that take a text anywhere (git
// commit -m "$(cat <<EOF ...)"): their value is neither an operand nor an
// option, whatever it expands to.
var messages = sync.OnceValue(func() map[string][]string { return map[string][]string{"git": {"-m", "--message"}} })

// isMessage tells whether args[i] is the value of one of name's messages.
func isMessage(name string, args []*string, i int) bool {
	return i > 0 && args[i-1] != nil && slices.Contains(messages()[name], *args[i-1])
}

// systemDirs hold the system's own programs: a command named by a path
// in one is the program of that name; any other path may be a file the
// agent wrote (./ls, tools/cat).
var systemDirs = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"/bin": true, "/usr/bin": true, "/sbin": true, "/usr/sbin": true}
})

// wrappers run another command given in their arguments (after options
// of their own that this does not try to read): each of their literal
// words not an option may begin that command, so each such tail is a
// command too, and the worst of them counts.
var wrappers = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"env": true, "sudo": true, "doas": true, "nohup": true, "time": true, "nice": true, "ionice": true,
		"timeout": true, "command": true, "exec": true, "builtin": true, "xargs": true, "stdbuf": true,
		"setsid": true, "chrt": true, "taskset": true, "watch": true, "strace": true, "ltrace": true,
		"unbuffer": true, "flock": true, "chroot": true, "su": true, "runuser": true, "parallel": true,
		"script": true, "firejail": true, "systemd-run": true, "caffeinate": true, "then": true, "do": true, "eval": true,
		"valgrind": true, "fakeroot": true, "chronic": true, "dbus-run-session": true, "ssh-agent": true, "ifne": true, "sem": true,
	}
})

// appending wrappers add words of their input to the command they run.
var appending = sync.OnceValue(func() map[string]bool { return map[string]bool{"xargs": true, "parallel": true} })

// maxDepth bounds scripts within scripts (sh -c "sh -c '...'").
const maxDepth = 8

// scan is the reading of one script: what it runs, and where.
type scan struct {
	out []ShellCommand
	// project is the directory, symbolic links resolved, whose files the
	// snapshot covers; relative paths are read from it.
	project string
	cds     int
	cd      bool
	// start is the absolute directory the script starts in when it is not
	// the project's ("": the project): relative paths are read from it.
	start string
	// cdDir is the one directory, inside, the script changes to: its
	// relative writes are judged from both.
	cdDir string
	// dotglob: the script may make globs match files that begin with a dot.
	dotglob bool
	// log is the effect log's file, symbolic links resolved ("": none).
	log string
	// links: the script makes a symbolic link, which does not exist yet
	// when it is read: where its other writes land is not known.
	links bool
}

// ShellCommands is every command script runs, nested ones included
// (substitutions, subshells, functions, pipelines, sh -c), in no promised
// order; a script that does not parse is one opaque command. Relative
// paths are read from project (the working directory when "").
func ShellCommands(script, project string) []ShellCommand {
	return ShellCommandsIn(script, project, "")
}

// ShellCommandsIn is ShellCommands for a script that starts in dir (an
// agent's shell keeps the directory it changed to between calls): its
// relative paths are read from dir, and judged against project.
func ShellCommandsIn(script, project, dir string) []ShellCommand {
	return shellCommands(script, where{project: project, dir: dir})
}

// where is what a call's paths are judged against: the project, the
// directory its script starts in, the effect log's file.
type where struct{ project, dir, log string }

// scanAt is a scan whose paths are judged at at.
func scanAt(at where) *scan {
	s := &scan{project: resolvedProject(at.project)}
	if at.dir != "" && filepath.IsAbs(at.dir) && filepath.Clean(at.dir) != filepath.Clean(at.project) {
		s.start = filepath.Clean(at.dir)
	}
	if at.log != "" {
		if abs, err := filepath.Abs(at.log); err == nil {
			s.log = resolved(abs)
		}
	}
	return s
}

func shellCommands(script string, at where) []ShellCommand {
	s := scanAt(at)
	s.dotglob = strings.Contains(script, "dotglob") || strings.Contains(script, "GLOBIGNORE")
	s.parseScript(script, 0)
	writers := 0
	for _, c := range s.out {
		if len(c.Writes) > 0 {
			writers++
		}
	}
	for i := range s.out {
		c := &s.out[i]
		c.Cd = s.cd
		if s.links && writers > 1 && len(c.Writes) > 0 {
			c.Outside = true // the link's own write and another: through it, maybe
		}
		for _, w := range c.Writes {
			outside, guarded := s.place(w)
			c.Outside = c.Outside || outside || s.cd
			c.Guarded = c.Guarded || guarded
		}
	}
	return s.out
}

func opaque(why string) ShellCommand { return ShellCommand{Opaque: why} }

func (s *scan) add(c ShellCommand) { s.out = append(s.out, c) }

func (s *scan) parseScript(script string, depth int) {
	if depth > maxDepth {
		s.add(opaque("scripts nested too deep"))
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(script), "")
	if err != nil {
		s.add(opaque("the script does not parse: " + err.Error()))
		return
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if a, ok := n.(*syntax.Assign); ok && holdsSubstitution(a) {
			s.add(opaque("a variable holds a command substitution, which arithmetic on it runs"))
		}
		if name, ok := arithmAssigned(n); ok { // ((PATH=1)), let PATH++, $((PATH+=1))
			empty := ""
			s.add(ShellCommand{Argv: []*string{}, Name: &empty, Assigns: []string{name}})
		}
		st, ok := n.(*syntax.Stmt)
		if !ok {
			return true // substitutions, process substitutions, functions: their statements come here in turn
		}
		var writes []*string
		for _, r := range st.Redirs {
			if w, ok := redirWrite(r); ok {
				writes = append(writes, w)
			}
		}
		switch cmd := st.Cmd.(type) {
		case *syntax.CallExpr:
			assigns := assignNames(cmd.Assigns)
			if len(cmd.Args) == 0 {
				if len(writes) > 0 || len(assigns) > 0 { // FOO=1 alone, > file alone
					empty := ""
					s.add(ShellCommand{Argv: []*string{}, Name: &empty, Assigns: assigns, Writes: writes})
				}
				return true
			}
			var argv []*string
			for _, w := range cmd.Args {
				argv = append(argv, braced(w)...)
			}
			s.command(argv, assigns, writes, depth)
		case *syntax.DeclClause: // export PATH=., declare, local, readonly
			variant := cmd.Variant.Value
			c := ShellCommand{Argv: []*string{&variant}, Name: &variant, Assigns: assignNames(cmd.Args), Writes: writes}
			if why := declRuns(variant, cmd.Args); why != "" {
				c.Name, c.Opaque = nil, why
			}
			s.add(c)
		default:
			if len(writes) > 0 { // { ...; } > file
				empty := ""
				s.add(ShellCommand{Argv: []*string{}, Name: &empty, Writes: writes})
			}
		}
		return true
	})
}

// arithmAssigned is the variable an arithmetic expression assigns
// (x=1, x+=1, x++), if n is one.
func arithmAssigned(n syntax.Node) (string, bool) {
	var x syntax.ArithmExpr
	switch a := n.(type) {
	case *syntax.BinaryArithm:
		if !strings.HasSuffix(a.Op.String(), "=") || slices.Contains([]string{"==", "!=", "<=", ">="}, a.Op.String()) {
			return "", false
		}
		x = a.X
	case *syntax.UnaryArithm:
		if a.Op != syntax.Inc && a.Op != syntax.Dec {
			return "", false
		}
		x = a.X
	default:
		return "", false
	}
	if w, ok := x.(*syntax.Word); ok {
		if v := literal(w); v != nil {
			return *v, true
		}
	}
	return "", true // a name not known: no rule can tell it from PATH
}

// declRuns says why what a declaration sets is not known: a nameref
// (declare -n r=PATH; r=. sets PATH), or a name or option given by an
// expansion; "" when it is.
func declRuns(variant string, args []*syntax.Assign) string {
	if variant == "nameref" {
		return "a nameref makes a name set another variable"
	}
	for _, a := range args {
		if !a.Naked || a.Name != nil {
			continue
		}
		v := literal(a.Value)
		switch {
		case v == nil:
			return variant + " of an expansion sets a variable the line does not name"
		case strings.HasPrefix(*v, "-") && strings.Contains(*v, "n") && variant != "export":
			return "a nameref makes a name set another variable"
		}
	}
	return ""
}

// holdsSubstitution tells whether a's value is text with a command
// substitution in it (x='a[$(git push)]'): $((x)), [[ $x -eq 1 ]] and
// declare -i evaluate it as arithmetic, which runs it.
func holdsSubstitution(a *syntax.Assign) bool {
	values := []*syntax.Word{a.Value}
	if a.Array != nil {
		for _, e := range a.Array.Elems {
			values = append(values, e.Value)
		}
	}
	for _, w := range values {
		if w == nil {
			continue
		}
		if v := literal(w); v != nil && (strings.Contains(*v, "$(") || strings.Contains(*v, "`")) {
			return true
		}
	}
	return false
}

func assignNames(assigns []*syntax.Assign) []string {
	var names []string
	for _, a := range assigns {
		if a.Name != nil {
			names = append(names, a.Name.Value)
		}
	}
	return names
}

// command adds the command argv (with the variables set for it and its
// redirections' writes) and what it runs in turn.
func (s *scan) command(argv []*string, assigns []string, writes []*string, depth int) {
	c := ShellCommand{Argv: argv, Assigns: assigns, Writes: writes}
	name := argv[0]
	if name == nil || strings.ContainsAny(*name, "*?[{~$`") {
		c.Opaque = "the command's name is not a literal"
		s.add(c)
		return
	}
	if strings.Contains(*name, "/") && !systemDirs()[path.Dir(*name)] {
		c.Opaque = "the command is named by a path, " + *name + ": what it runs is not known"
		s.add(c)
		return
	}
	base := path.Base(*name)
	c.Name = &base
	c.Opts, c.Words = operands(base, argv[1:])
	c.Assigns = append(slices.Clone(c.Assigns), assigned(base, argv[1:], c.Words)...)
	c.Writes = append(c.Writes, targets(base, argv[1:], c.Words)...)
	s.links = s.links || makesLinks(base, argv[1:])
	if why := runs(base, argv, c.Words); why != "" {
		c.Opaque = why
		c.Name = nil
	}
	s.add(c)
	switch {
	case base == "cd" || base == "pushd" || base == "popd":
		s.cds++
		if s.cds > 1 || len(c.Words) != 1 {
			s.cd = true
		} else if outside, _ := s.place(c.Words[0]); outside {
			s.cd = true
		} else if s.start != "" && !filepath.IsAbs(*c.Words[0]) {
			s.cdDir = s.start + "/" + *c.Words[0]
		} else {
			s.cdDir = *c.Words[0]
		}
	case wrappers()[base]:
		s.wrapped(base, argv, assigns, depth)
	case shells()[base]:
		s.shellArgs(argv, depth)
	case base == "find":
		for i := 1; i < len(argv); i++ {
			if w := argv[i]; w != nil && (*w == "-exec" || *w == "-execdir" || *w == "-ok" || *w == "-okdir") && i+1 < len(argv) {
				end := i + 1
				for end < len(argv) && (argv[end] == nil || *argv[end] != ";" && *argv[end] != "+") {
					end++
				}
				// {} is a file found below a start path: the command is
				// read with each start path for it (find .. -exec rm {}).
				for _, start := range findStarts(argv[1:]) {
					sub := slices.Clone(argv[i+1 : end])
					for k, word := range sub {
						if word != nil && strings.Contains(*word, "{}") {
							sub[k] = start
							if start != nil {
								v := strings.ReplaceAll(*word, "{}", *start)
								sub[k] = &v
							}
						}
					}
					s.command(sub, nil, nil, depth+1)
				}
			}
		}
	case base == "trap":
		// trap ACTION SIGNAL...: the action is a script run later.
		if len(c.Words) > 1 && (len(c.Opts) == 0 || c.Opts[0] == nil || *c.Opts[0] != "-p" && *c.Opts[0] != "-l") {
			if c.Words[0] == nil {
				s.add(opaque("trap of an expansion"))
			} else {
				s.parseScript(*c.Words[0], depth+1)
			}
		}
	case base == "python" || base == "python3" || base == "python2":
		// python -m MODULE ARGS is the command MODULE ARGS.
		for i := 1; i+1 < len(argv); i++ {
			if argv[i] != nil && *argv[i] == "-m" {
				s.command(argv[i+1:], assigns, nil, depth+1)
				break
			}
		}
	}
}

// assigned are the variables a builtin sets without an assignment word:
// read NAME..., mapfile/readarray NAME, getopts OPTS NAME, printf -v
// NAME. An option's value may be taken for a name: more names, never
// fewer; "" is a name not known.
func assigned(base string, args, words []*string) []string {
	var names []string
	name := func(w *string) {
		if w == nil {
			names = append(names, "")
		} else {
			names = append(names, *w)
		}
	}
	switch base {
	case "read", "mapfile", "readarray":
		for i, w := range args {
			if w != nil && *w == "-a" && i+1 < len(args) {
				name(args[i+1])
			}
		}
		for _, w := range words {
			name(w)
		}
	case "getopts":
		if len(words) > 1 {
			name(words[1])
		}
	case "printf":
		for i, w := range args {
			if w != nil && *w == "-v" && i+1 < len(args) {
				name(args[i+1])
			} else if w != nil && strings.HasPrefix(*w, "-v") && len(*w) > 2 {
				names = append(names, (*w)[2:])
			}
		}
	}
	return names
}

// findStarts are find's start paths: its words before the first that
// begins its expression (".": none given).
func findStarts(args []*string) []*string {
	var starts []*string
	for _, w := range args {
		if w != nil && (strings.HasPrefix(*w, "-") || *w == "(" || *w == "!") {
			break
		}
		starts = append(starts, w)
	}
	if len(starts) == 0 {
		here := "."
		starts = append(starts, &here)
	}
	return starts
}

// makesLinks tells whether the command makes symbolic links: ln -s,
// cp -s (an option not a literal may be either).
func makesLinks(base string, args []*string) bool {
	if base != "ln" && base != "cp" {
		return false
	}
	for _, w := range args {
		if w == nil || *w == "--symbolic" || *w == "--symbolic-link" ||
			strings.HasPrefix(*w, "-") && !strings.HasPrefix(*w, "--") && strings.Contains(*w, "s") {
			return true
		}
	}
	return false
}

// runs says why what the command runs is not known, or "".
func runs(base string, argv, words []*string) string {
	args := argv[1:]
	for i, w := range args {
		if isMessage(base, args, i) {
			continue
		}
		for _, opt := range programOptions()[base] {
			if w == nil || *w == opt || strings.HasPrefix(*w, opt) && (strings.HasPrefix(opt, "--") || len(opt) == 2) {
				return base + " runs a program its option " + opt + " names"
			}
		}
	}
	switch {
	case sourcing()[base]:
		return base + " runs a file's code in the shell"
	case base == "alias":
		for _, w := range args {
			if w == nil || strings.Contains(*w, "=") {
				return "an alias makes a name run what it says"
			}
		}
	case editors()[base]:
		return base + " runs the commands it is given"
	case multiplexers()[base] != nil:
		if len(args) == 0 || args[0] == nil || !slices.Contains(multiplexers()[base], *args[0]) {
			return base + " runs commands in a session of its own"
		}
	case base == "make" || base == "gmake":
		for i, w := range args {
			if w == nil || *w == "-E" || strings.HasPrefix(*w, "--eval") || strings.HasPrefix(*w, "-E") {
				return base + " runs a makefile given on its command line"
			}
			if (*w == "-f" || *w == "--file" || *w == "--makefile") && i+1 < len(args) && (args[i+1] == nil || stdinPath(*args[i+1])) ||
				strings.HasPrefix(*w, "-f") && len(*w) > 2 && stdinPath((*w)[2:]) {
				return base + " runs a makefile its input gives"
			}
			if v, ok := strings.CutPrefix(*w, "--file="); ok && stdinPath(v) {
				return base + " runs a makefile its input gives"
			}
		}
	case base == "sqlite3":
		if why := sqliteRuns(args, words); why != "" {
			return why
		}
	case base == "awk" || base == "gawk" || base == "mawk" || base == "nawk":
		for _, w := range args {
			if w == nil || *w == "-f" || strings.HasPrefix(*w, "--file") || strings.Contains(*w, "system") ||
				strings.Contains(*w, "|") || strings.Contains(*w, "@load") || awkPrintsToFile().MatchString(*w) {
				return base + " runs commands or writes files from its program"
			}
		}
	case base == "sed":
		if script, ok := sedScript(args, words); !ok || sedRuns(script) {
			return "sed runs commands or writes files from its script"
		}
	}
	if flags, ok := interpreters()[base]; ok {
		for _, w := range args {
			for _, flag := range flags {
				// -pe, -lne: short options run together.
				bundled := w != nil && len(flag) == 2 && len(*w) > 2 && strings.Trim((*w)[1:], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" &&
					(*w)[0] == '-' && strings.Contains((*w)[1:], flag[1:])
				if w == nil || *w == flag || strings.HasPrefix(*w, flag+"=") || bundled {
					return base + " runs code given on its command line"
				}
			}
		}
		if len(words) == 0 || words[0] == nil || *words[0] == "-" {
			for _, w := range args {
				if w != nil && (*w == "--version" || *w == "-V" || *w == "--help" || *w == "-h" || *w == "-m") {
					return ""
				}
			}
			return base + " runs the code its input gives"
		}
	}
	return ""
}

// stdinPath tells whether p names the process's input.
func stdinPath(p string) bool {
	return p == "-" || p == "/dev/stdin" || strings.HasPrefix(p, "/dev/fd/") || strings.HasPrefix(p, "/proc/self/fd/")
}

// sqliteReads are sqlite3's dot commands that only print or set how it
// prints; the others may run a command, read a script or write a file
// (.shell, .system, .once |CMD, .read, .import, .output, .backup, .load).
var sqliteReads = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, d := range []string{".tables", ".schema", ".fullschema", ".indexes", ".indices", ".databases", ".dump", ".headers", ".header",
		".mode", ".width", ".nullvalue", ".separator", ".show", ".help", ".timer", ".stats", ".eqp", ".changes", ".echo", ".bail", ".print", ".dbinfo", ".lint"} {
		m[d] = true
	}
	return m
})

// sqliteRuns says why what sqlite3 runs is not known: its dot commands
// (.shell, .system, .once |CMD, .load), load_extension, ATTACH (another
// database file), -init, or SQL read from its input; "" for SQL on its
// command line.
func sqliteRuns(args, words []*string) string {
	sql := slices.Clone(words)
	if len(sql) > 0 {
		sql = sql[1:] // the database
	}
	for i, w := range args {
		if w != nil && (*w == "-version" || *w == "--version" || *w == "-help" || *w == "--help") {
			return ""
		}
		if w != nil && (*w == "-cmd" || *w == "--cmd") && i+1 < len(args) {
			sql = append(sql, args[i+1])
		}
		if w != nil && (*w == "-init" || *w == "--init") {
			return "sqlite3 runs the commands of a file"
		}
	}
	if len(sql) == 0 {
		return "sqlite3 runs the commands its input gives"
	}
	for _, q := range sql {
		if q == nil {
			return "sqlite3 runs commands the line does not say"
		}
		lower := strings.ToLower(*q)
		if strings.Contains(lower, "load_extension") || strings.Contains(lower, "attach") || strings.Contains(lower, "writefile") || strings.Contains(lower, "edit(") {
			return "sqlite3 runs or writes what its SQL says"
		}
		if strings.Contains(lower, "vacuum") && strings.Contains(lower, "into") {
			return "sqlite3 runs or writes what its SQL says" // VACUUM INTO 'FILE'
		}
		for _, line := range strings.Split(*q, "\n") {
			line = strings.TrimSpace(line)
			if dot, _, _ := strings.Cut(line, " "); strings.HasPrefix(line, ".") && !sqliteReads()[dot] {
				return "sqlite3 runs its dot command " + dot
			}
		}
	}
	return ""
}

// awkPrintsToFile is an awk program's print or printf into a file.
var awkPrintsToFile = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`printf?[^;{}]*>`) })

// wrapped adds the commands a wrapper runs: each tail of its words that
// begins with one not an option; the variables it sets (env FOO=1 cmd)
// are set for them.
func (s *scan) wrapped(base string, argv []*string, assigns []string, depth int) {
	if base == "eval" {
		script, ok := joinLiteral(argv[1:], " ")
		if !ok {
			s.add(opaque("eval of an expansion"))
			return
		}
		s.parseScript(script, depth+1)
		return
	}
	assigns = slices.Clone(assigns)
	if appending()[base] {
		argv = replaced(base, argv)
	}
	for i := 1; i < len(argv); i++ {
		w := argv[i]
		switch {
		case w != nil && base == "env" && (*w == "-S" || *w == "--split-string" || strings.HasPrefix(*w, "-S") || strings.HasPrefix(*w, "--split-string=")):
			script := strings.TrimPrefix(strings.TrimPrefix(*w, "--split-string="), "-S")
			if *w == "-S" || *w == "--split-string" {
				if i+1 >= len(argv) || argv[i+1] == nil {
					s.add(opaque("env -S of an expansion"))
					return
				}
				script = *argv[i+1]
			}
			s.parseScript(script, depth+1)
			return
		case w != nil && base == "env" && (*w == "-C" || strings.HasPrefix(*w, "--chdir")):
			s.cd = true
		case w != nil && base == "command" && (*w == "-v" || *w == "-V"):
			return // it only says what a name is
		case w != nil && isAssignment(*w):
			name, _, _ := strings.Cut(*w, "=")
			assigns = append(assigns, name)
		case w == nil || !strings.HasPrefix(*w, "-"):
			tail := slices.Clone(argv[i:])
			if appending()[base] {
				tail = append(tail, nil) // what its input adds
			}
			if w != nil && strings.ContainsAny(*w, " \t\n;&|<>()$`'\"") {
				// A command line in one word (watch 'git push', script -c
				// CMD, su -c CMD): a shell runs it.
				if script, ok := joinLiteral(tail, " "); ok {
					s.parseScript(script, depth+1)
					continue
				}
				s.parseScript(*w, depth+1) // parallel ::: 'git push': the word alone

			}
			s.command(tail, assigns, nil, depth+1)
		}
	}
}

// replaced is an xargs's or parallel's argv with the words its input
// replaces (xargs -I R ... R, parallel's {}) unknown (nil): they may be
// any command's words.
func replaced(base string, argv []*string) []*string {
	argv = slices.Clone(argv)
	var marks []string
	if base == "parallel" {
		marks = append(marks, "{")
	}
	values := map[int]bool{}
	for i, w := range argv {
		switch {
		case w == nil:
		case (*w == "-I" || *w == "--replace") && i+1 < len(argv) && argv[i+1] != nil:
			marks = append(marks, *argv[i+1])
			values[i+1] = true
		case *w == "-i" || *w == "--replace":
			marks = append(marks, "{}")
		case strings.HasPrefix(*w, "-I") && len(*w) > 2:
			marks = append(marks, (*w)[2:])
		case strings.HasPrefix(*w, "--replace=") || strings.HasPrefix(*w, "-i") && len(*w) > 2:
			marks = append(marks, strings.TrimPrefix(strings.TrimPrefix(*w, "--replace="), "-i"))
		}
	}
	for i, w := range argv {
		if i > 0 && !values[i] && w != nil && slices.ContainsFunc(marks, func(m string) bool { return m != "" && strings.Contains(*w, m) }) {
			argv[i] = nil
		}
	}
	return argv
}

// shellArgs reads a shell's arguments: a -c script is parsed in turn; a
// shell with none runs a file or its input, which is not seen here.
func (s *scan) shellArgs(argv []*string, depth int) {
	for i := 1; i < len(argv); i++ {
		w := argv[i]
		if w == nil {
			s.add(opaque("a shell given an expansion"))
			return
		}
		if strings.HasPrefix(*w, "-") && !strings.HasPrefix(*w, "--") && strings.Contains(*w, "c") {
			if i+1 >= len(argv) || argv[i+1] == nil {
				s.add(opaque("a shell's -c script is not a literal"))
				return
			}
			s.parseScript(*argv[i+1], depth+1)
			return
		}
		if !strings.HasPrefix(*w, "-") {
			s.add(opaque("a shell runs the script " + *w))
			return
		}
	}
	s.add(opaque("a shell runs the script its input gives"))
}

// operands splits a command's arguments: the options before its first
// operand (with the values of those valued[name] says take one), and the
// operands, every later word not an option (all of them after --).
func operands(name string, args []*string) (opts, words []*string) {
	opts, words = []*string{}, []*string{}
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if w == nil || !strings.HasPrefix(*w, "-") || *w == "-" {
			break
		}
		opts = append(opts, w)
		if *w == "--" {
			i++
			break
		}
		if slices.Contains(valued()[name], *w) && i+1 < len(args) {
			i++
			opts = append(opts, args[i])
		}
	}
	ended := i > 0 && args[i-1] != nil && *args[i-1] == "--"
	for ; i < len(args); i++ {
		w := args[i]
		if !ended && w != nil && *w == "--" {
			ended = true
			continue
		}
		if isMessage(name, args, i) {
			continue
		}
		if ended || w == nil || !strings.HasPrefix(*w, "-") || *w == "-" {
			words = append(words, w)
		}
	}
	return opts, words
}

// targets are the files a command known to write names in its
// arguments: all its operands for those that change each (rm, touch,
// tee), the last for a copy, the files of sed -i, uniq's output, sort -o.
// An option's value is taken for an operand: more files, never fewer.
func targets(name string, args, words []*string) []*string {
	switch name {
	case "tee", "touch", "mkdir", "rm", "rmdir", "shred", "unlink", "truncate", "mv", "chmod", "chgrp", "chown", "mkfifo", "mknod", "patch":
		return words
	case "cp", "install", "ln", "rsync", "scp":
		for i, w := range args {
			if w != nil && (*w == "-t" || *w == "--target-directory") && i+1 < len(args) {
				return []*string{args[i+1]}
			}
			if w != nil && strings.HasPrefix(*w, "--target-directory=") {
				v := strings.TrimPrefix(*w, "--target-directory=")
				return []*string{&v}
			}
		}
		if len(words) > 0 {
			return words[len(words)-1:]
		}
	case "sqlite3":
		if len(words) > 0 {
			return words[:1] // the database
		}
	case "uniq", "xxd":
		if len(words) > 1 {
			return words[1:]
		}
	case "sed":
		for _, w := range args {
			if w == nil || *w == "--in-place" || strings.HasPrefix(*w, "--in-place=") ||
				strings.HasPrefix(*w, "-") && !strings.HasPrefix(*w, "--") && strings.Contains(*w, "i") {
				if _, given := sedExpressions(args); given || len(words) == 0 {
					return words
				}
				return words[1:] // the first is the script
			}
		}
	case "find":
		for _, w := range args {
			if w != nil && slices.Contains([]string{"-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}, *w) {
				return words
			}
		}
	case "sort", "git", "curl", "wget", "tree", "go", "gcc", "cc", "clang", "g++", "c++", "clang++", "rustc", "ld",
		"npm", "pnpm", "yarn", "pip", "pip3", "ssh-keygen", "csplit", "unzip":
		var out []*string
		if name == "git" && len(words) > 2 && words[0] != nil && words[1] != nil &&
			(*words[0] == "clone" || *words[0] == "worktree" && *words[1] == "add" || *words[0] == "bundle" && *words[1] == "create") {
			out = append(out, words[2]) // the new directory, the bundle
		}
		if name == "git" && len(words) > 0 && words[0] != nil && (*words[0] == "format-patch" || *words[0] == "archive") {
			for i, w := range args {
				if w != nil && *w == "-o" && i+1 < len(args) {
					out = append(out, args[i+1]) // -o is another option's elsewhere (ls-files, grep)
				}
			}
		}
		for i, w := range args {
			for _, opt := range outputOptions()[name] {
				switch {
				case w == nil:
				case *w == opt && i+1 < len(args):
					out = append(out, args[i+1])
				case strings.HasPrefix(*w, opt+"="):
					v := strings.TrimPrefix(*w, opt+"=")
					out = append(out, &v)
				case len(opt) == 2 && strings.HasPrefix(*w, opt) && len(*w) > 2:
					v := (*w)[2:]
					out = append(out, &v)
				}
			}
		}
		return append(out, defaultOutputs(name, args, words, len(out) > 0)...)
	case "tar":
		return tarWrites(args)
	case "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzstd", "lz4", "lzma", "unlzma", "compress", "uncompress":
		for _, w := range args {
			if w != nil && (*w == "--stdout" || *w == "--to-stdout" || *w == "--test" || *w == "--list" ||
				strings.HasPrefix(*w, "-") && !strings.HasPrefix(*w, "--") && strings.ContainsAny(*w, "ctl")) {
				return nil // to the output, or reading
			}
		}
		return words // each is replaced
	case "zip":
		if len(words) > 0 {
			return words[:1] // the archive
		}
	case "split":
		if len(words) > 1 {
			return words[1:] // the prefix (an option's value may come first)
		}
		x := "x"
		return []*string{&x}
	case "venv", "virtualenv":
		return words
	case "setfacl", "chattr":
		return words
	case "dd":
		var out []*string
		for _, w := range args {
			if w == nil {
				out = append(out, nil)
			} else if v, ok := strings.CutPrefix(*w, "of="); ok {
				out = append(out, &v)
			}
		}
		return out
	}
	return nil
}

// outputOptions are the options whose value is a file or directory a
// command writes.
var outputOptions = sync.OnceValue(func() map[string][]string {
	compiler := []string{"-o"}
	return map[string][]string{
		"sort": {"-o", "--output"}, "git": {"--output", "--output-directory"}, "curl": {"-o", "--output"},
		"wget": {"-O", "--output-document", "-o", "--output-file", "-P", "--directory-prefix"}, "tree": {"-o"},
		"go": compiler, "gcc": compiler, "cc": compiler, "clang": compiler, "g++": compiler, "c++": compiler, "clang++": compiler,
		"rustc": {"-o", "--out-dir"}, "ld": compiler,
		"npm": {"--prefix"}, "pnpm": {"--dir", "-C"}, "yarn": {"--cwd"},
		"pip": {"-t", "--target", "--prefix", "--root", "--src"}, "pip3": {"-t", "--target", "--prefix", "--root", "--src"},
		"ssh-keygen": {"-f"}, "csplit": {"-f", "--prefix"}, "unzip": {"-d"},
	}
})

// defaultOutputs are where a command writes when no option says
// (given: one did): unzip and csplit into the directory, ssh-keygen a
// key under ~/.ssh, pip install/uninstall into the active virtual
// environment ($VIRTUAL_ENV or $CONDA_PREFIX in the environment the
// classifier runs in), else into the system's site-packages (not known).
func defaultOutputs(name string, args, words []*string, given bool) []*string {
	here, home := ".", "~"
	switch {
	case given:
	case name == "unzip" || name == "csplit":
		return []*string{&here}
	case name == "ssh-keygen":
		for _, w := range args {
			if w != nil && slices.Contains([]string{"-l", "-y", "-F", "-Q", "-Y", "-L", "-B", "-D"}, *w) {
				return nil // reading
			}
		}
		return []*string{&home}
	case (name == "pip" || name == "pip3") && len(words) > 0 && words[0] != nil && (*words[0] == "install" || *words[0] == "uninstall"):
		for _, w := range args {
			if w != nil && *w == "--user" {
				return []*string{&home}
			}
		}
		for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
			if dir := os.Getenv(env); dir != "" {
				return []*string{&dir}
			}
		}
		return []*string{nil} // the system's site-packages
	}
	return nil
}

// tarWrites are the files tar writes: the directory it extracts into
// (-C DIR, else the working directory), the archive it creates or
// changes (-f FILE with c, r, u; A).
func tarWrites(args []*string) []*string {
	var out []*string
	extract, create, dirGiven := false, false, false
	dir, file := (*string)(nil), (*string)(nil)
	for i, w := range args {
		if w == nil {
			continue
		}
		next := func() *string {
			if i+1 < len(args) {
				return args[i+1]
			}
			return nil
		}
		switch {
		case *w == "--extract" || *w == "--get":
			extract = true
		case *w == "--absolute-names":
			out = append(out, nil) // the archive's own paths: anywhere
		case *w == "--create" || *w == "--append" || *w == "--update" || *w == "--concatenate" || *w == "--delete":
			create = true
		case *w == "--directory":
			dir, dirGiven = next(), true
		case strings.HasPrefix(*w, "--directory="):
			v := strings.TrimPrefix(*w, "--directory=")
			dir, dirGiven = &v, true
		case *w == "--file":
			file = next()
		case strings.HasPrefix(*w, "--file="):
			v := strings.TrimPrefix(*w, "--file=")
			file = &v
		case strings.HasPrefix(*w, "--"):
		case strings.HasPrefix(*w, "-") || i == 0: // -xzf, or xzf as the first word
			letters := strings.TrimPrefix(*w, "-")
			extract = extract || strings.Contains(letters, "x")
			if strings.Contains(letters, "P") {
				out = append(out, nil) // -P: the archive's own paths, anywhere
			}
			create = create || strings.ContainsAny(letters, "cruA")
			if strings.Contains(letters, "C") {
				dir, dirGiven = next(), true
				if k := strings.IndexByte(letters, 'C'); k < len(letters)-1 {
					v := letters[k+1:]
					dir = &v
				}
			}
			if strings.Contains(letters, "f") {
				file = next()
				if k := strings.IndexByte(letters, 'f'); k < len(letters)-1 && !strings.Contains(letters[:k], "C") {
					v := letters[k+1:]
					file = &v
				}
			}
		}
	}
	if extract {
		if !dirGiven {
			here := "."
			dir = &here
		}
		out = append(out, dir)
	}
	if create && file != nil && *file != "-" {
		out = append(out, file)
	}
	return out
}

// sedExpressions are sed's scripts given with -e or --expression, and
// whether there are any (else its first operand is the script); a script
// read from a file (-f) or not a literal is one unknown (nil).
func sedExpressions(args []*string) ([]*string, bool) {
	var out []*string
	given := false
	for i, w := range args {
		switch {
		case w == nil:
		case *w == "-e" || *w == "--expression" || *w == "-f" || *w == "--file":
			given = true
			if i+1 < len(args) && (*w == "-e" || *w == "--expression") {
				out = append(out, args[i+1])
			} else {
				out = append(out, nil)
			}
		case strings.HasPrefix(*w, "--expression="):
			given = true
			v := strings.TrimPrefix(*w, "--expression=")
			out = append(out, &v)
		case strings.HasPrefix(*w, "-") && !strings.HasPrefix(*w, "--") && !strings.HasPrefix(*w, "-i") && strings.ContainsAny(*w, "ef"):
			// -ne SCRIPT; what else gives a script is not read (nil).
			given = true
			if strings.HasSuffix(*w, "e") && !strings.Contains(*w, "f") && i+1 < len(args) {
				out = append(out, args[i+1])
			} else {
				out = append(out, nil)
			}
		case strings.HasPrefix(*w, "--file="):
			given = true
			out = append(out, nil)
		}
	}
	return out, given
}

// sedScript is the whole of sed's script; false when some of it is not
// known.
func sedScript(args, words []*string) (string, bool) {
	exprs, given := sedExpressions(args)
	if !given {
		if len(words) == 0 {
			return "", true
		}
		exprs = words[:1]
	}
	return joinLiteral(exprs, "\n")
}

// sedRuns tells whether a sed script may run a command (e, s///e) or
// write a file (w, W, s///w); what it cannot read counts as both.
func sedRuns(script string) bool {
	i, n := 0, len(script)
	// delimited skips a /re/-like part begun at i (the delimiter), and
	// tells whether it ended.
	delimited := func() bool {
		d := script[i]
		for i++; i < n; i++ {
			if script[i] == '\\' {
				i++
				continue
			}
			if script[i] == d {
				i++
				return true
			}
			if script[i] == '\n' {
				return false
			}
		}
		return false
	}
	toLineEnd := func() {
		for i < n && script[i] != '\n' {
			i++
		}
	}
	for i < n {
		ch := script[i]
		switch {
		case strings.IndexByte(" \t\n;{}!,0123456789$~+", ch) >= 0:
			i++
		case ch == '/':
			if !delimited() {
				return true
			}
		case ch == '\\':
			i++
			if i >= n || !delimited() {
				return true
			}
		case ch == 's' || ch == 'y':
			i++
			if i >= n || script[i] == '\n' || script[i] == '\\' {
				return true
			}
			d := script[i]
			if !delimited() {
				return true
			}
			i-- // the delimiter ending the first part begins the second
			if script[i] != d || !delimited() {
				return true
			}
			// Its flags: e and w are read as the commands they are, next.
			for ch == 's' && i < n && strings.IndexByte("gpiImM0123456789", script[i]) >= 0 {
				i++
			}
		case ch == 'a' || ch == 'i' || ch == 'c' || ch == ':' || ch == 'b' || ch == 't' || ch == 'T' || ch == 'r' || ch == 'R' || ch == '#':
			toLineEnd() // text, a label or a file read: to the end of the line
		case strings.IndexByte("dDgGhHlnNpPqQxz=F", ch) >= 0:
			i++
		default: // e, w, W, v, and what is not sed
			return true
		}
	}
	return false
}

// resolvedProject is project (the working directory when ""), absolute,
// its symbolic links resolved.
func resolvedProject(project string) string {
	abs, err := filepath.Abs(project)
	if err != nil {
		return ""
	}
	return resolved(abs)
}

// resolved is the absolute path p as the system finds it: each
// symbolic link of the part of it that exists followed (a dangling one
// too: a write creates its target), .. taken after them; "" when that
// cannot be told (a loop).
func resolved(p string) string { return resolvedFrom(p, 0) }

func resolvedFrom(p string, links int) string {
	parts := strings.Split(p, string(filepath.Separator))
	at := string(filepath.Separator)
	for i, part := range parts {
		switch part {
		case "", ".":
			continue
		case "..":
			at = filepath.Dir(at)
			continue
		}
		next := filepath.Join(at, part)
		fi, err := os.Lstat(next)
		if err != nil { // the rest does not exist: no link in it
			return filepath.Join(append([]string{next}, parts[i+1:]...)...)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			at = next
			continue
		}
		target, err := os.Readlink(next)
		if err != nil || links > 40 {
			return ""
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(at, target)
		}
		if at = resolvedFrom(target, links+1); at == "" {
			return ""
		}
	}
	return at
}

// guardedPaths are, inside the project, the agent's and undolog's own
// configuration (the hook's settings and policy) and git's (a hook, or
// core.fsmonitor, runs at the next git status): a write there arms what
// runs later.
var guardedPaths = []string{".claude", ".git/config", ".git/hooks", ".git/info/attributes", ".gitattributes", ".mcp.json"}

// place tells whether the file w names (read from the project, and from
// the directory the script changes to) is outside the project, /tmp
// aside, and whether it is a guarded one.
func (s *scan) place(w *string) (outside, guarded bool) {
	outside, guarded = s.placeFrom(w, s.start)
	if s.cdDir != "" && w != nil && !filepath.IsAbs(*w) {
		o, g := s.placeFrom(w, s.cdDir)
		outside, guarded = outside || o, guarded || g
	}
	return outside, guarded
}

// placeFrom is place with w read from dir, relative to the project. A
// glob is read as the directory before it.
func (s *scan) placeFrom(w *string, dir string) (outside, guarded bool) {
	real, guarded := s.realFrom(w, dir)
	if real == "" {
		return true, false
	}
	rel, ok := s.inProject(real)
	if !ok {
		// Below /tmp is scratch, but not a directory the project is in
		// (a project under /tmp: rm -rf ..).
		tmp := resolved("/tmp")
		scratch := strings.HasPrefix(real, tmp+"/") && !strings.HasPrefix(s.project, real+"/")
		return !scratch, guarded
	}
	lower := strings.ToLower(filepath.ToSlash(rel)) // a case-insensitive file system finds .CLAUDE too
	for _, g := range guardedPaths {
		// In it, it, or a directory it is in (cp -r x/. .git/), the
		// project itself aside.
		if lower == g || strings.HasPrefix(lower, g+"/") || lower != "." && strings.HasPrefix(g, lower+"/") {
			return false, true
		}
	}
	return false, guarded
}

// realFrom is the file w names, read from dir (relative to the project),
// its symbolic links followed; "" when that is not known (no literal, a
// ~ path, no project). A glob is read as the directory before it, and
// guarded says whether it may match a guarded path. The log, a file
// beside it whose name begins with its name (its journal) and a
// directory it is in are guarded wherever they are.
func (s *scan) realFrom(w *string, dir string) (real string, guarded bool) {
	if w == nil || s.project == "" || strings.HasPrefix(*w, "~") {
		return "", false
	}
	p := *w
	if dir != "" && !filepath.IsAbs(p) {
		p = dir + "/" + p
	}
	if i := strings.IndexAny(p, "*?["); i >= 0 {
		guarded = s.mayMatchGuarded(p)
		p = p[:strings.LastIndexByte(p[:i], '/')+1]
	}
	if !filepath.IsAbs(p) {
		p = s.project + string(filepath.Separator) + p // not Join: it would take link/.. away before the link is followed
	}
	real = resolved(p)
	if real != "" && s.log != "" && (strings.HasPrefix(real, s.log) || strings.HasPrefix(s.log, real+"/")) {
		guarded = true
	}
	return real, guarded
}

// inProject is real relative to the project, and whether it is in it.
func (s *scan) inProject(real string) (string, bool) {
	rel, err := filepath.Rel(s.project, real)
	return rel, err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// mayMatchGuarded tells whether the glob pattern (a write's file) may
// name a guarded path or a directory it is in: .cl*/settings.json, .g?t/.
// Files beginning with a dot are matched only by a pattern beginning with
// one, unless the script sets dotglob or GLOBIGNORE.
func (s *scan) mayMatchGuarded(pattern string) bool {
	if filepath.IsAbs(pattern) {
		rel, ok := strings.CutPrefix(pattern, s.project+"/")
		if !ok {
			return false // outside: judged so
		}
		pattern = rel
	}
	parts := strings.Split(strings.ToLower(strings.TrimPrefix(pattern, "./")), "/")
	if slices.Contains(parts, "..") {
		return true
	}
	for _, g := range guardedPaths {
		gparts := strings.Split(g, "/")
		all := true
		for k := 0; k < len(parts) && k < len(gparts) && all; k++ {
			ok, err := path.Match(parts[k], gparts[k])
			hidden := strings.HasPrefix(gparts[k], ".") && !strings.HasPrefix(parts[k], ".") && !s.dotglob
			all = err != nil || ok && !hidden
		}
		if all {
			return true
		}
	}
	return false
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

// joinLiteral is words joined by sep; false when one is not a literal.
func joinLiteral(words []*string, sep string) (string, bool) {
	parts := make([]string, len(words))
	for i, w := range words {
		if w == nil {
			return "", false
		}
		parts[i] = *w
	}
	return strings.Join(parts, sep), true
}

// braced are the words w stands for once its braces are expanded
// (src/{a,b}: src/a src/b), as literals; one unknown word when they are
// too many.
func braced(w *syntax.Word) []*string {
	var words []*string
	split := &syntax.Word{Parts: slices.Clone(w.Parts)} // the walk still to come reads the script's own words
	syntax.SplitBraces(split)
	for bw, err := range expand.BracesSeq(nil, split) {
		if err != nil || len(words) >= 1000 {
			return []*string{nil}
		}
		words = append(words, literal(bw))
	}
	if len(words) == 0 {
		return []*string{nil}
	}
	return words
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
	targets := braced(r.Word)
	target := targets[0]
	if len(targets) > 1 || target == nil { // > {a,b} is an error, but not read here
		return nil, true
	}
	if r.Op == syntax.DplOut && (*target == "-" || strings.Trim(*target, "0123456789") == "") {
		return nil, false // >&2: a descriptor
	}
	if *target == "/dev/null" || *target == "/dev/stdout" || *target == "/dev/stderr" || strings.HasPrefix(*target, "/dev/fd/") {
		return nil, false
	}
	return target, true
}

// pathFacts is args with path_guarded and path_outside added: whether
// the file args' field names (read from dir, else the project) is
// guarded, and whether it is outside the project, its symbolic links
// followed one by one as a shell's writes are.
func pathFacts(args json.RawMessage, field string, at where) (json.RawMessage, error) {
	var fields map[string]any
	if err := json.Unmarshal(args, &fields); err != nil {
		return nil, err
	}
	s := scanAt(at)
	guarded, outside := true, true // not a string: not known
	if p, ok := fields[field].(string); ok {
		_, guarded = s.placeFrom(&p, s.start)
		// Unlike a shell's, a file tool's write to /tmp counts: Claude Code
		// asks before one, and the hook's allow would skip that.
		real, _ := s.realFrom(&p, s.start)
		_, in := s.inProject(real)
		outside = real == "" || !in
	}
	fields["path_guarded"] = guarded
	fields["path_outside"] = outside
	return json.Marshal(fields)
}

// shellTier is the highest tier the rule's cases give the commands of the
// script in args' field r.Shell, and why, naming the command that gave it.
func (r *Rule) shellTier(args json.RawMessage, at where) (sm.Tier, string, error) {
	var fields map[string]any
	if err := json.Unmarshal(args, &fields); err != nil {
		return "", "", err
	}
	script, ok := fields[r.Shell].(string)
	commands := []ShellCommand{opaque(r.Shell + " is not a string")}
	if ok {
		commands = shellCommands(script, at)
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
				if len(c.Argv) == 0 && len(c.Assigns) > 0 {
					what = "`" + strings.Join(c.Assigns, "=... ") + "=...`"
				}
				if len(c.Writes) > 0 {
					what += " writing " + shownArgv(c.Writes)
				}
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
