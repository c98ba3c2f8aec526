package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage"
)

// RolesSQL creates undolog's three group roles and grants them the tables
// (writers by column: none may lock a table whole), run by the owner of the tables (the role that ran `undolog migrate`)
// with the right to create roles. Table privileges cannot tell an approval
// from a commit: the triggers of the migration to rolesSchema do, by
// membership of these groups. It can be run again: a role that exists is
// kept. undolog_publish runs with its owner's rights (schema migration 8),
// and only writers may call it: the feed is its alone, and writers may
// only add to its queue (migration 9), so that no writer deletes the
// changes others queued.
const RolesSQL = `-- undolog's database roles. Run as the owner of undolog's tables (the role
-- that ran undolog migrate), once per database; it can be run again.
DO $$
DECLARE
	name text;
BEGIN
	FOREACH name IN ARRAY ARRAY['undolog_reader', 'undolog_agent', 'undolog_approver'] LOOP
		IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = name) THEN
			EXECUTE format('CREATE ROLE %I NOLOGIN', name);
		END IF;
	END LOOP;
END $$;

-- Everyone reads: list, show, verify, export, approvals, follow.
GRANT SELECT ON undolog_meta, undolog_counters, undolog_sessions, undolog_effects,
	undolog_history, undolog_session_history, undolog_signatures, undolog_undo,
	undolog_approvals, undolog_approvals_open, undolog_changes
	TO undolog_reader, undolog_agent, undolog_approver;

-- Writers take ids from the sequences and queue their changes; positions
-- are given through undolog_publish alone (it runs with its owner's
-- rights), which moves the queue into the feed. A writer may add to the
-- queue (its rows' ids, the queue's order, come from its sequence), but not
-- change or delete it, nor touch the feed; everyone reads it (verify), and
-- may publish it, as it is (a follower publishes what a writer that died
-- left).
GRANT SELECT ON undolog_changes_pending TO undolog_reader, undolog_agent, undolog_approver;
GRANT USAGE ON SEQUENCE undolog_effect_ids, undolog_session_seqs, undolog_changes_pending_id_seq
	TO undolog_agent, undolog_approver;
GRANT INSERT (kind, effect_id, session, seq) ON undolog_changes_pending TO undolog_agent, undolog_approver;
GRANT EXECUTE ON FUNCTION undolog_publish(boolean, text[], bigint[], text[], integer[])
	TO undolog_agent, undolog_approver;
GRANT EXECUTE ON FUNCTION undolog_publish_queue(boolean)
	TO undolog_reader, undolog_agent, undolog_approver;

-- Agents and approvers write, by column: a grant on a whole table would let
-- them lock it whole (LOCK TABLE), and every other role wait. What each may
-- record is checked row by row: an agent intercepts, starts, commits and
-- fails calls (and sessions); an approver approves, rejects, undoes and
-- resolves (an undo entry, once written, is an undo's to change). Neither
-- may delete (gc) or import: that is the owner's; a request is closed
-- through undolog_close_request. Grants on whole tables that an earlier
-- setup made are taken back first.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON undolog_meta, undolog_counters,
	undolog_sessions, undolog_effects, undolog_history, undolog_session_history, undolog_signatures,
	undolog_undo, undolog_approvals, undolog_approvals_open, undolog_changes, undolog_feed_floor
	FROM undolog_reader, undolog_agent, undolog_approver;
GRANT INSERT (id, seq, rec, state), UPDATE (rec, state) ON undolog_sessions TO undolog_agent, undolog_approver;
GRANT INSERT (id, session, tool, tier, state, rec), UPDATE (state, rec) ON undolog_effects
	TO undolog_agent, undolog_approver;
GRANT INSERT (effect_id, seq, rec, role, kind, to_state, trigger, actor) ON undolog_history
	TO undolog_agent, undolog_approver;
GRANT INSERT (session, seq, rec, role, to_state, trigger) ON undolog_session_history
	TO undolog_agent, undolog_approver;
GRANT INSERT (sig, effect_id), UPDATE (effect_id) ON undolog_signatures TO undolog_agent, undolog_approver;
GRANT INSERT (session, effect_id, rec, state) ON undolog_undo TO undolog_agent, undolog_approver;
GRANT UPDATE (rec, state) ON undolog_undo TO undolog_approver;
GRANT INSERT (effect_id, rec), UPDATE (rec) ON undolog_approvals TO undolog_agent, undolog_approver;
GRANT INSERT (effect_id, session, expires), UPDATE (session, expires) ON undolog_approvals_open
	TO undolog_agent, undolog_approver;
GRANT EXECUTE ON FUNCTION undolog_close_request(bigint) TO undolog_agent, undolog_approver;

-- Log-in roles are members of a group, for example:
--   CREATE ROLE ci LOGIN PASSWORD 'change me' IN ROLE undolog_agent;
--   CREATE ROLE alice LOGIN PASSWORD 'change me' IN ROLE undolog_approver;
--   CREATE ROLE auditor LOGIN PASSWORD 'change me' IN ROLE undolog_reader;
`

var _ storage.Roles = (*Engine)(nil)

// ApplyRoles migrates the database and runs RolesSQL on it.
func (e *Engine) ApplyRoles(ctx context.Context) error {
	pool, err := e.connect(ctx)
	if err != nil {
		return err
	}
	if err := e.migrate(ctx, pool); err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// GRANT by a role that may not grant only warns: ask first.
		var owner bool
		if err := tx.QueryRow(ctx, `SELECT undolog_is_owner(to_regclass(quote_ident(current_schema()) || '.undolog_history'))`).Scan(&owner); err != nil {
			return err
		}
		if !owner {
			return fmt.Errorf("%w: log %s: the database role %s may not set up roles: it does not own undolog's tables",
				model.ErrDenied, redactURL(e.url), e.roleName())
		}
		_, err := tx.Exec(ctx, RolesSQL)
		return err
	})
	return e.wrapped(err)
}
