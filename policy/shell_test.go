package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	sm "github.com/undolog/undolog/statemachine"
)

// shell: asks the tier cases of each command of the script, and the worst
// counts; it is only for tier cases.
func TestShellRuleTakesTheWorstCommand(t *testing.T) {
	p, err := ParsePolicy([]byte(`
tools:
  run:
    shell: script
    tier:
      - {when: '.args.name == null', tier: irreversible}
      - {when: '.args.name == "deploy"', tier: irreversible}
      - {when: '.args.name == "ls"', tier: safe}
      - {tier: compensable}
`))
	if err != nil {
		t.Fatal(err)
	}
	for script, want := range map[string]sm.Tier{"ls": sm.Safe, "ls | ls": sm.Safe, "ls; touch x": sm.Compensable,
		"ls; touch x && deploy": sm.Irreversible, "ls $(deploy)": sm.Irreversible, "$X": sm.Irreversible, "ls (": sm.Irreversible} {
		args, _ := json.Marshal(map[string]string{"script": script})
		cls, err := p.Classify("run", nil).ForArgs(args)
		if err != nil || cls.Tier != want {
			t.Errorf("%q: %s %v, want %s", script, cls.Tier, err, want)
		}
	}
	if cls, err := p.Classify("run", nil).ForArgs(json.RawMessage(`{"script":7}`)); err != nil || cls.Tier != sm.Irreversible {
		t.Errorf("a script not a string: %s %v, want irreversible", cls.Tier, err)
	}
	if _, err := ParsePolicy([]byte("tools:\n  run: {shell: script, tier: safe}\n")); !errors.Is(err, ErrPolicy) {
		t.Errorf("shell without tier cases: %v, want ErrPolicy", err)
	}
}

// The facts a shell rule's cases see of each command.
func TestShellCommandFacts(t *testing.T) {
	first := func(script string) ShellCommand {
		cs := ShellCommands(script, t.TempDir())
		if len(cs) == 0 {
			t.Fatalf("%q: no command", script)
		}
		return cs[0]
	}
	// Options before the first operand, with the values of git's global
	// ones: words[0] is the subcommand; -m's text is neither.
	c := first(`git -C sub -c x=y commit -m "$(date)" -a file`)
	if fmt.Sprint(deref(c.Opts)) != "[-C sub -c x=y]" || fmt.Sprint(deref(c.Words)) != "[commit file]" {
		t.Errorf("git: opts %v words %v", deref(c.Opts), deref(c.Words))
	}
	// Variables set by the line, by env, by export; a bare assignment.
	if c := first("A=1 B=2 ls"); !slices.Equal(c.Assigns, []string{"A", "B"}) {
		t.Errorf("assigns %v", c.Assigns)
	}
	cs := ShellCommands("env -i C=3 cat x", t.TempDir()) // env, cat x, and x: each word may begin the command
	if len(cs) != 3 || *cs[1].Name != "cat" || !slices.Equal(cs[1].Assigns, []string{"C"}) {
		t.Errorf("env: %+v", cs)
	}
	if c := first("export PATH=.:$PATH"); *c.Name != "export" || !slices.Equal(c.Assigns, []string{"PATH"}) {
		t.Errorf("export: %+v", c)
	}
	// Writes named by operands.
	for script, want := range map[string]string{"cp a b c": "[c]", "cp -t d a b": "[d]", "mv a b": "[a b]", "tee -a x y": "[x y]",
		"sed -i s/a/b/ f g": "[f g]", "sed -i -e s/a/b/ f": "[s/a/b/ f]", "uniq a b": "[b]", "sort -o out in": "[out]", "sort -oout in": "[out]",
		"curl -o x https://h": "[x]", "dd if=a of=b": "[b]", "cat a b": "[]", "sed s/a/b/ f": "[]"} {
		if got := fmt.Sprint(deref(first(script).Writes)); got != want {
			t.Errorf("%q writes %s, want %s", script, got, want)
		}
	}
	if c := first("cp a $X"); len(c.Writes) != 1 || c.Writes[0] != nil || !c.Outside {
		t.Errorf("a write to an expansion: %+v, want null and outside", c)
	}
}

func deref(ws []*string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = "$..."
		if w != nil {
			out[i] = *w
		}
	}
	return out
}

// sedRuns: a sed script that runs a command or writes a file, or is not
// read, is told from one that only edits its stream.
func TestSedScriptsThatRunOrWrite(t *testing.T) {
	for script, runs := range map[string]bool{
		"s/a/b/": false, "s/a/b/g": false, "s|/x|/y|2p": false, "/foo/d": false, "1,5p;$d": false, "y/abc/xyz/": false,
		`s/a\/b/c/`: false, "/x/{s/a/b/;p}": false, "$a\\\ntext": false, "/start/,/end/!d": false, ":a;N;$!ba;s/\\n/ /g": false,
		"1e id": true, "s/x/id/e": true, "w out": true, "s/a/b/w out": true, "s/a/b/gw out": true, "W out": true, "/x/e": true,
		"s/a/b": true, "v": true, "/unterminated": true,
	} {
		if got := sedRuns(script); got != runs {
			t.Errorf("sedRuns(%q) = %v, want %v", script, got, runs)
		}
	}
}

// path: FIELD gives the tier cases .args.path_guarded: the file, its
// symbolic links followed as a shell's writes are, is guarded (a link
// made earlier to .claude/ is .claude/); it is for tier cases only.
func TestPathRuleFollowsLinks(t *testing.T) {
	project := t.TempDir()
	if err := os.Symlink(".claude", filepath.Join(project, "cl")); err != nil {
		t.Fatal(err)
	}
	p, err := ParsePolicy([]byte(`
tools:
  write:
    path: file
    tier:
      - {when: .args.path_guarded, tier: irreversible}
      - {tier: compensable}
`))
	if err != nil {
		t.Fatal(err)
	}
	p.Project = project
	for file, want := range map[string]sm.Tier{"cl/x": sm.Irreversible, project + "/cl/x": sm.Irreversible, ".claude/x": sm.Irreversible,
		"src/x.go": sm.Compensable, project + "/src/x.go": sm.Compensable} {
		args, _ := json.Marshal(map[string]string{"file": file})
		cls, err := p.Classify("write", nil).ForArgs(args)
		if err != nil || cls.Tier != want {
			t.Errorf("%q: %s %v, want %s", file, cls.Tier, err, want)
		}
	}
	if cls, err := p.Classify("write", nil).ForArgs(json.RawMessage(`{"file":7}`)); err != nil || cls.Tier != sm.Irreversible {
		t.Errorf("a path not a string: %s %v, want irreversible", cls.Tier, err)
	}
	for _, bad := range []string{"tools:\n  w: {path: file, tier: safe}\n", "tools:\n  w: {path: file, shell: c, tier: [{tier: safe}]}\n"} {
		if _, err := ParsePolicy([]byte(bad)); !errors.Is(err, ErrPolicy) {
			t.Errorf("%q: %v, want ErrPolicy", bad, err)
		}
	}
}
