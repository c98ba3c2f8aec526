package cmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

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
		"--help bogus":       `unknown command "bogus" for "undolog"`,
		"session help fial":  `unknown command "fial" for "undolog session"; did you mean fail?`,
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
	// Help asked for before the command's name is that command's.
	for line, want := range map[string]string{
		"--help list":            "List effects, newest first",
		"-h session list":        "List sessions, newest first",
		"--log x.db --help list": "List effects, newest first",
		"session --help list":    "List sessions, newest first",
		"session help list":      "List sessions, newest first",
		"-h completion bash":     "Generate the autocompletion script for the bash shell",
		"-- list":                "List effects, newest first",
	} {
		var out bytes.Buffer
		f := &Factory{In: strings.NewReader(""), Out: &out, ErrOut: &out, Getenv: func(string) string { return "" }, Now: time.Now}
		if code := Execute(context.Background(), f, strings.Fields(line)); code != ExitOK || !strings.HasPrefix(out.String(), want) {
			t.Errorf("undolog %s: exit %d, %q; want the help that starts %q, exit 0", line, code, out.String(), want)
		}
	}
}
