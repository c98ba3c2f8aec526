package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
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
	owner, agent, approver, _ = withRoles(t)
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
	return []struct{ name, sql, want string }{
		{"effect row to approved", `UPDATE public.undolog_effects SET state = 'approved' WHERE id = 1`, "may not approve"},
		{"approval record", `INSERT INTO public.undolog_history (effect_id, seq, rec, role, kind, to_state, trigger, actor)
			VALUES (1, 99, '\x0348', '` + agent + `', 'effect', 'approved', 'x', 'x')`, "may not approve"},
		{"halted session's record", `INSERT INTO public.undolog_session_history (session, seq, rec, role, to_state, trigger)
			VALUES ('h', 99, '\x0348', '` + agent + `', 'active', 'Session created')`, "may not move halted session h"},
		{"halted session's row", `UPDATE public.undolog_sessions SET state = 'active' WHERE id = 'h'`, "may not move halted session h"},
	}
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
	owner, agent, _ := heldLog(t)
	conn, err := pgx.Connect(t.Context(), agent)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	forgeries := agentForgeries(userOf(t, agent))
	conn.Exec(t.Context(), `BEGIN`)
	refusedEach(t, conn, "no temporary table", forgeries)
	conn.Exec(t.Context(), `ROLLBACK`)
	for _, table := range undologTables {
		columns := `LIKE public.` + table
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
