package cmd

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A process builds only the top-level command its arguments name
// (commandFor): every command line answers as it would with the whole tree
// built, on both streams and in its exit code.
func TestOneCommandAnswersAsTheWholeTree(t *testing.T) {
	// Each way has a log of its own (LOG), and its folder reads DIR.
	dirs := map[bool]string{false: t.TempDir(), true: t.TempDir()}
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	run := func(line []string, whole bool) (string, int) {
		dir := dirs[whole]
		args := make([]string, len(line))
		for i, a := range line {
			args[i] = strings.ReplaceAll(a, "LOG", filepath.Join(dir, "u.db"))
		}
		var out bytes.Buffer
		env := map[string]string{"HOME": dir, "UNDOLOG_ACTOR": "tester"}
		f := &Factory{In: strings.NewReader(""), Out: &out, ErrOut: &out, Getenv: func(k string) string { return env[k] }, Now: func() time.Time { return now }}
		root := newRootCmd(f, commandFor(args))
		if whole {
			root = NewRootCmd(f)
		}
		code := execute(context.Background(), f, root, args)
		return strings.ReplaceAll(out.String(), dir, "DIR"), code
	}
	for _, line := range []string{
		"version", "version -o json", "--version", "--log LOG version", "--log=LOG --lock-timeout 1s version -o jsonl",
		"--lock-timeout=2s session start s1", "--log LOG session start s2", "--log LOG session list",
		"intercept --help", "--log LOG intercept", "-h", "help", "help intercept", "session", "session strat",
		"sesion list", "approve", "approve abc", "--log LOG approve 99", "undo --help", "list --bogus",
		"--log", "--log LOG", "--bogus version", "version extra", "-- version", "man --help", "completion --help",
		"__complete ap", "__complete --log LOG session show ''", "man", "--log LOG man", "completion bash",
	} {
		args := strings.Fields(line)
		for i, a := range args {
			if a == "''" {
				args[i] = ""
			}
		}
		want, wantCode := run(args, true)
		got, code := run(args, false)
		if got != want || code != wantCode {
			t.Errorf("undolog %s: built alone it answers (exit %d)\n%s\nwith every command built (exit %d)\n%s", line, code, got, wantCode, want)
		}
	}
	if commandFor([]string{"--log", "x", "intercept"}) == nil || commandFor([]string{"man"}) != nil || commandFor([]string{"help", "man"}) != nil {
		t.Fatal("commandFor: intercept after --log must be built alone; man and help need every command")
	}
}

// A command line that names no command (a misspelt subcommand, a help topic
// that does not exist) is a usage error on one line, exit 2, with cobra's
// suggestion when it has one: a script's `undolog session fial "$RUN"` must
// not seem to have worked. A group named alone still shows its help.
func TestStrayNamesAreUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for line, want := range map[string]string{
		"session complet s":  `unknown command "complet" for "undolog session"; did you mean complete?`,
		"session fial s":     `unknown command "fial" for "undolog session"; did you mean fail?`,
		"policy chek p.yaml": `unknown command "chek" for "undolog policy"; did you mean check?`,
		"completion bsh":     `unknown command "bsh" for "undolog completion"; did you mean bash`,
		"help nosuch":        `unknown help topic "nosuch"`,
		"help session nosuc": `unknown help topic "session nosuc"`,
		"aprove 1":           `unknown command "aprove" for "undolog"; did you mean approve?`,
	} {
		var out, errOut bytes.Buffer
		f := &Factory{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Getenv: func(k string) string {
			return map[string]string{"HOME": dir}[k]
		}, Now: time.Now}
		code := Execute(context.Background(), f, strings.Fields(line))
		if code != ExitUsage || out.Len() != 0 || !strings.Contains(errOut.String(), want) || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("undolog %s: exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout, one line saying %s", line, code, out.String(), errOut.String(), ExitUsage, want)
		}
	}
	// A group's help is cobra's, with one usage line (a group that ran
	// would get a second).
	for _, line := range []string{"session", "help session", "session help", "session --log x.db", "policy"} {
		var out bytes.Buffer
		f := &Factory{In: strings.NewReader(""), Out: &out, ErrOut: &out, Getenv: func(string) string { return "" }, Now: time.Now}
		code := Execute(context.Background(), f, strings.Fields(line))
		if code != ExitOK || !strings.Contains(out.String(), "Available Commands") || strings.Contains(out.String(), "[flags]\n  undolog") {
			t.Errorf("undolog %s: exit %d, %q; want its help with one usage line, exit 0", line, code, out.String())
		}
	}
}
