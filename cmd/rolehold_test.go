package cmd

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Resolving a call in doubt is a person's decision, an approver's as every
// resolve is: an agent's is refused, exit 10, and writes nothing (it may
// still reclaim the call to run it again, `exec --retry-in-doubt`); the
// approver's is recorded as a resolve.
func TestAgentCannotResolveACallInDoubt(t *testing.T) {
	owner, agent, approver, _ := rolesDB(t)
	for _, args := range [][]string{
		{"intercept", "--session", "s", "--tool", "a", "--tier", "compensable"},
		{"start", "1"},
	} {
		if code, out, errOut := undolog(t, agent, args...); code != 0 {
			t.Fatalf("%v as agent: exit %d: %s%s", args, code, out, errOut)
		}
	}
	before := exportOf(t, owner)
	code, _, errOut := undolog(t, agent, "resolve", "1", "--reason", "checked")
	if code != ExitDenied || !strings.Contains(errOut, "may not resolve: it is not a member of undolog_approver") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("resolve of a call in doubt as agent: exit %d: %s", code, errOut)
	}
	if after := exportOf(t, owner); after != before {
		t.Fatal("a refused resolve changed the log")
	}
	if code, out, errOut := undolog(t, approver, "resolve", "1", "--reason", "checked", "--as", "alice"); code != 0 || !strings.Contains(out, "was in doubt") {
		t.Fatalf("resolve as approver: exit %d: %s%s", code, out, errOut)
	}
	code, out, errOut := undolog(t, owner, "show", "1", "-o", "json")
	if code != 0 || !strings.Contains(out, `"trigger": "Person resolves the call in doubt"`) {
		t.Fatalf("show: exit %d: %s%s", code, out, errOut)
	}
	if code, out, errOut := undolog(t, owner, "verify"); code != 0 {
		t.Fatalf("verify: exit %d: %s%s", code, out, errOut)
	}
}

// sqlErr runs sql as the role of addr and returns the server's error.
func sqlErr(t *testing.T, addr, sql string) error {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), sql)
	return err
}
