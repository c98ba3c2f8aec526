package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/pgstore"
)

// undologTables are every table of undolog's schema.
var undologTables = []string{"undolog_meta", "undolog_counters", "undolog_sessions", "undolog_effects",
	"undolog_history", "undolog_session_history", "undolog_signatures", "undolog_undo", "undolog_approvals",
	"undolog_approvals_open", "undolog_changes", "undolog_changes_pending", "undolog_feed_floor"}

// userOf is the role a postgres:// URL logs in as.
func userOf(t *testing.T, addr string) string {
	t.Helper()
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatal(err)
	}
	return u.User.Username()
}

// heldLog is a log of roles with an irreversible call waiting in session
// "s" (effect 1) and session "h" halted by a person's rejection of its own
// (effect 2); it returns the owner's, agent's and approver's URLs.
func heldLog(t *testing.T) (owner, agent, approver string) {
	t.Helper()
	return heldLogIn(t, "")
}

// heldLogIn is heldLog with undolog's tables in schema ("": public).
func heldLogIn(t *testing.T, schema string) (owner, agent, approver string) {
	t.Helper()
	owner, agent, approver, _ = withRolesIn(t, schema)
	log := open(agent)
	defer log.Close()
	for _, s := range []string{"s", "h"} {
		if _, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: s, Tool: "wire", Tier: sm.Irreversible,
			Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
			t.Fatal(err)
		}
	}
	decider := open(approver)
	defer decider.Close()
	if _, err := decider.Reject(t.Context(), 2, model.Change{Actor: "alice", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_sessions WHERE id = 'h' AND state = 'halted'`); n != 1 {
		t.Fatal("session h is not halted")
	}
	return owner, agent, approver
}

// agentForgeries are writes an agent may not make, each with what its
// refusal says; they name undolog's tables by their schema, as a client
// that made tables of the same names would.
func agentForgeries(agent string) []struct{ name, sql, want string } {
	return agentForgeriesIn(agent, "public")
}

func agentForgeriesIn(agent, schema string) []struct{ name, sql, want string } {
	forgeries := []struct{ name, sql, want string }{
		{"effect row to approved", `UPDATE public.undolog_effects SET state = 'approved' WHERE id = 1`, "may not approve"},
		{"approval record", `INSERT INTO public.undolog_history (effect_id, seq, rec, role, kind, to_state, trigger, actor)
			VALUES (1, 99, '\x0348', '` + agent + `', 'effect', 'approved', 'x', 'x')`, "may not approve"},
		{"halted session's record", `INSERT INTO public.undolog_session_history (session, seq, rec, role, to_state, trigger)
			VALUES ('h', 99, '\x0348', '` + agent + `', 'active', 'Session created')`, "may not move halted session h"},
		{"halted session's row", `UPDATE public.undolog_sessions SET state = 'active' WHERE id = 'h'`, "may not move halted session h"},
	}
	for i := range forgeries {
		forgeries[i].sql = strings.ReplaceAll(forgeries[i].sql, "public.", schema+".")
	}
	return forgeries
}

// refusedEach runs each forgery on conn in a savepoint of its own and
// reports one that was not refused as the roles say.
func refusedEach(t *testing.T, conn *pgx.Conn, context string, forgeries []struct{ name, sql, want string }) {
	t.Helper()
	for _, f := range forgeries {
		if _, err := conn.Exec(t.Context(), `SAVEPOINT forgery`); err != nil {
			t.Fatal(err)
		}
		_, err := conn.Exec(t.Context(), f.sql)
		if _, rerr := conn.Exec(t.Context(), `ROLLBACK TO SAVEPOINT forgery`); rerr != nil {
			t.Fatal(rerr)
		}
		var pe *pgconn.PgError
		if err == nil || !strings.Contains(err.Error(), f.want) || !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s: %s: %v, want refused (42501) saying %q", context, f.name, err, f.want)
		}
	}
}

// A temporary table comes first in a client's search_path: one named like
// any of undolog's tables, empty, changes nothing the checks decide.
func TestATemporaryTableOfEachNameChangesNoCheck(t *testing.T) {
	temporaryTablesChangeNoCheck(t, "public")
}

// So it is with undolog's tables in a schema of their own.
func TestTemporaryTablesInOwnSchema(t *testing.T) {
	temporaryTablesChangeNoCheck(t, "ulog")
}

func temporaryTablesChangeNoCheck(t *testing.T, schema string) {
	in := schema
	if schema == "public" {
		in = ""
	}
	owner, agent, _ := heldLogIn(t, in)
	conn, err := pgx.Connect(t.Context(), agent)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	forgeries := agentForgeriesIn(userOf(t, agent), schema)
	conn.Exec(t.Context(), `BEGIN`)
	refusedEach(t, conn, "no temporary table", forgeries)
	conn.Exec(t.Context(), `ROLLBACK`)
	for _, table := range undologTables {
		columns := `LIKE ` + schema + `.` + table
		if table == "undolog_feed_floor" { // no role but the owner reads it
			columns = `one boolean, below bigint, next bigint, next_xid xid8`
		}
		if _, err := conn.Exec(t.Context(), `BEGIN; CREATE TEMP TABLE `+table+` (`+columns+`)`); err != nil {
			t.Fatal(err)
		}
		refusedEach(t, conn, "temporary "+table, forgeries)
		if _, err := conn.Exec(t.Context(), `ROLLBACK`); err != nil {
			t.Fatal(err)
		}
	}
	var config []string
	if err := conn.QueryRow(t.Context(), `SELECT p.proconfig FROM pg_proc p
		WHERE p.oid = 'undolog_check_session_record'::regproc`).Scan(&config); err != nil || !slices.Equal(config, []string{"search_path=" + schema + ", pg_temp"}) {
		t.Errorf("the session record gate's settings: %v %v", config, err)
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_history WHERE seq = 99`) +
		count(t, owner, `SELECT count(*) FROM undolog_session_history WHERE seq = 99`) +
		count(t, owner, `SELECT count(*) FROM undolog_sessions WHERE state <> 'halted' AND id = 'h'`); n != 0 {
		t.Fatalf("%d forged rows", n)
	}
}

// A function of the client's own schema, placed before pg_catalog in its
// search_path, does not stand in for the one a check calls; and every
// function of undolog's names its own search_path, pg_temp last (pg_catalog
// first, unnamed).
func TestAFunctionOfTheCallersSchemaChangesNoCheck(t *testing.T) {
	owner, agent, _ := heldLog(t)
	name := pgx.Identifier{userOf(t, agent)}.Sanitize()
	exec(t, owner, `CREATE SCHEMA mine AUTHORIZATION `+name)
	conn, err := pgx.Connect(t.Context(), agent)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `CREATE FUNCTION mine.pg_has_role(name, oid, text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
		SET search_path = mine, pg_catalog, public; BEGIN`); err != nil {
		t.Fatal(err)
	}
	refusedEach(t, conn, "pg_has_role of the agent's", agentForgeries(userOf(t, agent)))
	conn.Exec(t.Context(), `ROLLBACK`)

	rows, err := pgx.Connect(t.Context(), owner)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close(context.Background())
	var loose []string
	if err := rows.QueryRow(t.Context(), `SELECT coalesce(array_agg(p.oid::regprocedure::text ORDER BY p.proname), '{}') FROM pg_proc p
		WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'undolog\_%'
		AND NOT coalesce(p.proconfig @> ARRAY['search_path=public, pg_temp'], false)`).Scan(&loose); err != nil {
		t.Fatal(err)
	}
	if len(loose) > 0 {
		t.Fatalf("functions without a search_path of their own: %v", loose)
	}
}

// lockModes are the modes of LOCK TABLE stronger than ACCESS SHARE (a
// read's).
var lockModes = []string{"ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE", "SHARE", "SHARE ROW EXCLUSIVE",
	"EXCLUSIVE", "ACCESS EXCLUSIVE"}

// unlockedRows are the tables whose rows no writer's own statements lock
// (they only add to them, or do not write them): no writer may lock one.
var unlockedRows = []string{"undolog_meta", "undolog_counters", "undolog_history", "undolog_session_history",
	"undolog_changes", "undolog_changes_pending", "undolog_feed_floor"}

// refused runs sql in a transaction of its own on conn and says whether
// the server refused it for want of privilege.
func refused(t *testing.T, conn *pgx.Conn, sql string) (bool, error) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), `BEGIN`); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Exec(t.Context(), sql)
	if _, rerr := conn.Exec(t.Context(), `ROLLBACK`); rerr != nil {
		t.Fatal(rerr)
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42501", err
}

// A writer cannot freeze the shared log: it may lock no table whole, in
// any mode but a read's, nor lock rows of a table its own statements only
// add to; an agent, no undo entry (an undo's to change). Meanwhile the
// approver's decision goes through.
func TestWritersCannotLockTheLog(t *testing.T) {
	owner, agent, approver := heldLog(t)
	for _, addr := range []string{agent, approver} {
		conn, err := pgx.Connect(t.Context(), addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		role := userOf(t, addr)
		for _, table := range undologTables {
			for _, mode := range lockModes {
				if ok, err := refused(t, conn, `LOCK TABLE public.`+table+` IN `+mode+` MODE NOWAIT`); !ok {
					t.Errorf("%s: LOCK TABLE %s IN %s MODE: %v", role, table, mode, err)
				}
			}
		}
		rowTables := unlockedRows
		if addr == agent {
			rowTables = append(slices.Clip(rowTables), "undolog_undo")
		}
		for _, table := range rowTables {
			for _, strength := range []string{"UPDATE", "NO KEY UPDATE", "SHARE", "KEY SHARE"} {
				if ok, err := refused(t, conn, `SELECT 1 FROM public.`+table+` FOR `+strength+` NOWAIT`); !ok {
					t.Errorf("%s: SELECT FROM %s FOR %s: %v", role, table, strength, err)
				}
			}
		}
		for _, sql := range []string{`DELETE FROM public.undolog_approvals_open`, `TRUNCATE public.undolog_approvals_open`,
			`UPDATE public.undolog_sessions SET id = 'x' WHERE id = 's'`} {
			if ok, err := refused(t, conn, sql); !ok {
				t.Errorf("%s: %s: %v", role, sql, err)
			}
		}
	}
	decider := open(approver)
	defer decider.Close()
	if _, err := decider.Approve(t.Context(), 1, model.Change{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_approvals_open WHERE effect_id = 1`); n != 0 {
		t.Fatalf("the decided request is still open")
	}
}

// A setup made before schema 11 granted writers whole tables: migrating
// takes those grants back (and RolesSQL, run again, does too); the
// writers go on writing.
func TestTableGrantsOfAnEarlierSetupAreTakenBack(t *testing.T) {
	owner, agent, approver, _ := withRoles(t)
	const earlier = `GRANT INSERT, UPDATE ON undolog_sessions, undolog_effects,
		undolog_history, undolog_session_history, undolog_signatures, undolog_undo,
		undolog_approvals, undolog_approvals_open TO undolog_agent, undolog_approver;
		GRANT DELETE ON undolog_approvals_open TO undolog_agent, undolog_approver`
	lockable := func() bool {
		t.Helper()
		conn, err := pgx.Connect(t.Context(), agent)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		ok, _ := refused(t, conn, `LOCK TABLE undolog_effects IN ACCESS EXCLUSIVE MODE NOWAIT`)
		return !ok
	}
	rolesMu.Lock()
	execTB(t, owner, earlier)
	rolesMu.Unlock()
	if !lockable() {
		t.Fatal("the earlier grants do not let an agent lock a table")
	}
	// Back to schema 10: without what 11 made.
	exec(t, owner, `DROP FUNCTION undolog_close_request(bigint), undolog_check_request_closed(), undolog_check_record(), undolog_check_undo_row() CASCADE;
		UPDATE undolog_meta SET value = 10 WHERE key = 'schema_version'`)
	if before, after, err := pgstore.New(owner).Migrate(t.Context()); err != nil || before != 10 {
		t.Fatalf("migrate: %d -> %d, %v", before, after, err)
	}
	if lockable() {
		t.Fatal("after migrating an agent still locks a table")
	}
	rolesMu.Lock()
	execTB(t, owner, earlier)
	execTB(t, owner, pgstore.RolesSQL)
	rolesMu.Unlock()
	if lockable() {
		t.Fatal("after RolesSQL an agent still locks a table")
	}
	writer := open(agent)
	defer writer.Close()
	res, err := writer.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "wire", Tier: sm.Irreversible,
		Args: json.RawMessage(`{}`), CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open(approver).Approve(t.Context(), res.Effect.ID, model.Change{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []func(context.Context, uint64, model.Change) (model.Effect, error){writer.Start, writer.Commit} {
		if _, err := step(t.Context(), res.Effect.ID, model.Change{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A writer other than the owner writes only records of the form undolog
// writes, in every table of records, and an agent moves no undo entry
// (nor writes one that is not pending): the refusals name the role.
func TestWritersWriteOnlyWhatUndologWrites(t *testing.T) {
	owner, agent, approver := heldLog(t)
	log := open(agent)
	defer log.Close()
	res, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "c", Tool: "put", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatUint(res.Effect.ID, 10)
	before := count(t, owner, `SELECT count(*) FROM undolog_history`) + count(t, owner, `SELECT count(*) FROM undolog_session_history`)
	name, other := userOf(t, agent), userOf(t, approver)
	forged := `'record undolog cannot read'::bytea`
	for _, c := range []struct {
		who, name, sql, want string
	}{
		{agent, "undecodable history record", `INSERT INTO undolog_history (effect_id, seq, rec, role, kind, to_state, trigger, actor)
			VALUES (1, 99, ` + forged + `, '` + name + `', 'effect', 'pending', 'Intercept', 'x')`, "may not write into undolog_history a record undolog does not write"},
		{agent, "blank history record", `INSERT INTO undolog_history (effect_id, seq, rec, role, kind, to_state, trigger, actor)
			VALUES (1, 99, '', '` + name + `', 'effect', 'pending', 'Intercept', 'x')`, "may not write into undolog_history"},
		{agent, "undecodable session record", `INSERT INTO undolog_session_history (session, seq, rec, role, to_state, trigger)
			VALUES ('s', 99, ` + forged + `, '` + name + `', 'active', 'x')`, "may not write into undolog_session_history"},
		{agent, "blank session", `UPDATE undolog_sessions SET rec = '' WHERE id = 's'`, "may not write into undolog_sessions"},
		{agent, "blank effect", `UPDATE undolog_effects SET rec = '' WHERE id = 1`, "may not write into undolog_effects"},
		{agent, "undecodable approval", `UPDATE undolog_approvals SET rec = ` + forged + ` WHERE effect_id = 1`, "may not write into undolog_approvals"},
		{agent, "blank undo record", `INSERT INTO undolog_undo (session, effect_id, rec, state) VALUES ('c', 98, '', 'pending')`, "may not write into undolog_undo"},
		{agent, "undo entry blanked", `UPDATE undolog_undo SET rec = '' WHERE effect_id = ` + id, "permission denied for table undolog_undo"},
		{agent, "undo entry set compensated", `UPDATE undolog_undo SET state = 'compensated' WHERE effect_id = ` + id, "permission denied for table undolog_undo"},
		{agent, "undo entry written compensated", `INSERT INTO undolog_undo (session, effect_id, rec, state)
			SELECT 'c', 98, rec, 'compensated' FROM undolog_undo WHERE effect_id = ` + id, "may not undo: it is not a member of undolog_approver"},
		{approver, "undo entry blanked by an approver", `UPDATE undolog_undo SET rec = '' WHERE effect_id = ` + id, "may not write into undolog_undo"},
		{approver, "undecodable record by an approver", `INSERT INTO undolog_history (effect_id, seq, rec, role, kind, to_state, trigger, actor)
			VALUES (1, 99, ` + forged + `, '` + other + `', 'effect', 'approved', 'x', 'x')`, "may not write into undolog_history"},
	} {
		err := rawExec(t, c.who, c.sql)
		var pe *pgconn.PgError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &pe) || pe.Code != "42501" || !strings.Contains(err.Error(), userOf(t, c.who)) && pe.Message != "permission denied for table undolog_undo" {
			t.Errorf("%s: %v, want refused saying %q", c.name, err, c.want)
		}
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_history`) + count(t, owner, `SELECT count(*) FROM undolog_session_history`); n != before {
		t.Fatalf("%d history rows, had %d", n, before)
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_undo WHERE state <> 'pending' OR effect_id = 98 OR rec = ''`); n != 0 {
		t.Fatalf("%d forged undo entries", n)
	}
	if rep, err := log.Verify(t.Context()); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
	// The owner's writes are its own (gc, import, and mending a row).
	if err := rawExec(t, owner, `UPDATE undolog_undo SET rec = rec, state = 'skipped' WHERE effect_id = `+id); err != nil {
		t.Fatalf("the owner: %v", err)
	}
}

// The feed names each record once, and only records that are there: a
// writer's undolog_publish, or its queue rows, that name a record a change
// already names, none, or an effect under another session's name give no
// position (a follower got the record twice, and verify failed for every
// role from then on); its own changes still come, after the others.
func TestAWriterForgesNoChange(t *testing.T) {
	owner, agent, _ := heldLog(t)
	conn, err := pgx.Connect(t.Context(), agent)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	before := count(t, owner, `SELECT count(*) FROM undolog_changes`)
	for _, sql := range []string{
		`SELECT undolog_publish(true, ARRAY['E', 'E', 'E', 'S', 'S', 'X'], ARRAY[1, 999, 2, 0, 0, 1]::bigint[],
			ARRAY['s', 's', 's', 's', 'nosuch', 's'], ARRAY[1, 1, 1, 2, 1, 1])`,
		`INSERT INTO undolog_changes_pending (kind, effect_id, session, seq) VALUES ('E', 1, 's', 1), ('S', 0, 'h', 3), ('S', 0, 's', 77)`,
		`SELECT undolog_publish_queue(true)`,
	} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if after := count(t, owner, `SELECT count(*) FROM undolog_changes`); after != before {
		t.Errorf("the feed went from %d changes to %d on forged ones", before, after)
	}
	writer := open(agent)
	defer writer.Close()
	if _, err := writer.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s2", Tool: "wire", Tier: sm.Irreversible,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatal(err)
	}
	changes, _, err := writer.Changes(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range changes {
		key := c.Record.Session + "/" + strconv.FormatUint(c.Record.EffectID, 10) + "/" + strconv.Itoa(int(c.Record.Seq))
		if seen[key] {
			t.Errorf("the feed gives record %s twice (position %d)", key, c.Position)
		}
		seen[key] = true
	}
	if !seen["s2/3/1"] {
		t.Errorf("the writer's own intercept is not in the feed: %v", seen)
	}
	rep, err := open(owner).Verify(t.Context())
	if err != nil || len(rep.Problems) != 0 {
		t.Errorf("verify: %q %v", rep.Problems, err)
	}
}

// An agent closes a waiting request only as undolog does, with its session
// stopping: undolog_close_request of another call's request, whose session
// still waits for the decision, is refused at the commit (it took the call
// out of every approver's queue); a session failed closes its requests.
func TestAnAgentClosesNoRequestItsSessionWaitsFor(t *testing.T) {
	owner, agent, _ := heldLog(t)
	conn, err := pgx.Connect(t.Context(), agent)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), `SELECT undolog_close_request(1)`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42501" || !strings.Contains(pe.Message, "may not close the request of effect 1") {
		t.Errorf("an agent's close of a waiting request: %v, want refused (42501)", err)
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_approvals_open WHERE effect_id = 1`); n != 1 {
		t.Fatalf("the request is closed")
	}
	log := open(agent)
	defer log.Close()
	if _, err := log.SetSessionState(t.Context(), "s", sm.SessionFailed, model.Change{Reason: "gave up"}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, owner, `SELECT count(*) FROM undolog_approvals_open`); n != 0 {
		t.Errorf("%d requests open after their session failed", n)
	}
}

// No writer can hold the feed: its lock is a row only the owner may lock,
// not an advisory lock, which any role may take and keep without a
// transaction (every publish waited, and no follower saw a change). With
// the key the feed used held, and the row refused, an approver's decision
// still reaches the feed.
func TestAWriterCannotHoldTheFeed(t *testing.T) {
	_, agent, approver := heldLog(t)
	conn, err := pgx.Connect(t.Context(), agent)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `SELECT pg_advisory_lock(8461811179599128432)`); err != nil {
		t.Fatal(err)
	}
	if ok, err := refused(t, conn, `SELECT 1 FROM undolog_feed_floor FOR UPDATE NOWAIT`); !ok {
		t.Errorf("an agent's lock of the feed's row: %v", err)
	}
	decider := open(approver)
	defer decider.Close()
	if _, err := decider.Approve(t.Context(), 1, model.Change{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	changes, _, err := decider.Changes(ctx, 0, 0)
	if err != nil {
		t.Fatalf("the feed, while an agent holds an advisory lock: %v", err)
	}
	if !slices.ContainsFunc(changes, func(c effectlog.ChangeRecord) bool { return c.Record.EffectID == 1 && c.Record.To == "approved" }) {
		t.Errorf("the approval is not in the feed: %d changes", len(changes))
	}
}

// An advisory lock needs no privilege: an agent holding the one that keeps
// two migrations apart holds off no migrate of a database already at this
// build's schema (every migrate waited for it, then failed as busy).
func TestAWriterCannotHoldOffMigrate(t *testing.T) {
	owner, agent, _ := heldLog(t)
	conn, err := pgx.Connect(t.Context(), agent)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `SELECT pg_advisory_lock(33053949920309095)`); err != nil { // 0x756e646f6c6f67, "undolog"
		t.Fatal(err)
	}
	e := pgstore.New(owner)
	defer e.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if before, after, err := e.Migrate(ctx); err != nil || before != pgstore.SchemaVersion || after != pgstore.SchemaVersion {
		t.Fatalf("migrate while an agent holds the migration's advisory lock: %d -> %d, %v", before, after, err)
	}
}
