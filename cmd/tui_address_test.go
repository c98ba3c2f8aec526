package cmd

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// The view's title names its log: a file by its absolute path, a PostgreSQL
// URL without its password (in the user part or the query).
func TestLogAddressHidesThePassword(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "undolog.db")
	for addr, want := range map[string]string{
		file: file,
		"postgres://alice:s3cret@db.internal:5432/undolog?sslmode=disable": "postgres://alice:xxxxx@db.internal:5432/undolog?sslmode=disable",
		"postgresql://db.internal/undolog?password=s3cret&user=alice":      "postgresql://db.internal/undolog?password=xxxxx&user=alice",
		"postgres://bob@db.internal/undolog":                               "postgres://bob@db.internal/undolog",
	} {
		store := logaddr.Open(addr, logaddr.Options{})
		got := logAddress(store, addr)
		store.Close()
		if got != want || strings.Contains(got, "s3cret") {
			t.Errorf("%s: %q, want %q", addr, got, want)
		}
	}
	// A PG* environment's database is named as the environment gives it.
	t.Setenv("PGHOST", "db.internal")
	t.Setenv("PGDATABASE", "undolog")
	t.Setenv("PGUSER", "alice")
	t.Setenv("PGPASSWORD", "s3cret")
	store := logaddr.Open("postgres://", logaddr.Options{})
	defer store.Close()
	if got := logAddress(store, "postgres://"); got != "postgres://alice@db.internal:5432/undolog (from the PG* environment)" {
		t.Errorf("the PG* environment's log: %q", got)
	}
}

// undo --dry-run flags an mcp compensation whose argument template does not
// expand (here {{result.id}}, which jq reads as a function): the call shown
// is not one that can be made. The one that expands shows its filled args.
func TestUndoDryRunFlagsATemplateThatDoesNotExpand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "u.db")
	store := logaddr.File(db, logaddr.Options{})
	for i, tmpl := range []string{`{"id":"{{result.id}}"}`, `{"id":"{{ .result.id }}"}`} {
		res, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "create_ticket", Tier: sm.Compensable,
			Args: json.RawMessage(`{"n":` + string(rune('0'+i)) + `}`), CreateSession: true,
			Compensation: &model.Compensation{Kind: model.CompensationMCP, Tool: "close_ticket", Args: json.RawMessage(tmpl)}})
		if err != nil {
			t.Fatal(err)
		}
		store.Start(t.Context(), res.Effect.ID, model.Change{})
		if _, err := store.Commit(t.Context(), res.Effect.ID, model.Change{Result: json.RawMessage(`{"id":"FIN-7"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	store.Close()
	code, stdout, stderr := undolog(t, db, "undo", "s", "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(stdout, "\n")
	var flags []int
	for i, l := range lines {
		if strings.Contains(l, "WILL FAIL: the argument template does not expand") {
			flags = append(flags, i)
			if !strings.Contains(l, "function not defined: result/0") {
				t.Errorf("the flag does not say why: %q", l)
			}
		}
	}
	if len(flags) != 1 || !strings.Contains(lines[flags[0]-1], "effect 1 ") || !strings.Contains(stdout, `mcp close_ticket {"id":"FIN-7"}`) {
		t.Fatalf("flags at %v:\n%s", flags, stdout)
	}
	code, stdout, _ = undolog(t, db, "undo", "s", "--dry-run", "-o", "json")
	if code != 0 || !strings.Contains(stdout, `"problem": "the argument template does not expand`) && !strings.Contains(stdout, `"problem":"the argument template does not expand`) {
		t.Fatalf("json plan without the problem:\n%s", stdout)
	}
}
