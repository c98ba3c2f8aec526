package cmd

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// undolog runs the built binary on the log at db and returns its exit code,
// stdout and stderr.
func undolog(t *testing.T, db string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(testbin.Undolog(t), args...)
	cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+db, "UNDOLOG_ACTOR=tester", "NO_COLOR=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// committedEffect records a committed compensable effect of session s with
// the compensation comp.
func committedEffect(t *testing.T, store effectlog.Log, comp *model.Compensation) uint64 {
	t.Helper()
	return committedCall(t, store, "create", `{"name":"x"}`, comp)
}

// committedCall logs a compensable call of tool with args in session s and
// commits it.
func committedCall(t *testing.T, store effectlog.Log, tool, args string, comp *model.Compensation) uint64 {
	t.Helper()
	res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: tool, Tier: sm.Compensable,
		Args: json.RawMessage(args), Compensation: comp, CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Start(t.Context(), res.Effect.ID, model.Change{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(t.Context(), res.Effect.ID, model.Change{}); err != nil {
		t.Fatal(err)
	}
	return res.Effect.ID
}

// An MCP compensation whose server does not connect: each failed connection
// is a failed attempt, retried, then the entry is compensation_failed and the
// session halted (exit 9); never a panic, also with --retry-in-doubt.
func TestUndoOfAnMCPCompensationWhoseServerDoesNotConnect(t *testing.T) {
	db := filepath.Join(t.TempDir(), "u.db")
	store := logaddr.File(db, logaddr.Options{})
	id := committedEffect(t, store, &model.Compensation{Kind: model.CompensationMCP, Tool: "delete", Args: json.RawMessage(`{"name":"{{ .args.name }}"}`)})
	if _, err := store.SetUpstream(t.Context(), "s", []string{"sh", "-c", "exit 1"}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"undo", "s", "--yes"}, {"undo", "s", "--yes", "--retry-in-doubt"}} {
		code, stdout, stderr := undolog(t, db, args...)
		if code != ExitCompensation || strings.Contains(stderr, "panic") || !strings.Contains(stderr, "connect to MCP server") {
			t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
	}
	d, err := store.GetEffect(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Undo.State != sm.EntryCompensationFailed || d.Undo.Attempts != 4 {
		t.Fatalf("undo entry %s after %d attempts", d.Undo.State, d.Undo.Attempts)
	}
	if sess, _ := store.GetSession(t.Context(), "s"); sess.State != sm.SessionHalted {
		t.Fatalf("session %s", sess.State)
	}
}

// The dry run, show and session show say where each compensation runs: a
// command's working directory, an mcp call's server command (both escaped).
func TestCompensationsShowWhereTheyRun(t *testing.T) {
	db := filepath.Join(t.TempDir(), "u.db")
	store := logaddr.File(db, logaddr.Options{})
	committedEffect(t, store, &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"rm", "out.txt"}, Dir: "/srv/build \x1b[2J"})
	res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "create_entity", Tier: sm.Compensable,
		Args: json.RawMessage(`{"name":"y"}`), Compensation: &model.Compensation{Kind: model.CompensationMCP, Tool: "delete", Args: json.RawMessage(`{"name":"{{ .args.name }}"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	store.Start(t.Context(), res.Effect.ID, model.Change{})
	store.Commit(t.Context(), res.Effect.ID, model.Change{})
	if _, err := store.SetUpstream(t.Context(), "s", []string{"npx", "-y", "@modelcontextprotocol/server-memory", "\u202e"}); err != nil {
		t.Fatal(err)
	}
	// Quoted as bash reads them back: $'...' gives the exact bytes.
	dir := `(in $'/srv/build \x1b[2J')`
	server := `(server: npx -y @modelcontextprotocol/server-memory $'\xe2\x80\xae')`
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"undo", "s", "--dry-run"}, []string{`mcp delete {"name":"y"} ` + server, "rm out.txt " + dir}},
		{[]string{"undo", "s", "--dry-run", "-o", "json"}, []string{`"upstream": [`, `"dir": "/srv/build \u001b[2J"`}},
		{[]string{"show", "1"}, []string{"command: rm out.txt " + dir}},
		{[]string{"show", "2"}, []string{`compensation: mcp delete {"name":"{{ .args.name }}"} ` + server}},
		{[]string{"session", "show", "s"}, []string{`mcp server: npx -y @modelcontextprotocol/server-memory $'\xe2\x80\xae'`, "rm out.txt " + dir}},
	} {
		code, stdout, stderr := undolog(t, db, c.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		for _, want := range c.want {
			if !strings.Contains(stdout, want) {
				t.Errorf("%v: no %q in:\n%s", c.args, want, stdout)
			}
		}
		if !slices.Contains(c.args, "json") && strings.ContainsAny(stdout, "\x1b\u202e") { // -o json is exact
			t.Errorf("%v: unescaped: %q", c.args, stdout)
		}
	}
}
