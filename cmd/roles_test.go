package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/storage/pgstore"
)

// rolesMu keeps tests that create roles (cluster-wide) apart.
var rolesMu sync.Mutex

// asRole is the URL of the database at db logged in as role (the test
// server trusts its socket: no password).
func asRole(t *testing.T, db, role string) string {
	t.Helper()
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

// sqlExec runs sql on the database at addr.
func sqlExec(t *testing.T, addr, sql string) {
	t.Helper()
	if err := sqlTry(t, addr, sql); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
}

// sqlTry runs sql as the role addr logs in as and returns what the
// database said.
func sqlTry(t *testing.T, addr, sql string) error {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), sql)
	return err
}

// rolesDB is a fresh database migrated by its owner, with the roles that
// `undolog migrate --print-roles` prints (run as docs/postgres.md says: its SQL on the
// database), and log-in roles for an agent, an approver and a reader, named
// after the database so that tests on one server do not share them.
func rolesDB(t *testing.T) (owner, agent, approver, reader string) {
	t.Helper()
	db := pgtest.Server(t).NewDatabase(t)
	if code, out, errOut := undolog(t, db, "migrate"); code != 0 || !strings.Contains(out, "schema at version") {
		t.Fatalf("migrate: exit %d: %s%s", code, out, errOut)
	}
	code, sql, errOut := undolog(t, db, "migrate", "--print-roles")
	if code != 0 {
		t.Fatalf("migrate --print-roles: exit %d: %s", code, errOut)
	}
	rolesMu.Lock()
	sqlExec(t, db, sql)
	u, _ := url.Parse(db)
	suffix := regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.TrimPrefix(u.Path, "/"), "_")
	names := map[string]string{"ci_" + suffix: "undolog_agent", "alice_" + suffix: "undolog_approver", "audit_" + suffix: "undolog_reader"}
	for name, group := range names {
		sqlExec(t, db, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN IN ROLE "+group)
	}
	rolesMu.Unlock()
	t.Cleanup(func() {
		rolesMu.Lock()
		defer rolesMu.Unlock()
		for name := range names {
			conn, err := pgx.Connect(context.Background(), pgtest.Server(t).AdminURL())
			if err == nil {
				// It owns nothing and was granted nothing but its group.
				conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
				conn.Close(context.Background())
			}
		}
	})
	return db, asRole(t, db, "ci_"+suffix), asRole(t, db, "alice_"+suffix), asRole(t, db, "audit_"+suffix)
}

func exportOf(t *testing.T, db string) string {
	t.Helper()
	code, out, errOut := undolog(t, db, "export")
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	return out
}

// An agent intercepts an irreversible call and cannot approve it: exit 10,
// one line naming the role and the group, the log unchanged. The approver
// approves; the history shows both roles next to the actors.
func TestAgentRoleCannotApproveItsOwnCall(t *testing.T) {
	_, agent, approver, _ := rolesDB(t)
	agentRole, approverRole := roleOf(t, agent), roleOf(t, approver)

	code, out, errOut := undolog(t, agent, "intercept", "--session", "s", "--tool", "send_wire", "--tier", "irreversible", "--as", "bot")
	if code != 0 || !strings.Contains(out, "new effect 1") {
		t.Fatalf("intercept as agent: exit %d: %s%s", code, out, errOut)
	}
	before := exportOf(t, agent)
	code, out, errOut = undolog(t, agent, "approve", "1", "--as", "bot")
	want := "undolog: denied: log " + redacted(agent) + ": the database role " + agentRole + " may not approve: it is not a member of undolog_approver\n"
	if code != ExitDenied || out != "" || errOut != want {
		t.Fatalf("approve as agent: exit %d, stdout %q, stderr\n%q, want exit %d and\n%q", code, out, errOut, ExitDenied, want)
	}
	if after := exportOf(t, agent); after != before {
		t.Fatalf("a refused approval changed the log:\n%s\nthen\n%s", before, after)
	}
	// Nor may it reject, nor claim to be the approver in a record it writes.
	if code, _, errOut := undolog(t, agent, "reject", "1"); code != ExitDenied || !strings.Contains(errOut, "may not reject") {
		t.Fatalf("reject as agent: exit %d: %s", code, errOut)
	}

	if code, out, errOut := undolog(t, approver, "approve", "1", "--as", "alice"); code != 0 {
		t.Fatalf("approve as approver: exit %d: %s%s", code, out, errOut)
	}
	// The approver may not run the call: starting it is the agent's.
	if code, _, errOut := undolog(t, approver, "start", "1"); code != ExitDenied || !strings.Contains(errOut, "may not start: it is not a member of undolog_agent") {
		t.Fatalf("start as approver: exit %d: %s", code, errOut)
	}
	if code, out, errOut := undolog(t, agent, "start", "1"); code != 0 {
		t.Fatalf("start as agent: exit %d: %s%s", code, out, errOut)
	}

	code, out, errOut = undolog(t, approver, "show", "1", "-o", "json")
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	var detail struct {
		History []struct{ To, Actor, Role string }
	}
	if err := json.Unmarshal([]byte(out), &detail); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range detail.History {
		got = append(got, h.To+" "+h.Actor+" "+h.Role)
	}
	wantHist := []string{"pending bot " + agentRole, "approved alice " + approverRole, "executing tester " + agentRole}
	if strings.Join(got, "\n") != strings.Join(wantHist, "\n") {
		t.Fatalf("history:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantHist, "\n"))
	}
	code, out, _ = undolog(t, approver, "show", "1")
	if code != 0 || !strings.Contains(out, "alice (role "+approverRole+")") || !strings.Contains(out, "bot (role "+agentRole+")") {
		t.Fatalf("show (text) does not name the roles: exit %d\n%s", code, out)
	}
	if code, out, errOut := undolog(t, approver, "verify"); code != 0 {
		t.Fatalf("verify: exit %d: %s%s", code, out, errOut)
	}
}

// A reader lists, shows and verifies, and may write nothing: exit 10, the
// log unchanged.
func TestReaderRoleReadsOnly(t *testing.T) {
	owner, agent, _, reader := rolesDB(t)
	if code, out, errOut := undolog(t, agent, "intercept", "--session", "s", "--tool", "read_file", "--tier", "compensable"); code != 0 {
		t.Fatalf("intercept: exit %d: %s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"list"}, {"show", "1"}, {"verify"}, {"approvals"}, {"session", "show", "s"}} {
		if code, _, errOut := undolog(t, reader, args...); code != 0 {
			t.Errorf("%v as reader: exit %d: %s", args, code, errOut)
		}
	}
	before := exportOf(t, owner)
	for _, args := range [][]string{
		{"intercept", "--session", "s", "--tool", "x", "--tier", "compensable"},
		{"start", "1"},
		{"session", "complete", "s"},
	} {
		code, _, errOut := undolog(t, reader, args...)
		if code != ExitDenied || !strings.Contains(errOut, "the database role "+roleOf(t, reader)+" may not") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v as reader: exit %d: %q, want exit %d and one line naming the role", args, code, errOut, ExitDenied)
		}
	}
	if code, _, errOut := undolog(t, reader, "migrate", "--apply-roles"); code != ExitDenied || !strings.Contains(errOut, "may not set up roles: it does not own undolog's tables") {
		t.Errorf("migrate --apply-roles as reader: exit %d: %s", code, errOut)
	}
	if after := exportOf(t, owner); after != before {
		t.Fatalf("a refused write changed the log")
	}
}

// Undo and resolve are the approver's; gc the owner's.
func TestUndoResolveAndGCByRole(t *testing.T) {
	owner, agent, approver, _ := rolesDB(t)
	for _, args := range [][]string{
		{"intercept", "--session", "s", "--tool", "a", "--tier", "compensable", "--compensate-cmd", "false"},
		{"start", "1"}, {"commit", "1"},
		{"session", "fail", "s"},
	} {
		if code, out, errOut := undolog(t, agent, args...); code != 0 {
			t.Fatalf("%v as agent: exit %d: %s%s", args, code, out, errOut)
		}
	}
	before := exportOf(t, owner)
	if code, _, errOut := undolog(t, agent, "undo", "s", "--yes"); code != ExitDenied || !strings.Contains(errOut, "may not undo: it is not a member of undolog_approver") {
		t.Fatalf("undo as agent: exit %d: %s", code, errOut)
	}
	if after := exportOf(t, owner); after != before {
		t.Fatalf("a refused undo changed the log")
	}
	// The compensation fails: the entry waits for a person.
	if code, out, errOut := undolog(t, approver, "undo", "s", "--yes"); code != ExitCompensation {
		t.Fatalf("undo as approver: exit %d: %s%s", code, out, errOut)
	}
	if code, _, errOut := undolog(t, agent, "resolve", "1", "--reason", "done by hand"); code != ExitDenied || !strings.Contains(errOut, "may not resolve") {
		t.Fatalf("resolve as agent: exit %d: %s", code, errOut)
	}
	if code, out, errOut := undolog(t, approver, "resolve", "1", "--reason", "done by hand"); code != 0 {
		t.Fatalf("resolve as approver: exit %d: %s%s", code, out, errOut)
	}
	for _, db := range []string{agent, approver} {
		code, _, errOut := undolog(t, db, "gc", "--older-than", "0s", "--state", "completed,compensated,failed,halted")
		if code != ExitDenied || !strings.Contains(errOut, "may not change this log (permission denied for table") {
			t.Errorf("gc as %s: exit %d: %s", roleOf(t, db), code, errOut)
		}
	}
	if code, out, errOut := undolog(t, owner, "verify"); code != 0 {
		t.Fatalf("verify: exit %d: %s%s", code, out, errOut)
	}
}

// An agent's first use of a database nobody migrated is one line that says
// to run undolog migrate as the owner, exit 10, and creates nothing.
func TestAgentOnUnmigratedDatabase(t *testing.T) {
	db := pgtest.Server(t).NewDatabase(t)
	rolesMu.Lock()
	u, _ := url.Parse(db)
	name := "fresh_" + regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.TrimPrefix(u.Path, "/"), "_")
	sqlExec(t, db, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN")
	rolesMu.Unlock()
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), pgtest.Server(t).AdminURL())
		if err == nil {
			conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
			conn.Close(context.Background())
		}
	})
	agent := asRole(t, db, name)
	code, out, errOut := undolog(t, agent, "intercept", "--session", "s", "--tool", "x", "--tier", "compensable")
	if code != ExitDenied || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "run `undolog migrate` as the database's owner") {
		t.Fatalf("intercept on an unmigrated database: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = undolog(t, agent, "migrate")
	if code != ExitDenied || !strings.Contains(errOut, "schema version 0") {
		t.Fatalf("migrate as a role that may not: exit %d: %s%s", code, out, errOut)
	}
	// Still nothing there: the owner's migrate starts from 0.
	if code, out, _ := undolog(t, db, "migrate"); code != 0 || !strings.HasSuffix(out, "(was 0)\n") {
		t.Fatalf("owner's migrate: exit %d: %s", code, out)
	}
}

// undolog migrate applies the migrations once; a second run is up to date;
// -o json says the same.
func TestMigrateCommand(t *testing.T) {
	db := pgtest.Server(t).NewDatabase(t)
	code, out, errOut := undolog(t, db, "migrate")
	if want := fmt.Sprintf("schema at version %d (was 0)\n", pgstore.SchemaVersion); code != 0 || out != want {
		t.Fatalf("first migrate: exit %d: %q %s", code, out, errOut)
	}
	code, out, _ = undolog(t, db, "migrate")
	if want := fmt.Sprintf("schema at version %d: up to date\n", pgstore.SchemaVersion); code != 0 || out != want {
		t.Fatalf("second migrate: exit %d: %q", code, out)
	}
	code, out, _ = undolog(t, db, "migrate", "-o", "json")
	var got struct {
		Version  uint64 `json:"schema_version"`
		Was      uint64 `json:"was"`
		Migrated bool   `json:"migrated"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Version != got.Was || got.Migrated || got.Version != pgstore.SchemaVersion {
		t.Fatalf("migrate -o json: exit %d: %s", code, out)
	}
	// --apply-roles runs what --print-roles prints; again, too.
	rolesMu.Lock()
	defer rolesMu.Unlock()
	for range 2 {
		if code, out, errOut := undolog(t, db, "migrate", "--apply-roles"); code != 0 || !strings.Contains(out, "roles undolog_reader, undolog_agent, undolog_approver set up") {
			t.Fatalf("migrate --apply-roles: exit %d: %s%s", code, out, errOut)
		}
	}
}

// roleOf is the role name in a URL.
func roleOf(t *testing.T, addr string) string {
	t.Helper()
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatal(err)
	}
	return u.User.Username()
}

// redacted is an address as undolog prints it (the test URLs have no
// password: as they are).
func redacted(addr string) string { return addr }

// The SQL the Roles section of docs/postgres.md shows is what `undolog
// migrate --print-roles` prints, which rolesDB runs: the documented SQL is
// proven.
func TestDocsShowThePrintedRoles(t *testing.T) {
	readme, err := os.ReadFile("../docs/postgres.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Roles\n")
	_, block, ok2 := strings.Cut(section, "```sql\n")
	block, _, ok3 := strings.Cut(block, "```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/postgres.md has no SQL block in its Roles section")
	}
	code, out, errOut := undolog(t, "unused.db", "migrate", "--print-roles")
	if code != 0 || out != block {
		t.Fatalf("migrate --print-roles (exit %d, %s) prints\n%s\ndocs/postgres.md shows\n%s", code, errOut, out, block)
	}
}

// exec as an agent: its irreversible command waits for a decision it may
// not make itself; the approver's approval lets it run, as the agent.
func TestExecAsAgentWaitsForTheApprover(t *testing.T) {
	_, agent, approver, _ := rolesDB(t)
	marker := filepath.Join(t.TempDir(), "ran")
	run := runWithLog(t, agent, "exec", "--session", "s", "--tool", "deploy", "--", "sh", "-c", "echo ran > "+marker)
	var stderr strings.Builder
	run.Stderr = &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	// The request exists once exec has intercepted the call.
	for {
		code, out, errOut := undolog(t, approver, "approvals", "-o", "ids")
		if code != 0 {
			t.Fatalf("approvals: exit %d: %s", code, errOut)
		}
		if strings.TrimSpace(out) == "1" {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("exec ended before a decision: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if code, _, errOut := undolog(t, agent, "approve", "1"); code != ExitDenied {
		t.Fatalf("approve as agent: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran before its approval")
	}
	if code, _, errOut := undolog(t, approver, "approve", "1", "--as", "alice"); code != 0 {
		t.Fatalf("approve as approver: exit %d: %s", code, errOut)
	}
	if err := <-done; err != nil {
		t.Fatalf("exec: %v\n%s", err, stderr.String())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}
	code, out, _ := undolog(t, approver, "show", "1", "-o", "json")
	var d struct {
		Effect  struct{ State string }
		History []struct{ To, Role string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || d.Effect.State != "committed" {
		t.Fatalf("show: exit %d: %s", code, out)
	}
	for _, h := range d.History {
		if want := map[bool]string{true: roleOf(t, approver), false: roleOf(t, agent)}[h.To == "approved"]; h.Role != want {
			t.Errorf("record to %s by role %q, want %q", h.To, h.Role, want)
		}
	}
}

// An agent that moves an undo entry out of its session by SQL (its table
// has no trigger) gets no effect left out of an undo: the approver's undo
// refuses the whole session, naming the effect, and runs nothing.
func TestUndoRefusesASessionMissingAnEntry(t *testing.T) {
	owner, agent, approver, _ := rolesDB(t)
	marker := filepath.Join(t.TempDir(), "undone")
	for _, args := range [][]string{
		{"exec", "--session", "s", "--tool", "a", "--undo", "touch " + marker + "-1", "--", "true"},
		{"exec", "--session", "s", "--tool", "b", "--undo", "touch " + marker + "-2", "--", "true"},
	} {
		if code, out, errOut := undolog(t, agent, args...); code != 0 {
			t.Fatalf("%v as agent: exit %d: %s%s", args, code, out, errOut)
		}
	}
	// An agent may not (schema 11: an undo entry is an undo's to change);
	// the owner, whom no check stops, may.
	move := `UPDATE undolog_undo SET session = 'elsewhere' WHERE effect_id = 1`
	if err := sqlErr(t, agent, move); err == nil || !strings.Contains(err.Error(), "permission denied for table undolog_undo") {
		t.Fatalf("an agent moving an undo entry: %v", err)
	}
	sqlExec(t, owner, move)
	code, _, errOut := undolog(t, approver, "undo", "s", "--yes")
	if code != ExitError || !strings.Contains(errOut, "effect 1 (compensable, committed) of session s has no undo entry") {
		t.Fatalf("undo of a session missing an entry: exit %d: %s", code, errOut)
	}
	for _, n := range []string{"-1", "-2"} {
		if _, err := os.Stat(marker + n); err == nil {
			t.Fatalf("a compensation ran (%s) though the undo was refused", n)
		}
	}
}

// An agent cannot write its way out of a halt by SQL: the session record it
// saved before a person's rejection, written back, makes the next call fail
// as a log changed behind undolog (its command does not run); the row's
// state set to match, and a record of its own moving the halted session,
// are refused by the database.
func TestAgentCannotUnhaltItsSession(t *testing.T) {
	_, agent, approver, _ := rolesDB(t)
	marker := filepath.Join(t.TempDir(), "ran")
	if code, out, errOut := undolog(t, agent, "intercept", "--session", "s", "--tool", "drop", "--tier", "irreversible"); code != 0 {
		t.Fatalf("intercept: exit %d: %s%s", code, out, errOut)
	}
	conn, err := pgx.Connect(t.Context(), agent)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var saved []byte
	if err := conn.QueryRow(t.Context(), `SELECT rec FROM undolog_sessions WHERE id = 's'`).Scan(&saved); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := undolog(t, approver, "reject", "1", "--as", "alice"); code != 0 {
		t.Fatalf("reject: exit %d: %s%s", code, out, errOut)
	}
	if _, err := conn.Exec(t.Context(), `UPDATE undolog_sessions SET rec = $1 WHERE id = 's'`, saved); err != nil {
		t.Fatal(err) // the table's privileges allow it: what undolog does with it is the point
	}
	code, _, errOut := undolog(t, agent, "exec", "--session", "s", "--undo", "true", "--", "touch", marker)
	if code == 0 || !strings.Contains(errOut, `its row "halted": it was changed outside undolog`) {
		t.Fatalf("a call in the session written back to active: exit %d: %s", code, errOut)
	}
	if _, err := conn.Exec(t.Context(), `UPDATE undolog_sessions SET rec = $1, state = 'awaiting_approval' WHERE id = 's'`, saved); err == nil ||
		!strings.Contains(err.Error(), "may not move halted session s") {
		t.Fatalf("an agent setting its halted session's row to active: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the call ran in a session a person halted")
	}
	_, err = conn.Exec(t.Context(), `INSERT INTO undolog_session_history (session, seq, rec, role, to_state, trigger)
		SELECT 's', max(seq) + 1, '\x00', session_user, 'active', 'Session created' FROM undolog_session_history WHERE session = 's'`)
	if err == nil || !strings.Contains(err.Error(), "may not move halted session s") {
		t.Fatalf("an agent's record moving its halted session: %v", err)
	}
	// Renamed out of the way of a row written back under its name.
	if _, err := conn.Exec(t.Context(), `UPDATE undolog_sessions SET id = 's-old' WHERE id = 's'`); err == nil || !strings.Contains(err.Error(), "permission denied for table undolog_sessions") {
		t.Fatalf("an agent renaming its halted session: %v", err)
	}

	// A session a person undid stays undone: its row written back from
	// before the undo is refused.
	if code, out, errOut := undolog(t, agent, "exec", "--session", "u", "--undo", "true", "--", "true"); code != 0 {
		t.Fatalf("exec: exit %d: %s%s", code, out, errOut)
	}
	var active []byte
	if err := conn.QueryRow(t.Context(), `SELECT rec FROM undolog_sessions WHERE id = 'u'`).Scan(&active); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := undolog(t, approver, "undo", "u", "--yes", "--as", "alice"); code != 0 {
		t.Fatalf("undo: exit %d: %s%s", code, out, errOut)
	}
	if _, err := conn.Exec(t.Context(), `UPDATE undolog_sessions SET rec = $1, state = 'active' WHERE id = 'u'`, active); err == nil ||
		!strings.Contains(err.Error(), "may not move session u from compensated to active") {
		t.Fatalf("an agent setting an undone session's row to active: %v", err)
	}
	code, _, errOut = undolog(t, agent, "exec", "--session", "u", "--undo", "true", "--", "touch", marker)
	if code == 0 || !strings.Contains(errOut, "is compensated and accepts no new effects") {
		t.Fatalf("a call in the undone session: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a call ran in a session a person undid")
	}
}

// An agent may not set its own undo entry compensated or skipped by SQL
// (schema 11: no agent updates the undo table), and an entry forged so by
// a role that may write it (an approver's own SQL) does not make an undo
// pass the call by: the undo refuses the session as tampered, runs
// nothing, and the session stays as it was.
func TestUndoRefusesAnEntryAnAgentForged(t *testing.T) {
	// A record's bytes: its form, 'U', then its state's token (compensated 5,
	// skipped 16).
	for state, token := range map[string]int{"compensated": 5, "skipped": 16} {
		t.Run(state, func(t *testing.T) {
			_, agent, approver, _ := rolesDB(t)
			marker := filepath.Join(t.TempDir(), "undone")
			for _, args := range [][]string{
				{"exec", "--session", "s", "--tool", "a", "--undo", "touch " + marker + "-1", "--", "true"},
				{"exec", "--session", "s", "--tool", "b", "--undo", "touch " + marker + "-2", "--", "true"},
			} {
				if code, out, errOut := undolog(t, agent, args...); code != 0 {
					t.Fatalf("%v as agent: exit %d: %s%s", args, code, out, errOut)
				}
			}
			forge := fmt.Sprintf(`UPDATE undolog_undo SET rec = set_byte(rec, 2, %d), state = '%s' WHERE effect_id = 2`, token, state)
			if err := sqlTry(t, agent, forge); err == nil || !strings.Contains(err.Error(), "permission denied for table undolog_undo") {
				t.Fatalf("an agent setting its undo entry %s: %v", state, err)
			}
			sqlExec(t, approver, forge)
			code, out, errOut := undolog(t, approver, "undo", "s", "--yes", "--as", "alice")
			if code != ExitError || !strings.Contains(errOut, "effect 2 fails its check, damaged or tampered") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Fatalf("undo of a session with an entry the agent set %s: exit %d: %s%s", state, code, out, errOut)
			}
			for _, n := range []string{"-1", "-2"} {
				if _, err := os.Stat(marker + n); err == nil {
					t.Fatalf("a compensation ran (%s) though the undo was refused", n)
				}
			}
			if code, out, _ := undolog(t, approver, "session", "show", "s", "--output", "json"); code != 0 || !strings.Contains(out, `"state": "active"`) {
				t.Fatalf("the session after a refused undo: exit %d: %s", code, out)
			}
		})
	}
}
