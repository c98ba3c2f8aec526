package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage"
	"github.com/undolog/undolog/storage/internal/record"
)

// Records calls session and effect with every record the log holds, by id,
// and bad with every record it cannot read. Rows are read a page at a
// time and handed on after the page's query is done, so that session and
// effect can read the transaction (its connection runs one query at once).
func (r reader) Records(session func(model.Session), effect func(model.Effect), bad func(model.Problem)) error {
	type row struct {
		key  string
		data []byte
	}
	if session != nil {
		var all []row // sessions are few beside their effects
		err := r.rows(`SELECT id, rec FROM undolog_sessions ORDER BY id`, func(key string, data []byte) {
			all = append(all, row{key, data})
		})
		if err != nil {
			return err
		}
		for _, w := range all {
			var s model.Session
			if err := record.Decode(w.data, &s); err != nil || s.ID != w.key {
				bad(model.Problem{Kind: "record", Session: w.key, Detail: fmt.Sprintf("unreadable session record: %v", err)})
				continue
			}
			session(s)
		}
		if effect == nil {
			return nil
		}
	}
	const page = 1000
	for after, first := int64(0), true; ; first = false {
		var got []row
		last := after
		// e.id, not id: a bare name in ORDER BY is the output column, the
		// id as text, whose order ("10" before "9") pages past and over ids.
		query := fmt.Sprintf(`SELECT e.id::text, e.rec FROM undolog_effects e WHERE e.id > %d ORDER BY e.id LIMIT %d`, after, page)
		if first {
			query = fmt.Sprintf(`SELECT e.id::text, e.rec FROM undolog_effects e ORDER BY e.id LIMIT %d`, page)
		}
		err := r.rows(query, func(key string, data []byte) {
			got = append(got, row{key, data})
		})
		if err != nil {
			return err
		}
		for _, w := range got {
			if n, err := strconv.ParseInt(w.key, 10, 64); err == nil {
				last = n
			}
			var e model.Effect
			if err := record.Decode(w.data, &e); err != nil || fmt.Sprint(e.ID) != w.key {
				bad(model.Problem{Kind: "record", Detail: fmt.Sprintf("unreadable effect record %s", w.key)})
				continue
			}
			effect(e)
		}
		if len(got) < page || !first && last == after {
			return nil
		}
		after = last
	}
}

// rows calls fn with each (key, record) row of query.
func (r reader) rows(query string, fn func(key string, data []byte)) error {
	rows, err := r.tx.Query(r.ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var data []byte
		if err := rows.Scan(&key, &data); err != nil {
			return err
		}
		fn(key, data)
	}
	return rows.Err()
}

// CheckIndexes checks the columns and tables the engine keeps beside the
// records against them: each effect's indexed columns, each session's
// place in order, the signature owners, the open requests, and rows that
// belong to no record. (Keys and uniqueness are the schema's constraints.)
func (r reader) CheckIndexes(sessions map[string]*model.Session, effects *storage.EffectSet, add func(model.Problem)) error {
	report := func(kind string, effect uint64, session, format string, args ...any) {
		add(model.Problem{Kind: kind, Effect: effect, Session: session, Detail: fmt.Sprintf(format, args...)})
	}
	// Sessions' order, and their state beside the record (from the
	// migration to sessionStateSchema; NULL in a row not written since).
	query := `SELECT id, seq, NULL::text FROM undolog_sessions`
	if r.SchemaVersion() >= sessionStateSchema {
		query = `SELECT id, seq, state FROM undolog_sessions`
	}
	rows, err := r.tx.Query(r.ctx, query)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var seq int64
		var state *string
		if err := rows.Scan(&id, &seq, &state); err != nil {
			rows.Close()
			return err
		}
		s := sessions[id]
		if s != nil && s.Seq != uint64(seq) {
			report("index", 0, id, "the session's place in order is %d, its record says %d", seq, s.Seq)
		}
		if s != nil && state != nil && *state != string(s.State) {
			row, rec := model.Apart(*state, string(s.State))
			report("state", 0, id, "the session's row says %s, its record %s", row, rec)
		}
	}
	rows.Close()
	// Effects' indexed columns.
	rows, err = r.tx.Query(r.ctx, `SELECT id, session, tool, tier, state FROM undolog_effects`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		var session, tool, tier, state string
		if err := rows.Scan(&id, &session, &tool, &tier, &state); err != nil {
			rows.Close()
			return err
		}
		e, ok := effects.Get(uint64(id))
		if !ok {
			continue // unreadable: Records said so
		}
		for _, c := range []struct{ name, column, record string }{
			{"session", session, e.Session}, {"tool", tool, e.Tool}, {"tier", tier, e.Tier}, {"state", state, e.State},
		} {
			if c.column != c.record {
				column, rec := model.Apart(c.column, c.record)
				report("index", e.ID, "", "%s index entry %s disagrees with the record's %s", c.name, column, rec)
			}
		}
	}
	rows.Close()
	// Undo entries' state column (the index of undo states; NULL in a row
	// not written since it was added) beside the record: an approver may
	// write the column, and a listing by undo state reads it.
	query = `SELECT '', 0, ''::bytea, '' WHERE false`
	if r.SchemaVersion() >= undoStateSchema {
		query = `SELECT session, effect_id, rec, state FROM undolog_undo WHERE state IS NOT NULL`
	}
	rows, err = r.tx.Query(r.ctx, query)
	if err != nil {
		return err
	}
	for rows.Next() {
		var session, state string
		var id int64
		var data []byte
		if err := rows.Scan(&session, &id, &data, &state); err != nil {
			rows.Close()
			return err
		}
		var u model.UndoEntry
		if decode(data, &u, fmt.Sprintf("undo/%s/%d", session, id)) != nil {
			continue // unreadable: the effect's check says so
		}
		if state != string(u.State) {
			column, rec := model.Apart(state, string(u.State))
			report("index", uint64(id), session, "undo state index entry %s disagrees with the undo entry's %s", column, rec)
		}
	}
	rows.Close()
	// Signature owners, both ways.
	owners := map[string]uint64{}
	rows, err = r.tx.Query(r.ctx, `SELECT sig, effect_id FROM undolog_signatures`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var sig string
		var id int64
		if err := rows.Scan(&sig, &id); err != nil {
			rows.Close()
			return err
		}
		owners[sig] = uint64(id)
		if e, ok := effects.Get(uint64(id)); !ok || e.CallSignature != sig || e.Replay {
			report("index", uint64(id), "", "signature index entry %.16s is dangling", sig)
		}
	}
	rows.Close()
	effects.Each(func(_ int, e storage.EffectKeys) {
		// A call run again after its answer reached the client has a later
		// effect, which owns the signature (effectlog checks the earlier
		// one was answered).
		if o := owners[e.CallSignature]; !e.Replay && o != e.ID {
			if owner, found := effects.Get(o); !storage.LaterOwner(owner, found, e) {
				report("index", e.ID, "", "signature index does not point at the effect")
			}
		}
	})
	// Rows that belong to no record.
	for _, q := range []struct{ query, what string }{
		{`SELECT h.effect_id FROM undolog_history h LEFT JOIN undolog_effects e ON e.id = h.effect_id WHERE e.id IS NULL`, "history record"},
		{`SELECT u.effect_id FROM undolog_undo u LEFT JOIN undolog_effects e ON e.id = u.effect_id AND e.session = u.session WHERE e.id IS NULL`, "undo entry"},
		{`SELECT a.effect_id FROM undolog_approvals a LEFT JOIN undolog_effects e ON e.id = a.effect_id WHERE e.id IS NULL`, "approval request"},
	} {
		ids, err := r.ids(q.query)
		if err != nil {
			return err
		}
		for _, id := range ids {
			report("reference", id, "", "%s belongs to no effect", q.what)
		}
	}
	orphans, err := r.tx.Query(r.ctx, `SELECT DISTINCT h.session FROM undolog_session_history h
		LEFT JOIN undolog_sessions s ON s.id = h.session WHERE s.id IS NULL`)
	if err != nil {
		return err
	}
	for orphans.Next() {
		var session string
		if err := orphans.Scan(&session); err != nil {
			orphans.Close()
			return err
		}
		report("history", 0, session, "session history belongs to no session")
	}
	orphans.Close()
	// The columns of history rows the database's role checks read (see
	// rolesSchema) against the records beside them: a row whose columns
	// say another move than its record got past those checks. Rows written
	// before have none.
	if r.SchemaVersion() >= rolesSchema { // a database not yet migrated has no such columns
		if err := r.checkHistoryColumns(report); err != nil {
			return err
		}
	}
	if err := r.checkFeed(report); err != nil {
		return err
	}
	if r.SchemaVersion() >= queueSchema {
		if err := r.checkGate(report); err != nil {
			return err
		}
	}
	// Open requests against the requests.
	open := map[uint64]openEntry{}
	var openIDs []uint64
	rows, err = r.tx.Query(r.ctx, `SELECT effect_id, session, expires FROM undolog_approvals_open ORDER BY effect_id`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, expires int64
		var session string
		if err := rows.Scan(&id, &session, &expires); err != nil {
			rows.Close()
			return err
		}
		open[uint64(id)] = openEntry{session, expires}
		openIDs = append(openIDs, uint64(id))
		switch e, ok := effects.Get(uint64(id)); {
		case !ok:
			report("index", uint64(id), "", "pending approval entry is dangling")
		case e.Session != session:
			entry, effect := model.Apart(session, e.Session)
			report("index", uint64(id), "", "pending approval entry is under session %s, the effect's %s", entry, effect)
		}
	}
	rows.Close()
	// The requests there are, rather than a query per effect: most effects
	// have none.
	requests, err := r.ids(`SELECT effect_id FROM undolog_approvals ORDER BY effect_id`)
	if err != nil {
		return err
	}
	made := map[uint64]bool{}
	for _, id := range requests {
		made[id] = true
	}
	for _, id := range openIDs {
		if _, ok := effects.Get(id); ok && !made[id] {
			// It would count a request as waiting that was never made.
			report("index", id, "", "pending approval entry names no request")
		}
	}
	for _, id := range requests {
		if e, ok := effects.Get(id); !ok || e.Replay {
			continue // an effect with no record: the rules report its request
		}
		a, err := r.Approval(id)
		if err != nil || a == nil {
			continue // the rules report a missing or unreadable request
		}
		entry, isOpen := open[id]
		if (a.Outcome == model.ApprovalPending) != isOpen {
			outcome, _ := model.Apart(a.Outcome, model.ApprovalPending) // a lookalike of pending reads apart
			report("index", id, "", "approval is %s but pending index entry=%v", outcome, isOpen)
		}
		if isOpen {
			var want int64
			if a.ExpiresAt != nil {
				want = a.ExpiresAt.UnixNano()
			}
			if entry.expires != want {
				report("index", id, "", "pending index entry expires at %d, the request at %d", entry.expires, want)
			}
		}
	}
	return nil
}

type openEntry struct {
	session string
	expires int64
}

// checkHistoryColumns reports each history row whose role, kind, target
// state, trigger or actor column disagrees with its record.
func (r reader) checkHistoryColumns(report func(kind string, effect uint64, session, format string, args ...any)) error {
	for _, q := range []struct {
		query   string
		session bool
	}{
		{`SELECT effect_id, '', seq, rec, role, kind, to_state, trigger, actor FROM undolog_history
			WHERE role <> '' OR kind <> '' ORDER BY effect_id, seq`, false},
		{`SELECT 0, session, seq, rec, role, 'session', to_state, trigger, '' FROM undolog_session_history
			WHERE role <> '' OR to_state <> '' ORDER BY session, seq`, true},
	} {
		rows, err := r.tx.Query(r.ctx, q.query)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			var seq int32
			var session, role, kind, to, trigger, actor string
			var data []byte
			if err := rows.Scan(&id, &session, &seq, &data, &role, &kind, &to, &trigger, &actor); err != nil {
				rows.Close()
				return err
			}
			var h model.HistoryRecord
			if record.Decode(data, &h) != nil {
				continue // the history's reader reports it
			}
			if q.session {
				h.Kind, h.Actor = "session", ""
			}
			for _, c := range []struct{ name, column, record string }{
				{"role", role, h.Role}, {"kind", kind, h.Kind}, {"to", to, h.To}, {"trigger", trigger, h.Trigger}, {"actor", actor, h.Actor},
			} {
				if c.column != c.record {
					column, rec := model.Apart(c.column, c.record)
					report("history", uint64(id), session, "history record %d: its row's %s %s disagrees with the record's %s", seq, c.name, column, rec)
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}

// feedChecks find change-feed rows that name no history record, or one
// another row names too, and gaps in the positions. A writer puts rows in
// undolog_changes through undolog_publish, whose arrays it gives (and
// before schema 8 directly), so the feed is checked like the indexes. gc keeps change rows but drops the
// records: a row of an effect or session gc dropped is not judged. Effect
// ids are never reused; a session's name may be, after gc, so a session's
// rows are judged from the newest row naming its first record (seq 1) on,
// and none while the queue holds one (its writer's publish is to come):
// a forged one of those is not told from a session made anew, and hides
// the rows before it from these checks (but not from the gap check).
var feedChecks = []struct {
	query, detail string
	gap           bool // the second column is the position before, not an effect
}{
	{`SELECT c.pos, c.effect_id, c.session, c.seq FROM undolog_changes c
		JOIN undolog_effects e ON e.id = c.effect_id
		LEFT JOIN undolog_history h ON h.effect_id = c.effect_id AND h.seq = c.seq
		WHERE c.kind = 'E' AND h.effect_id IS NULL ORDER BY c.pos`,
		"change %[1]d names history record %[4]d, which the effect does not have", false},
	{`SELECT c.pos, c.effect_id, c.session, c.seq FROM undolog_changes c
		JOIN undolog_effects e ON e.id = c.effect_id
		WHERE c.kind = 'E' AND c.session <> e.session ORDER BY c.pos`,
		"change %[1]d names the effect in session %[3]q, which is not its", false},
	{`SELECT pos, effect_id, session, seq FROM (
			SELECT pos, effect_id, session, seq, row_number() OVER (PARTITION BY effect_id, seq ORDER BY pos) AS n
			FROM undolog_changes WHERE kind = 'E') c
		WHERE n > 1 ORDER BY pos`,
		"change %[1]d names history record %[4]d, which an earlier change names", false},
	{`WITH c AS (
			SELECT c.*, CASE WHEN queued_first(c.session) THEN 9223372036854775807 ELSE max(c.pos) FILTER (WHERE c.seq = 1) OVER (PARTITION BY c.session) END AS since
			FROM undolog_changes c JOIN undolog_sessions s ON s.id = c.session WHERE c.kind = 'S')
		SELECT c.pos, 0, c.session, c.seq FROM c
		LEFT JOIN undolog_session_history h ON h.session = c.session AND h.seq = c.seq
		WHERE c.pos >= coalesce(c.since, 0) AND h.session IS NULL ORDER BY c.pos`,
		"change %[1]d names session history record %[4]d, which the session does not have", false},
	{`WITH c AS (
			SELECT c.*, CASE WHEN queued_first(c.session) THEN 9223372036854775807 ELSE max(c.pos) FILTER (WHERE c.seq = 1) OVER (PARTITION BY c.session) END AS since
			FROM undolog_changes c JOIN undolog_sessions s ON s.id = c.session WHERE c.kind = 'S')
		SELECT pos, 0, session, seq FROM (
			SELECT pos, session, seq, row_number() OVER (PARTITION BY session, seq ORDER BY pos) AS n
			FROM c WHERE pos >= coalesce(since, 0)) d
		WHERE n > 1 ORDER BY pos`,
		"change %[1]d names session history record %[4]d, which an earlier change names", false},
	{`SELECT pos, effect_id, session, seq FROM undolog_changes WHERE kind NOT IN ('E', 'S') ORDER BY pos`,
		"change %[1]d is of no kind the feed has", false},
	// Positions are given one after another from 1 and change rows are
	// never deleted: a gap is a row written past undolog_publish (a huge
	// position would make every later one follow it).
	{`SELECT pos, prev, '', 0 FROM (
			SELECT pos, lag(pos, 1, 0::bigint) OVER (ORDER BY pos) AS prev FROM undolog_changes) c
		WHERE pos <> prev + 1 ORDER BY pos`,
		"change %[1]d follows change %[2]d: the positions between are missing", true},
}

// gateOwners is where the history gates (undolog_gate_history, the
// migration to queueSchema) stand: the owner they were made for, the owners
// of the tables they guard, and whether the role reading owns them.
type gateOwners struct {
	gate, history, sessionHistory int64
	gateName, historyName         string // pg_get_userbyid's: a dropped role is "unknown (OID=n)"
	mine                          bool
}

// stale says the tables changed owner since the gates were made: their WHEN
// clauses let the old owner's members write any record.
func (g gateOwners) stale() bool { return g.gate != g.history || g.gate != g.sessionHistory }

// readGateOwners reads where the gates stand; pgx.ErrNoRows: they name no owner.
func readGateOwners(ctx context.Context, q querier) (gateOwners, error) {
	var g gateOwners
	err := q.QueryRow(ctx, `SELECT m.value, pg_get_userbyid(m.value::oid)::text, c.relowner::bigint, pg_get_userbyid(c.relowner)::text,
			s.relowner::bigint, undolog_is_owner(c.oid)
		FROM undolog_meta m, pg_catalog.pg_class c, pg_catalog.pg_class s
		WHERE m.key = 'history_gate_owner' AND c.oid = to_regclass(quote_ident(current_schema()) || '.undolog_history')
			AND s.oid = to_regclass(quote_ident(current_schema()) || '.undolog_session_history')`).
		Scan(&g.gate, &g.gateName, &g.history, &g.historyName, &g.sessionHistory, &g.mine)
	return g, err
}

// checkGate reports history gates made for another owner than the tables'.
func (r reader) checkGate(report func(kind string, effect uint64, session, format string, args ...any)) error {
	g, err := readGateOwners(r.ctx, r.tx)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		report("roles", 0, "", "the history gate names no owner: run undolog migrate as the tables' owner")
	case err != nil:
		return err
	case g.stale():
		report("roles", 0, "", "the history gate lets the members of %s write any record, but the tables are %s's now: run undolog migrate as %s",
			g.gateName, g.historyName, g.historyName)
	}
	return nil
}

// queuedFirst is what queued_first(session) stands for in feedChecks: the
// queue holds the first record of a session of that name. Before
// queueSchema a reader may not read the queue (its records were queued
// only while another writer gave positions).
func (r reader) queuedFirst() string {
	if r.SchemaVersion() < queueSchema {
		return "FALSE"
	}
	return "EXISTS (SELECT 1 FROM undolog_changes_pending p WHERE p.kind = 'S' AND p.session = c.session AND p.seq = 1)"
}

// checkFeed reports the change-feed rows feedChecks find.
func (r reader) checkFeed(report func(kind string, effect uint64, session, format string, args ...any)) error {
	queued := r.queuedFirst()
	for _, c := range feedChecks {
		query := strings.ReplaceAll(c.query, "queued_first(c.session)", queued)
		rows, err := r.tx.Query(r.ctx, query)
		if err != nil {
			return err
		}
		for rows.Next() {
			var pos, id int64
			var session string
			var seq int32
			if err := rows.Scan(&pos, &id, &session, &seq); err != nil {
				rows.Close()
				return err
			}
			effect := uint64(max(id, 0))
			if c.gap {
				effect = 0
			}
			report("feed", effect, session, c.detail, pos, id, session, seq)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}
