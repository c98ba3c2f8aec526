package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/pgstore"
)

// rolesMu keeps tests that create roles (cluster-wide) apart.
var rolesMu sync.Mutex

// withRoles is a fresh database migrated by its owner, with pgstore.RolesSQL
// run on it and a log-in role in each group; it returns the owner's URL and
// the agent's, approver's and reader's.
func withRoles(t testing.TB) (owner, agent, approver, reader string) {
	t.Helper()
	return withRolesIn(t, "")
}

// withRolesIn is withRoles with undolog's tables in schema (its own, which
// every role's URL puts first in its search_path), "" for public.
func withRolesIn(t testing.TB, schema string) (owner, agent, approver, reader string) {
	t.Helper()
	owner = pgtest.Server(t).NewDatabase(t)
	u, err := url.Parse(owner)
	if err != nil {
		t.Fatal(err)
	}
	suffix := regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.TrimPrefix(u.Path, "/"), "_")
	switch q := u.Query(); {
	case schema != "" && q.Has("undolog_pooler"):
		// Behind a pooler a URL may not set search_path: the database's
		// setting does, made on the server before any role has a backend
		// of it there.
		db := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
		execTB(t, onServer(t, owner), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()+"; ALTER DATABASE "+db+" SET search_path = "+pgx.Identifier{schema}.Sanitize())
	case schema != "":
		execTB(t, owner, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		owner = u.String()
	}
	if _, _, err := pgstore.New(owner).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	names := []string{"ci_" + suffix, "alice_" + suffix, "audit_" + suffix}
	rolesMu.Lock()
	execTB(t, owner, pgstore.RolesSQL)
	if schema != "" {
		execTB(t, owner, "GRANT USAGE ON SCHEMA "+pgx.Identifier{schema}.Sanitize()+" TO undolog_reader, undolog_agent, undolog_approver")
	}
	for i, group := range []string{"undolog_agent", "undolog_approver", "undolog_reader"} {
		execTB(t, owner, "CREATE ROLE "+pgx.Identifier{names[i]}.Sanitize()+" LOGIN IN ROLE "+group)
	}
	rolesMu.Unlock()
	t.Cleanup(func() {
		rolesMu.Lock()
		defer rolesMu.Unlock()
		conn, err := pgx.Connect(context.Background(), pgtest.Server(t).AdminURL())
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for _, name := range names {
			conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
		}
	})
	as := func(role string) string {
		v := *u
		v.User = url.User(role)
		return v.String()
	}
	return owner, as(names[0]), as(names[1]), as(names[2])
}

// rawExec runs sql as the role of addr and returns the server's error.
func rawExec(t *testing.T, addr, sql string) error {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), sql)
	return err
}

// An agent's client that writes SQL of its own cannot approve either: not
// by writing the effect's row, not by a history row in the approver's name,
// nor one in its own name that records an approval.
func TestRolesAreTheDatabasesToCheck(t *testing.T) {
	owner, agent, approver, _ := withRoles(t)
	log := open(agent)
	defer log.Close()
	res, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "wire", Tier: sm.Irreversible,
		Args: json.RawMessage(`{}`), CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.Approve(t.Context(), res.Effect.ID, model.Change{Actor: "bot"}); !errors.Is(err, model.ErrDenied) ||
		!strings.Contains(err.Error(), "may not approve: it is not a member of undolog_approver") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("approve as agent: %v", err)
	}
	agentName := strings.TrimPrefix(strings.SplitN(agent, "@", 2)[0], "postgres://")
	approverName := strings.TrimPrefix(strings.SplitN(approver, "@", 2)[0], "postgres://")
	for _, c := range []struct{ name, sql, want string }{
		{"effect row to approved", `UPDATE undolog_effects SET state = 'approved' WHERE id = 1`, "may not approve"},
		{"irreversible effect started unapproved", `UPDATE undolog_effects SET state = 'executing' WHERE id = 1`, "was not approved"},
		// Writers have no UPDATE on the tier column (schema 11).
		{"tier changed", `UPDATE undolog_effects SET tier = 'compensable' WHERE id = 1`, "permission denied for table undolog_effects"},
		{"effect row to compensating", `UPDATE undolog_effects SET state = 'compensating' WHERE id = 1`, "may not undo"},
		// Inserts are judged too, not only pending ones let through.
		{"effect row inserted approved", `INSERT INTO undolog_effects (id, session, tool, tier, state, rec)
			VALUES (2, 's', 'w', 'compensable', 'approved', '\x00')`, "may not approve"},
		{"irreversible effect inserted executing", `INSERT INTO undolog_effects (id, session, tool, tier, state, rec)
			VALUES (2, 's', 'w', 'irreversible', 'executing', '\x00')`, "was not approved"},
		{"a record in another's name", `INSERT INTO undolog_history (effect_id, seq, rec, role, kind, to_state, trigger, actor)
			VALUES (1, 99, '\x00', '` + approverName + `', 'effect', 'pending', 'x', 'x')`, "in the name of role " + approverName},
		{"an approval in its own name", `INSERT INTO undolog_history (effect_id, seq, rec, role, kind, to_state, trigger, actor)
			VALUES (1, 99, '\x00', '` + agentName + `', 'effect', 'approved', 'x', 'x')`, "may not approve"},
		{"a session record in another's name", `INSERT INTO undolog_session_history (session, seq, rec, role)
			VALUES ('s', 99, '\x00', '` + approverName + `')`, "in the name of role"},
		{"gc", `DELETE FROM undolog_history`, "permission denied"},
		// A temporary table comes first in the client's search_path: the
		// checks must judge the table they guard, not one by that name.
		{"owner by a temporary table", `CREATE TEMP TABLE undolog_history (x int);
			UPDATE public.undolog_effects SET state = 'approved' WHERE id = 1`, "may not approve"},
		{"a timeout in the agent's name", `INSERT INTO undolog_history (effect_id, seq, rec, role, kind, to_state, trigger, actor)
			VALUES (1, 99, '\x00', '` + agentName + `', 'effect', 'rejected', 'x', 'system:timeout')`, "may not reject"},
	} {
		if err := rawExec(t, agent, c.sql); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_history WHERE seq = 99 OR to_state = 'approved'`); n != 0 {
		t.Fatalf("%d forged rows", n)
	}
	// The approver's approval stands, in its name.
	if _, err := open(approver).Approve(t.Context(), res.Effect.ID, model.Change{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	d, err := log.GetEffect(t.Context(), res.Effect.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.History[len(d.History)-1]; got.To != "approved" || got.Role != approverName || got.Actor != "alice" || d.History[0].Role != agentName {
		t.Fatalf("history %+v", d.History)
	}
	if rep, err := log.Verify(t.Context()); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
}

// A row whose columns say another move than its record (written past the
// triggers, by the owner) is a verify problem.
func TestVerifyComparesHistoryColumnsWithRecords(t *testing.T) {
	owner := pgtest.Server(t).NewDatabase(t)
	log := open(owner)
	defer log.Close()
	if _, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatal(err)
	}
	if rep, err := log.Verify(t.Context()); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
	exec(t, owner, `ALTER TABLE undolog_history DISABLE TRIGGER undolog_history_append_only;
		UPDATE undolog_history SET role = 'someone', to_state = 'approved' WHERE effect_id = 1 AND seq = 1`)
	rep, err := log.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, p := range rep.Problems {
		details = append(details, p.Detail)
	}
	got := strings.Join(details, "\n")
	if !strings.Contains(got, `history record 1: its row's role "someone" disagrees with the record's`) ||
		!strings.Contains(got, `its row's to "approved" disagrees with the record's "pending"`) {
		t.Fatalf("verify problems:\n%s", got)
	}
}

// verify compares a session row's state column with its record: one
// changed behind the engine (by the owner, whom no trigger stops) is found.
func TestVerifyComparesSessionStateWithRecord(t *testing.T) {
	owner := pgtest.Server(t).NewDatabase(t)
	log := open(owner)
	defer log.Close()
	if _, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatal(err)
	}
	exec(t, owner, `UPDATE undolog_sessions SET state = 'halted' WHERE id = 's'`)
	rep, err := log.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || rep.Problems[0].Detail != `the session's row says "halted", its record "active"` {
		t.Fatalf("verify problems: %+v", rep.Problems)
	}
}

// Migrate says what it did; the role of a database that has no roles set
// up is recorded all the same (the owner's).
func TestMigrateReportsVersions(t *testing.T) {
	db := pgtest.Server(t).NewDatabase(t)
	e := pgstore.New(db)
	defer e.Close()
	if before, after, err := e.Migrate(t.Context()); err != nil || before != 0 || after != pgstore.SchemaVersion {
		t.Fatalf("first: %d -> %d, %v", before, after, err)
	}
	if before, after, err := e.Migrate(t.Context()); err != nil || before != pgstore.SchemaVersion || after != pgstore.SchemaVersion {
		t.Fatalf("second: %d -> %d, %v", before, after, err)
	}
	exec(t, db, `UPDATE undolog_meta SET value = 99 WHERE key = 'schema_version'`)
	if _, _, err := e.Migrate(t.Context()); !errors.Is(err, model.ErrNewerSchema) {
		t.Fatalf("newer schema: %v", err)
	}
}

// A database of schema 1 (before roles) with a log in it reads and verifies
// as it is, before and after `undolog migrate` moves it to this schema;
// the records written since carry the role.
func TestSchemaOneMovesToRoles(t *testing.T) {
	db := pgtest.Server(t).NewDatabase(t)
	exec(t, db, pgstore.Migrations[0]+`; INSERT INTO undolog_meta (key, value) VALUES ('schema_version', 1)`)
	// A row as an undolog of schema 1 could write it (a session record in
	// the JSON form every engine reads).
	exec(t, db, `INSERT INTO undolog_sessions (id, seq, rec) VALUES ('old', 1, '\x7b226964223a226f6c64222c227374617465223a22616374697665227d')`)
	exec(t, db, `UPDATE undolog_counters SET n = 1 WHERE name = 'session'`)
	log := open(db)
	defer log.Close()
	rep, err := log.Verify(t.Context())
	if err != nil {
		t.Fatalf("verify of schema 1: %v", err)
	}
	e := pgstore.New(db)
	defer e.Close()
	if before, after, err := e.Migrate(t.Context()); err != nil || before != 1 || after != pgstore.SchemaVersion {
		t.Fatalf("migrate: %d -> %d, %v", before, after, err)
	}
	again, err := log.Verify(t.Context())
	if err != nil || len(again.Problems) != len(rep.Problems) {
		t.Fatalf("verify after migrating: %v %v (before: %v)", err, again.Problems, rep.Problems)
	}
	if _, err := log.CreateSession(t.Context(), effectlog.NewSession{ID: "new"}); err != nil {
		t.Fatal(err)
	}
	hist, err := log.SessionHistory(t.Context(), "new")
	if err != nil || len(hist) != 1 || hist[0].Role == "" {
		t.Fatalf("history of a session written since: %+v %v", hist, err)
	}
}

// execTB runs sql on the database at url.
func execTB(t testing.TB, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatal(err)
	}
}

// What an approver approves is what the request showed and what runs: an
// agent that rewrites the effect's and the request's bytes (which the row
// checks cannot read) gets its call refused, not approved.
func TestAnApprovalOfRewrittenArgumentsIsRefused(t *testing.T) {
	owner, agent, approver, _ := withRoles(t)
	log := open(agent)
	defer log.Close()
	res, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "deploy", Tier: sm.Irreversible,
		Args: json.RawMessage(`{"cmd":"DANGEROUS"}`), CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"undolog_effects", "undolog_approvals"} {
		column := map[string]string{"undolog_effects": "id", "undolog_approvals": "effect_id"}[table]
		if err := rawExec(t, agent, `UPDATE `+table+` SET rec = overlay(rec placing convert_to('HARMLESS!', 'UTF8')
			from position(convert_to('DANGEROUS', 'UTF8') in rec)) WHERE `+column+` = 1`); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
	}
	if d, err := log.GetEffect(t.Context(), res.Effect.ID); err != nil || !strings.Contains(string(d.Approval.Args), "HARMLESS!") {
		t.Fatalf("the rewrite did not take: %v %s", err, d.Approval.Args)
	}
	_, err = open(approver).Approve(t.Context(), res.Effect.ID, model.Change{Actor: "alice"})
	if !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "fails its check") {
		t.Fatalf("approve of rewritten args: %v", err)
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_effects WHERE state <> 'pending'`); n != 0 {
		t.Fatal("the effect moved")
	}
}

// The signature index is writable by an agent's role (intercepts write it):
// an entry that names another call's effect is refused as damage, never
// answered with that effect's result or tier.
func TestASignatureIndexEntryForAnotherCallIsRefused(t *testing.T) {
	_, agent, _, _ := withRoles(t)
	log := open(agent)
	defer log.Close()
	other, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "sg", Tool: "deploy", Tier: sm.Compensable,
		Args: json.RawMessage(`{"v":"FAKE"}`), CreateSession: true, Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.Commit(t.Context(), other.Effect.ID, model.Change{Result: json.RawMessage(`"FAKE-OUTPUT"`)}); err != nil {
		t.Fatal(err)
	}
	sig := model.Signature("sg", "deploy", []byte(`{"v":"LEGIT"}`), "")
	if err := rawExec(t, agent, `INSERT INTO undolog_signatures (sig, effect_id) VALUES ('`+sig+`', 1)`); err != nil {
		t.Fatal(err)
	}
	res, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "sg", Tool: "deploy", Tier: sm.Compensable,
		Args: json.RawMessage(`{"v":"LEGIT"}`)})
	if !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "signature index names effect 1") {
		t.Fatalf("intercept through a forged index entry: %+v %v", res, err)
	}
}

// An agent and an approver may queue their changes behind another's
// publish and move the queue into the feed (RolesSQL grants the queue, the
// sequences and undolog_publish); a reader may not put a change in the feed
// by calling undolog_publish (it runs with its caller's rights).
func TestRolesQueueAndPublish(t *testing.T) {
	owner, agent, approver, reader := withRoles(t)
	agentLog, approverLog := open(agent), open(approver)
	defer agentLog.Close()
	defer approverLog.Close()
	res, err := agentLog.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "wire", Tier: sm.Irreversible,
		Args: json.RawMessage(`{}`), CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	tx := holdPublishLock(t, owner)
	if _, err := agentLog.Intercept(t.Context(), effectlog.InterceptRequest{Session: "t", Tool: "wire", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatalf("an agent's write queued behind a publish: %v", err)
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_changes_pending`); n == 0 {
		t.Fatal("the agent's write queued nothing")
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The approver's write gives the queue its positions if the agent's
	// engine has not yet: either way, the queue ends empty and the feed whole.
	if _, err := approverLog.Approve(t.Context(), res.Effect.ID, model.Change{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	// Each engine publishes what its writes queued after their commits:
	// the reads wait for both engines' publishes.
	for _, log := range []effectlog.Log{agentLog, approverLog} {
		if _, _, err := log.Changes(t.Context(), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_changes_pending`); n != 0 {
		t.Fatalf("%d changes still queued", n)
	}
	if n, max := count(t, owner, `SELECT count(*) FROM undolog_changes`), count(t, owner, `SELECT max(pos) FROM undolog_changes`); n != max {
		t.Fatalf("%d changes up to position %d", n, max)
	}
	err = rawExec(t, reader, `SELECT undolog_publish(true, ARRAY['S'], ARRAY[0::bigint], ARRAY['x'], ARRAY[1])`)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a reader's publish: %v", err)
	}
	// What is queued, a reader may publish, as it is.
	if err := rawExec(t, owner, `INSERT INTO undolog_changes_pending (kind, effect_id, session, seq) VALUES ('S', 0, 's', 1)`); err != nil {
		t.Fatal(err)
	}
	if err := rawExec(t, reader, `SELECT undolog_publish_queue(true)`); err != nil {
		t.Fatalf("a reader's publish of the queue: %v", err)
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_changes_pending`); n != 0 {
		t.Fatalf("%d changes still queued after the reader's publish", n)
	}
}

// Roles set up at schema 3 (RolesSQL then granted no sequences, queue or
// publish function) go on writing once the owner migrates: the migration
// grants its new objects to the groups that exist.
func TestRolesSetUpAtSchemaThreeGoOnAfterMigrating(t *testing.T) {
	owner := pgtest.Server(t).NewDatabase(t)
	u, err := url.Parse(owner)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, owner, pgstore.Migrations[0]+`;`+pgstore.Migrations[1]+`;`+pgstore.Migrations[2]+
		`; INSERT INTO undolog_meta (key, value) VALUES ('schema_version', 3)`)
	// RolesSQL as it was at schema 3: without the grants of schema 4's objects.
	old := pgstore.RolesSQL
	i, j := strings.Index(old, "-- Writers take ids"), strings.Index(old, "-- Log-in roles")
	if i < 0 || j < i {
		t.Fatal("RolesSQL has no part for schema 4's objects")
	}
	old = old[:i] + old[j:]
	name := "ci_" + regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.TrimPrefix(u.Path, "/"), "_")
	rolesMu.Lock()
	execTB(t, owner, old)
	execTB(t, owner, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN IN ROLE undolog_agent")
	rolesMu.Unlock()
	t.Cleanup(func() {
		rolesMu.Lock()
		defer rolesMu.Unlock()
		if conn, err := pgx.Connect(context.Background(), pgtest.Server(t).AdminURL()); err == nil {
			conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
			conn.Close(context.Background())
		}
	})
	e := pgstore.New(owner)
	defer e.Close()
	if before, after, err := e.Migrate(t.Context()); err != nil || before != 3 || after != pgstore.SchemaVersion {
		t.Fatalf("migrate: %d -> %d, %v", before, after, err)
	}
	v := *u
	v.User = url.User(name)
	agent := open(v.String())
	defer agent.Close()
	if _, err := agent.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatalf("an agent's write after the migration: %v", err)
	}
	// And one queued behind another's publish.
	tx := holdPublishLock(t, owner)
	if _, err := agent.Intercept(t.Context(), effectlog.InterceptRequest{Session: "t", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatalf("an agent's write queued behind a publish: %v", err)
	}
	tx.Rollback(t.Context())
	if _, _, err := agent.Changes(t.Context(), 0, 0); err != nil {
		t.Fatal(err)
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_changes_pending`); n != 0 {
		t.Fatalf("%d changes still queued after the agent's engine published", n)
	}
}

// No writer puts rows in the change feed but through undolog_publish, nor
// takes the queued ones out (schema 8). Rows put there by hand (an owner,
// or a database before schema 8) are checked: verify reports rows that
// name no history record, name one another row names, name an effect in
// another session, or leave a gap. A session gc dropped and made anew
// under its name is no problem.
func TestVerifyChecksTheFeed(t *testing.T) {
	owner, agent, _, _ := withRoles(t)
	log := open(agent)
	defer log.Close()
	for _, s := range []string{"s", "g"} {
		if _, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: s, Tool: "w", Tier: sm.Compensable,
			Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
			t.Fatal(err)
		}
	}
	ownerLog := open(owner)
	defer ownerLog.Close()
	if _, err := ownerLog.SetSessionState(t.Context(), "g", sm.SessionFailed, model.Change{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ownerLog.SetSessionState(t.Context(), "s", sm.SessionCompleted, model.Change{}); err != nil {
		t.Fatal(err)
	}
	if rep, err := ownerLog.GC(t.Context(), time.Now().Add(time.Hour), []sm.SessionState{sm.SessionFailed}); err != nil || len(rep.Sessions) != 1 {
		t.Fatalf("gc: %+v %v", rep, err)
	}
	if _, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "g", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`{"again":1}`), CreateSession: true}); err != nil {
		t.Fatal(err)
	}
	if rep, err := log.Verify(t.Context()); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("verify of a clean log: %v %v", err, rep.Problems)
	}
	if _, err := log.LastChange(t.Context()); err != nil { // its publish is over
		t.Fatal(err)
	}
	last := count(t, owner, `SELECT max(pos) FROM undolog_changes`)
	first := count(t, owner, `SELECT min(seq) FROM undolog_history WHERE effect_id = 1`)
	// (Not the first record: a row naming that begins a new session of
	// the name, for all verify can tell.)
	secondS := count(t, owner, `SELECT max(seq) FROM undolog_session_history WHERE session = 's'`)
	for _, forge := range []string{fmt.Sprintf(`INSERT INTO undolog_changes (pos, kind, effect_id, session, seq) VALUES (%d + 1, 'E', 1, 's', 99)`, last),
		`DELETE FROM undolog_changes_pending`, `UPDATE undolog_changes_pending SET seq = 99`,
		`INSERT INTO undolog_changes_pending (id, kind, effect_id, session, seq) SELECT nextval('undolog_changes_pending_id_seq') + 5, 'E', 1, 's', 99`} {
		if err := rawExec(t, agent, forge); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("an agent's %s: %v", forge, err)
		}
	}
	if err := rawExec(t, owner, fmt.Sprintf(`INSERT INTO undolog_changes (pos, kind, effect_id, session, seq) VALUES
		(%[1]d + 1, 'E', 1, 's', 99),
		(%[1]d + 2, 'E', 1, 's', %[2]d),
		(%[1]d + 3, 'S', 0, 's', %[3]d),
		(%[1]d + 4, 'E', 1, 'g', %[2]d),
		(%[1]d + 5, 'X', 0, '', 0),
		(9223372036854775807, 'S', 0, 's', 98)`, last, first, secondS)); err != nil {
		t.Fatal(err)
	}
	rep, err := log.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range rep.Problems {
		if p.Kind == "feed" {
			got = append(got, p.Detail)
		}
	}
	want := []string{
		fmt.Sprintf("change %d names history record 99, which the effect does not have", last+1),
		fmt.Sprintf("change %d names the effect in session \"g\", which is not its", last+4),
		fmt.Sprintf("change %d names history record %d, which an earlier change names", last+2, first),
		fmt.Sprintf("change %d names history record %d, which an earlier change names", last+4, first),
		"change 9223372036854775807 names session history record 98, which the session does not have",
		fmt.Sprintf("change %d names session history record %d, which an earlier change names", last+3, secondS),
		fmt.Sprintf("change %d is of no kind the feed has", last+5),
		fmt.Sprintf("change 9223372036854775807 follows change %d: the positions between are missing", last+5),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("verify's feed problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An agent's role records that a call's answer reached its client and
// runs the call again after it (the signature index moves to the new
// effect); lifting a halt is an approver's, as the rejection was.
func TestAnsweredAgainAndResume(t *testing.T) {
	_, agent, approver, _ := withRoles(t)
	a, p := open(agent), open(approver)
	defer a.Close()
	defer p.Close()
	ctx := t.Context()
	call := effectlog.InterceptRequest{Session: "rs", Tool: "write", Tier: sm.Compensable, Args: json.RawMessage(`{"c":"A"}`),
		CreateSession: true, Start: true, RunAgainAnswered: true, Actor: "ci"}
	first, err := a.Intercept(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commit(ctx, first.Effect.ID, model.Change{Result: json.RawMessage(`"ok"`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Answered(ctx, first.Effect.ID, model.Change{Actor: "ci"}); err != nil {
		t.Fatalf("an agent records an answer: %v", err)
	}
	again, err := a.Intercept(ctx, call)
	if err != nil || again.Outcome != model.OutcomeNew || again.Effect.ID == first.Effect.ID {
		t.Fatalf("an agent runs an answered call again: %+v %v", again, err)
	}
	send, err := a.Intercept(ctx, effectlog.InterceptRequest{Session: "rs", Tool: "send", Tier: sm.Irreversible, Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Reject(ctx, send.Effect.ID, model.Change{Actor: "alice", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	resume := model.Change{Actor: "ci", Reason: "let me go on"}
	if _, err := a.SetSessionState(ctx, "rs", sm.SessionActive, resume); !errors.Is(err, model.ErrDenied) {
		t.Fatalf("an agent resumes its halted session: %v", err)
	}
	if s, err := p.SetSessionState(ctx, "rs", sm.SessionActive, model.Change{Actor: "alice", Reason: "fixed"}); err != nil || s.State != sm.SessionActive {
		t.Fatalf("an approver resumes it: %+v %v", s, err)
	}
	if rep, err := p.Verify(ctx); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// The history gate lets the tables' owner through without its function, by
// the owner's oid: once the tables change owner, verify says the gate is the
// old owner's, and `undolog migrate` by the new owner makes it anew, after
// which the old owner (granted a writer's rights) may no longer write a
// record in another role's name.
func TestHistoryGateFollowsTheOwner(t *testing.T) {
	admin := pgtest.Server(t).NewDatabase(t)
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	suffix := regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.TrimPrefix(u.Path, "/"), "_")
	first, second := "own1_"+suffix, "own2_"+suffix
	rolesMu.Lock()
	for _, name := range []string{first, second} {
		execTB(t, admin, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN")
	}
	rolesMu.Unlock()
	t.Cleanup(func() {
		rolesMu.Lock()
		defer rolesMu.Unlock()
		if conn, err := pgx.Connect(context.Background(), pgtest.Server(t).AdminURL()); err == nil {
			conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()+" WITH (FORCE)")
			for _, name := range []string{first, second} {
				conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
			}
			conn.Close(context.Background())
		}
	})
	as := func(role string) string {
		v := *u
		v.User = url.User(role)
		return v.String()
	}
	execTB(t, admin, "ALTER DATABASE "+pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()+" OWNER TO "+pgx.Identifier{first}.Sanitize())
	firstLog := open(as(first))
	defer firstLog.Close()
	if _, err := firstLog.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Irreversible,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatal(err)
	}
	forge := `INSERT INTO undolog_history (effect_id, seq, rec, role, kind, to_state, trigger, actor)
		VALUES (1, 99, '\x00', '` + second + `', 'effect', 'approved', 'x', 'x')` // the names are [a-z0-9_]
	problems := func() []string {
		t.Helper()
		rep, err := open(admin).Verify(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range rep.Problems {
			if p.Kind == "roles" {
				got = append(got, p.Detail)
			}
		}
		return got
	}
	if got := problems(); len(got) != 0 {
		t.Fatalf("a gate of the tables' owner: %v", got)
	}
	execTB(t, admin, "REASSIGN OWNED BY "+pgx.Identifier{first}.Sanitize()+" TO "+pgx.Identifier{second}.Sanitize()+
		"; GRANT INSERT, SELECT ON undolog_history TO "+pgx.Identifier{first}.Sanitize()+
		"; GRANT SELECT ON undolog_meta TO "+pgx.Identifier{first}.Sanitize())
	if got := problems(); len(got) != 1 || !strings.Contains(got[0], "lets the members of "+first) || !strings.Contains(got[0], "run undolog migrate as "+second) {
		t.Fatalf("a gate of the owner before: %v", got)
	}
	if _, _, err := pgstore.New(as(first)).Migrate(t.Context()); err != nil {
		t.Fatalf("migrate by a role that is not the owner: %v", err)
	}
	if got := problems(); len(got) != 1 {
		t.Fatalf("migrate by a role that is not the owner changed the gate: %v", got)
	}
	if _, _, err := pgstore.New(as(second)).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := problems(); len(got) != 0 {
		t.Fatalf("after the owner's migrate: %v", got)
	}
	if err := rawExec(t, as(first), forge); err == nil || !strings.Contains(err.Error(), "may not write a record in the name of role "+second) {
		t.Fatalf("the owner before writes in another's name: %v", err)
	}
}
