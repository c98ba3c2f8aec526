package pgstore

// SchemaVersion is the schema this build writes. A database with a higher
// version is refused (model.ErrNewerSchema); a lower one is migrated up.
const SchemaVersion = 12

// rolesSchema is the version that added history rows' role columns and the
// role checks (renumber with its migration).
const rolesSchema = 3

// sessionStateSchema is the version that added session rows' state column
// (renumber with its migration).
const sessionStateSchema = 7

// undoStateSchema is the version that added undo entries' state column
// (renumber with its migration).
const undoStateSchema = 6

// publishSchema is the version whose change positions undolog_publish gives
// (ids from sequences, no counter rows).
const publishSchema = 4

// queueSchema is the version at which a write queues its changes and its
// engine's publisher gives them positions after the commit.
const queueSchema = 9

// migrations are the schema's versions in order: migrations[i] moves a
// database from version i to version i+1. Only ever add at the end.
//
// Records are kept in the binary record form (storage/internal/record),
// which keeps raw JSON byte for byte and times to the nanosecond, as the
// history's hashes need; the columns beside them are what the indexes and
// the engine's own checks need. History rows are never updated: a trigger
// refuses it (gc deletes whole sessions).
var migrations = []string{
	`
CREATE TABLE undolog_meta (key text PRIMARY KEY, value bigint NOT NULL);
CREATE TABLE undolog_counters (name text PRIMARY KEY, n bigint NOT NULL);
INSERT INTO undolog_counters (name, n) VALUES ('effect', 0), ('session', 0), ('change', 0);
CREATE TABLE undolog_sessions (
	id  text PRIMARY KEY,
	seq bigint NOT NULL UNIQUE,
	rec bytea NOT NULL
);
CREATE TABLE undolog_effects (
	id      bigint PRIMARY KEY,
	session text NOT NULL,
	tool    text NOT NULL,
	tier    text NOT NULL,
	state   text NOT NULL,
	rec     bytea NOT NULL
);
CREATE INDEX undolog_effects_session ON undolog_effects (session, id);
CREATE INDEX undolog_effects_tool ON undolog_effects (tool, id);
CREATE INDEX undolog_effects_state ON undolog_effects (state, id);
CREATE INDEX undolog_effects_tier ON undolog_effects (tier, id);
CREATE TABLE undolog_history (
	effect_id bigint NOT NULL,
	seq       integer NOT NULL,
	rec       bytea NOT NULL,
	PRIMARY KEY (effect_id, seq)
);
CREATE TABLE undolog_session_history (
	session text NOT NULL,
	seq     integer NOT NULL,
	rec     bytea NOT NULL,
	PRIMARY KEY (session, seq)
);
CREATE TABLE undolog_signatures (sig text PRIMARY KEY, effect_id bigint NOT NULL);
CREATE TABLE undolog_undo (
	session   text NOT NULL,
	effect_id bigint NOT NULL,
	rec       bytea NOT NULL,
	PRIMARY KEY (session, effect_id)
);
CREATE TABLE undolog_approvals (effect_id bigint PRIMARY KEY, rec bytea NOT NULL);
CREATE TABLE undolog_approvals_open (
	effect_id bigint PRIMARY KEY,
	session   text NOT NULL,
	expires   bigint NOT NULL -- Unix nanoseconds; 0: never
);
CREATE INDEX undolog_approvals_open_session ON undolog_approvals_open (session, effect_id);
CREATE TABLE undolog_changes (
	pos       bigint PRIMARY KEY,
	kind      text NOT NULL, -- E: an effect's record, S: a session's
	effect_id bigint NOT NULL,
	session   text NOT NULL,
	seq       integer NOT NULL
);
CREATE FUNCTION undolog_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'undolog: % is append-only: its rows are never updated', TG_TABLE_NAME;
END $$;
CREATE TRIGGER undolog_history_append_only BEFORE UPDATE ON undolog_history
	FOR EACH ROW EXECUTE FUNCTION undolog_append_only();
CREATE TRIGGER undolog_session_history_append_only BEFORE UPDATE ON undolog_session_history
	FOR EACH ROW EXECUTE FUNCTION undolog_append_only();
CREATE TRIGGER undolog_changes_append_only BEFORE UPDATE ON undolog_changes
	FOR EACH ROW EXECUTE FUNCTION undolog_append_only();
`,
	// Schema 2 changes no table: records are written in form 3 (owners
	// with leases), which a build of schema 1 cannot decode, so it must
	// refuse the database rather than read its executing effects as damage.
	`SELECT 1`,
	// 3: the authenticated role in history rows, and who may do what. A
	// history row says the role that wrote it, the database checks it is
	// session_user's, and the effect rows' columns say enough of the move
	// (kind, target state, trigger, actor) for a trigger to check the role
	// may make it: approve, reject, undo and resolve are undolog_approver's;
	// intercept, start, commit and fail undolog_agent's; the owner of the
	// tables may do everything. The groups need not exist: a role that is
	// in no group may do nothing but what the owner grants it. The row's
	// columns beside the record are written from the record by the engine;
	// verify checks they agree.
	`
ALTER TABLE undolog_history
	ADD COLUMN role     text NOT NULL DEFAULT '',
	ADD COLUMN kind     text NOT NULL DEFAULT '',
	ADD COLUMN to_state text NOT NULL DEFAULT '',
	ADD COLUMN trigger  text NOT NULL DEFAULT '',
	ADD COLUMN actor    text NOT NULL DEFAULT '';
ALTER TABLE undolog_session_history
	ADD COLUMN role     text NOT NULL DEFAULT '',
	ADD COLUMN to_state text NOT NULL DEFAULT '',
	ADD COLUMN trigger  text NOT NULL DEFAULT '';
-- rel is the table a trigger fires on (TG_RELID), never a name looked up:
-- a temporary table a client makes comes first in its search_path, and
-- 'undolog_history'::regclass would find the client's own. The triggers
-- below inline the same test (a function call per row costs more than the
-- check), and look groups up by name only for pg_has_role, which is
-- strict: a group that does not exist (to_regrole is NULL) has no members.
CREATE FUNCTION undolog_is_owner(rel oid) RETURNS boolean LANGUAGE sql STABLE AS $$
	SELECT coalesce((SELECT pg_has_role(session_user, c.relowner, 'MEMBER') FROM pg_class c WHERE c.oid = rel), false)
$$;
-- A session's own moves follow its effects' (checked there), but for
-- those of an undo, which starts before any effect moves.
CREATE FUNCTION undolog_check_session_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF pg_has_role(session_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'MEMBER') THEN
		RETURN NEW;
	END IF;
	IF NEW.role IS DISTINCT FROM session_user::text THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not write a record in the name of role %s', session_user, NEW.role);
	END IF;
	IF coalesce(pg_has_role(session_user, to_regrole('undolog_approver'), 'MEMBER'), false) THEN
		RETURN NEW;
	END IF;
	IF NEW.to_state IN ('compensating', 'compensated') OR NEW.trigger = 'Compensation failed permanently' THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not undo: it is not a member of undolog_approver', session_user);
	END IF;
	IF NOT coalesce(pg_has_role(session_user, to_regrole('undolog_agent'), 'MEMBER'), false) THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not write: it is not a member of undolog_agent', session_user);
	END IF;
	RETURN NEW;
END $$;
CREATE FUNCTION undolog_check_effect_record() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	verb text;
	grp  text := 'undolog_agent';
BEGIN
	verb := CASE
		WHEN NEW.kind = 'undo' AND NEW.to_state = 'resolved' THEN 'resolve'
		WHEN NEW.kind = 'undo' THEN 'undo'
		WHEN NEW.to_state = 'approved' THEN 'approve'
		WHEN NEW.to_state = 'rejected' THEN 'reject'
		WHEN NEW.to_state IN ('compensating', 'compensated', 'compensation_failed') THEN 'undo'
		WHEN NEW.to_state = 'executing' THEN 'start'
		WHEN NEW.to_state = 'committed' THEN 'commit'
		WHEN NEW.trigger = 'Fail RPC' THEN 'fail'
		ELSE 'intercept'
	END;
	IF verb IN ('resolve', 'undo', 'approve', 'reject') THEN
		grp := 'undolog_approver';
	END IF;
	-- A group's member writing in its own name first: it needs no look
	-- at the catalog for the owner.
	IF NEW.role = session_user::text AND coalesce(pg_has_role(session_user, to_regrole(grp), 'MEMBER'), false) THEN
		RETURN NEW;
	END IF;
	IF pg_has_role(session_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'MEMBER') THEN
		RETURN NEW;
	END IF;
	IF NEW.role IS DISTINCT FROM session_user::text THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not write a record in the name of role %s', session_user, NEW.role);
	END IF;
	RAISE EXCEPTION USING ERRCODE = '42501',
		MESSAGE = format('the database role %s may not %s: it is not a member of %s', session_user, verb, grp);
END $$;
-- The same gate on the effect rows themselves, for a client that writes
-- them without a history row: approved, and the moves of an undo, are the
-- approver's; an irreversible effect starts only once approved; the tier
-- never changes. The triggers' WHEN clauses let through, without running
-- the function, only rows no role is refused (most rows: a pending effect
-- written, a start or a commit), so the function judges the rest alone.
CREATE FUNCTION undolog_check_effect_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	was text := 'pending';
BEGIN
	IF TG_OP = 'UPDATE' THEN
		was := OLD.state;
		IF NEW.state = OLD.state AND NEW.tier = OLD.tier THEN
			RETURN NEW;
		END IF;
	END IF;
	IF pg_has_role(session_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'MEMBER') THEN
		RETURN NEW;
	END IF;
	IF TG_OP = 'UPDATE' AND NEW.tier <> OLD.tier THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not change the tier of effect %s', session_user, NEW.id);
	END IF;
	IF NEW.state IN ('approved', 'compensating', 'compensated', 'compensation_failed') THEN
		IF NOT coalesce(pg_has_role(session_user, to_regrole('undolog_approver'), 'MEMBER'), false) THEN
			RAISE EXCEPTION USING ERRCODE = '42501',
				MESSAGE = format('the database role %s may not %s: it is not a member of undolog_approver', session_user,
					CASE NEW.state WHEN 'approved' THEN 'approve' ELSE 'undo' END);
		END IF;
	ELSIF NEW.tier = 'irreversible' AND NEW.state = 'executing' AND was <> 'approved' THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not start effect %s: it is irreversible and was not approved', session_user, NEW.id);
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER undolog_effects_role_insert BEFORE INSERT ON undolog_effects
	FOR EACH ROW WHEN (NEW.state IN ('approved', 'compensating', 'compensated', 'compensation_failed')
		OR (NEW.tier = 'irreversible' AND NEW.state = 'executing'))
	EXECUTE FUNCTION undolog_check_effect_row();
CREATE TRIGGER undolog_effects_role BEFORE UPDATE ON undolog_effects
	FOR EACH ROW WHEN (NEW.tier IS DISTINCT FROM OLD.tier OR (NEW.state IS DISTINCT FROM OLD.state
		AND (NEW.state IN ('approved', 'compensating', 'compensated', 'compensation_failed')
			OR (NEW.tier = 'irreversible' AND NEW.state = 'executing' AND OLD.state <> 'approved'))))
	EXECUTE FUNCTION undolog_check_effect_row();
CREATE TRIGGER undolog_history_role BEFORE INSERT ON undolog_history
	FOR EACH ROW EXECUTE FUNCTION undolog_check_effect_record();
CREATE TRIGGER undolog_session_history_role BEFORE INSERT ON undolog_session_history
	FOR EACH ROW EXECUTE FUNCTION undolog_check_session_record();
`,
	// 4: effect ids and session seqs come from sequences, so that writers
	// of different sessions do not queue on one counter row until each
	// commits (an id a rolled-back transaction took is skipped). Change
	// positions are given by undolog_publish under one advisory lock, held
	// to the commit, which a write tries for as its last statement; if
	// another holds it, the write queues its changes in
	// undolog_changes_pending and its engine publishes them after the
	// commit. Positions stay gap-free, and a follower sees a position only
	// after every lower one, but writers' commits no longer wait for each
	// other's flushes.
	`
CREATE SEQUENCE undolog_effect_ids;
CREATE SEQUENCE undolog_session_seqs;
SELECT setval('undolog_effect_ids', n) FROM undolog_counters WHERE name = 'effect' AND n > 0;
SELECT setval('undolog_session_seqs', n) FROM undolog_counters WHERE name = 'session' AND n > 0;
-- The newest change position is the greatest (change rows are never
-- deleted): no counter row for every write to update.
DELETE FROM undolog_counters;
CREATE TABLE undolog_changes_pending (
	id        bigserial PRIMARY KEY, -- the order of a transaction's changes
	kind      text NOT NULL,
	effect_id bigint NOT NULL,
	session   text NOT NULL,
	seq       integer NOT NULL
);
-- undolog_publish gives positions to the changes queued and then to those
-- given (a write's own, which it queues instead if another holds the lock
-- and wait is false: it returns false then), and notifies the newest.
CREATE FUNCTION undolog_publish(wait boolean, kinds text[], effects bigint[], sessions text[], seqs integer[])
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	newest bigint;
BEGIN
	IF wait THEN
		PERFORM pg_advisory_xact_lock(8461811179599128432);
	ELSIF NOT pg_try_advisory_xact_lock(8461811179599128432) THEN
		INSERT INTO undolog_changes_pending (kind, effect_id, session, seq)
			SELECT * FROM unnest(kinds, effects, sessions, seqs);
		RETURN false;
	END IF;
	-- One statement, its snapshot taken once the lock is held: the queued
	-- changes first, in their order, then the write's own.
	WITH last AS (SELECT coalesce(max(pos), 0) AS n FROM undolog_changes),
	m AS (DELETE FROM undolog_changes_pending RETURNING id, kind, effect_id, session, seq),
	a AS (SELECT 0 AS g, id AS o, kind, effect_id, session, seq FROM m
		UNION ALL
		SELECT 1, u.o, u.k, u.e, u.s, u.q FROM unnest(kinds, effects, sessions, seqs) WITH ORDINALITY AS u(k, e, s, q, o)),
	ins AS (INSERT INTO undolog_changes (pos, kind, effect_id, session, seq)
		SELECT last.n + row_number() OVER (ORDER BY a.g, a.o), a.kind, a.effect_id, a.session, a.seq FROM a, last
		RETURNING pos)
	SELECT max(pos) INTO newest FROM ins;
	-- Waiters hear of positions once they are in the feed: sent with the
	-- commit of the transaction that gave them (notify.go).
	IF newest IS NOT NULL THEN
		PERFORM pg_notify('undolog_changes', coalesce(current_schema(), '') || ' ' || newest);
	END IF;
	RETURN true;
END $$;
-- A database whose roles were set up at an earlier schema: its writers may
-- go on writing (RolesSQL grants the same).
DO $$
DECLARE
	grp text;
BEGIN
	FOREACH grp IN ARRAY ARRAY['undolog_agent', 'undolog_approver'] LOOP
		IF to_regrole(grp) IS NOT NULL THEN
			EXECUTE format('GRANT USAGE ON SEQUENCE undolog_effect_ids, undolog_session_seqs, undolog_changes_pending_id_seq TO %I', grp);
			EXECUTE format('GRANT SELECT, INSERT, DELETE ON undolog_changes_pending TO %I', grp);
			EXECUTE format('GRANT EXECUTE ON FUNCTION undolog_publish(boolean, text[], bigint[], text[], integer[]) TO %I', grp);
		END IF;
	END LOOP;
END $$;
`,
	// 5: resuming a halted session (halted -> active) lifts a person's
	// rejection: it is undolog_approver's, as the rejection was, not the
	// halted agent's own. The session-record gate as in 3, with that added.
	`
CREATE OR REPLACE FUNCTION undolog_check_session_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF pg_has_role(session_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'MEMBER') THEN
		RETURN NEW;
	END IF;
	IF NEW.role IS DISTINCT FROM session_user::text THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not write a record in the name of role %s', session_user, NEW.role);
	END IF;
	IF coalesce(pg_has_role(session_user, to_regrole('undolog_approver'), 'MEMBER'), false) THEN
		RETURN NEW;
	END IF;
	IF NEW.to_state IN ('compensating', 'compensated') OR NEW.trigger = 'Compensation failed permanently' THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not undo: it is not a member of undolog_approver', session_user);
	END IF;
	IF NEW.trigger = 'Person resumes the session' THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not resume a halted session: it is not a member of undolog_approver', session_user);
	END IF;
	IF NOT coalesce(pg_has_role(session_user, to_regrole('undolog_agent'), 'MEMBER'), false) THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not write: it is not a member of undolog_agent', session_user);
	END IF;
	RETURN NEW;
END $$;
`,
	// 6: the undo entries' state beside their record, indexed, so that
	// list --undo finds them without reading every entry. Rows written
	// before keep it NULL: the engine gives them too, and the rules read
	// their records.
	`
ALTER TABLE undolog_undo ADD COLUMN state text;
CREATE INDEX undolog_undo_state ON undolog_undo (state, effect_id);
`,
	// 7: a halted session stays halted but by a person's hand. An agent
	// could otherwise write its own way out of a halt, past the rejection
	// that made it: its session row written back from before, or a record of
	// its own from halted to active under another trigger. Session rows get
	// their state beside the record (the engine writes it, and refuses a
	// record that disagrees with it); a halted row's state, and a halted
	// session's next record, are an approver's (or the owner's) to change.
	// The record gate as in 5, with that added.
	`
ALTER TABLE undolog_sessions ADD COLUMN state text;
-- A session's state is its newest record's (verify holds them to it); rows
-- whose records predate the records' columns stay NULL until written.
UPDATE undolog_sessions s SET state = h.to_state
	FROM (SELECT DISTINCT ON (session) session, to_state FROM undolog_session_history ORDER BY session, seq DESC) h
	WHERE h.session = s.id AND h.to_state <> '';
CREATE FUNCTION undolog_check_session_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF pg_has_role(session_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'MEMBER')
		OR coalesce(pg_has_role(session_user, to_regrole('undolog_approver'), 'MEMBER'), false) THEN
		RETURN NEW;
	END IF;
	RAISE EXCEPTION USING ERRCODE = '42501',
		MESSAGE = format('the database role %s may not move halted session %s: a person resumes or undoes it (not a member of undolog_approver)', session_user, OLD.id);
END $$;
CREATE TRIGGER undolog_sessions_halted BEFORE UPDATE ON undolog_sessions
	FOR EACH ROW WHEN (OLD.state = 'halted' AND NEW.state IS DISTINCT FROM OLD.state)
	EXECUTE FUNCTION undolog_check_session_row();
CREATE OR REPLACE FUNCTION undolog_check_session_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF pg_has_role(session_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'MEMBER') THEN
		RETURN NEW;
	END IF;
	IF NEW.role IS DISTINCT FROM session_user::text THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not write a record in the name of role %s', session_user, NEW.role);
	END IF;
	IF coalesce(pg_has_role(session_user, to_regrole('undolog_approver'), 'MEMBER'), false) THEN
		RETURN NEW;
	END IF;
	IF NEW.to_state IN ('compensating', 'compensated') OR NEW.trigger = 'Compensation failed permanently' THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not undo: it is not a member of undolog_approver', session_user);
	END IF;
	IF NEW.trigger = 'Person resumes the session' THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not resume a halted session: it is not a member of undolog_approver', session_user);
	END IF;
	IF (SELECT h.to_state FROM undolog_session_history h WHERE h.session = NEW.session ORDER BY h.seq DESC LIMIT 1) = 'halted' THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not move halted session %s: a person resumes or undoes it (not a member of undolog_approver)', session_user, NEW.session);
	END IF;
	IF NOT coalesce(pg_has_role(session_user, to_regrole('undolog_agent'), 'MEMBER'), false) THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not write: it is not a member of undolog_agent', session_user);
	END IF;
	RETURN NEW;
END $$;
`,
	// 8: an agent moves a session's row only as an agent moves a session
	// (active <-> awaiting_approval, to completed or failed), and renames
	// none: a halted, compensating or compensated session, or one renamed
	// out of the way of a row written back, would take its calls again.
	// The feed's queue is undolog_publish's alone (it runs with its owner's
	// rights now): a writer could otherwise delete the changes others
	// queued, and hide a request from every follower.
	`
CREATE OR REPLACE FUNCTION undolog_check_session_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF pg_has_role(session_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'MEMBER')
		OR coalesce(pg_has_role(session_user, to_regrole('undolog_approver'), 'MEMBER'), false) THEN
		RETURN NEW;
	END IF;
	IF NEW.id IS DISTINCT FROM OLD.id THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not rename session %s (not a member of undolog_approver)', session_user, OLD.id);
	END IF;
	IF OLD.state IS NULL OR (OLD.state, NEW.state) IN (('active', 'awaiting_approval'), ('awaiting_approval', 'active'),
		('active', 'completed'), ('active', 'failed'), ('awaiting_approval', 'completed'), ('awaiting_approval', 'failed')) THEN
		RETURN NEW;
	END IF;
	IF OLD.state = 'halted' THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not move halted session %s: a person resumes or undoes it (not a member of undolog_approver)', session_user, OLD.id);
	END IF;
	RAISE EXCEPTION USING ERRCODE = '42501',
		MESSAGE = format('the database role %s may not move session %s from %s to %s (not a member of undolog_approver)', session_user, OLD.id, OLD.state, coalesce(NEW.state, 'nothing'));
END $$;
DROP TRIGGER undolog_sessions_halted ON undolog_sessions;
CREATE TRIGGER undolog_sessions_moves BEFORE UPDATE ON undolog_sessions
	FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state OR NEW.id IS DISTINCT FROM OLD.id)
	EXECUTE FUNCTION undolog_check_session_row();
DO $$
DECLARE
	grp text;
BEGIN
	EXECUTE format('ALTER FUNCTION undolog_publish(boolean, text[], bigint[], text[], integer[]) SECURITY DEFINER SET search_path = %I, pg_temp',
		current_schema());
	REVOKE EXECUTE ON FUNCTION undolog_publish(boolean, text[], bigint[], text[], integer[]) FROM PUBLIC;
	FOREACH grp IN ARRAY ARRAY['undolog_agent', 'undolog_approver'] LOOP
		IF to_regrole(grp) IS NOT NULL THEN
			EXECUTE format('REVOKE ALL ON undolog_changes_pending FROM %I', grp);
			EXECUTE format('REVOKE USAGE ON SEQUENCE undolog_changes_pending_id_seq FROM %I', grp);
			EXECUTE format('REVOKE INSERT, UPDATE ON undolog_changes FROM %I', grp);
		END IF;
	END LOOP;
END $$;
`,
	// 9: a write queues its changes with a plain INSERT, sent with its
	// COMMIT, and its engine's publisher gives positions to what is queued
	// a batch at a time after the commit (undolog_publish(true, ...)): a
	// write no longer runs the feed's function, and no commit waits for
	// another's. Writers may add to the queue, not change or delete it, nor
	// choose a row's id (the order of the queue, and its key: a row taken
	// ahead of the sequence would fail every write that drew its id); a
	// reader may publish the queue too, and only it (undolog_publish_queue:
	// a follower does, at most once a second, for a writer killed after
	// its commit);
	// everyone may read it (verify tells a session made anew by what is
	// queued for it). And the history gates' functions (effects' and
	// sessions') do not run for a member of the tables' owner, who may
	// write any record: a WHEN clause
	// says so, by the owner's oid as of this migration (undolog_gate_history
	// makes the trigger anew: `undolog migrate` runs it when the tables have
	// changed owner since, and verify says so). A plpgsql call per history
	// row was a tenth of the server's time at 8 writers; a WHEN clause that
	// let a group's members through too is parsed at every statement, and
	// cost two thirds of that.
	`
CREATE FUNCTION undolog_gate_history() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	rel regclass := to_regclass(quote_ident(current_schema()) || '.undolog_history');
	srel regclass := to_regclass(quote_ident(current_schema()) || '.undolog_session_history');
	owner oid;
BEGIN
	SELECT c.relowner INTO owner FROM pg_catalog.pg_class c WHERE c.oid = rel;
	EXECUTE format('DROP TRIGGER IF EXISTS undolog_history_role ON %s', rel);
	EXECUTE format($t$CREATE TRIGGER undolog_history_role BEFORE INSERT ON %s FOR EACH ROW
		WHEN (NOT pg_has_role(session_user, %s::oid, 'MEMBER'))
		EXECUTE FUNCTION undolog_check_effect_record()$t$, rel, owner);
	EXECUTE format('DROP TRIGGER IF EXISTS undolog_session_history_role ON %s', srel);
	EXECUTE format($t$CREATE TRIGGER undolog_session_history_role BEFORE INSERT ON %s FOR EACH ROW
		WHEN (NOT pg_has_role(session_user, %s::oid, 'MEMBER'))
		EXECUTE FUNCTION undolog_check_session_record()$t$, srel, owner);
	INSERT INTO undolog_meta (key, value) VALUES ('history_gate_owner', owner::bigint)
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;
END $$;
REVOKE EXECUTE ON FUNCTION undolog_gate_history() FROM PUBLIC;
SELECT undolog_gate_history();
DO $$
BEGIN
	EXECUTE format($f$CREATE FUNCTION undolog_publish_queue(wait boolean) RETURNS boolean LANGUAGE sql
		SECURITY DEFINER SET search_path = %I, pg_temp
		AS 'SELECT undolog_publish(wait, NULL, NULL, NULL, NULL)'$f$, current_schema());
END $$;
REVOKE EXECUTE ON FUNCTION undolog_publish_queue(boolean) FROM PUBLIC;
DO $$
DECLARE
	grp text;
BEGIN
	FOREACH grp IN ARRAY ARRAY['undolog_reader', 'undolog_agent', 'undolog_approver'] LOOP
		IF to_regrole(grp) IS NOT NULL THEN
			EXECUTE format('GRANT SELECT ON undolog_changes_pending TO %I', grp);
			EXECUTE format('GRANT EXECUTE ON FUNCTION undolog_publish_queue(boolean) TO %I', grp);
			IF grp <> 'undolog_reader' THEN
				EXECUTE format('GRANT INSERT (kind, effect_id, session, seq) ON undolog_changes_pending TO %I', grp);
				EXECUTE format('GRANT USAGE ON SEQUENCE undolog_changes_pending_id_seq TO %I', grp);
			END IF;
		END IF;
	END LOOP;
END $$;
`,
	// 10: a publish reads the queue only above its floor, the id at or
	// below which every row queued has been published or rolled back. The
	// queue is a table of rows queued and deleted a few milliseconds later,
	// and the dead rows stay until autovacuum (every minute at most): a
	// publish that read it whole read them all, and took a tenth of the
	// server's time at 8 writers. A row's id is drawn from the sequence in
	// its writer's transaction after that transaction's first write (a
	// history row), so once every transaction with an id below a
	// publish's own has ended, no row at or below the sequence's value that
	// publish read before it took its id is yet to come: that value is the
	// next floor. (Not a snapshot's xmax: that is one past the newest
	// transaction ended, and a transaction still running may be above it.)
	// A follower's rescue (wait false) still reads the whole queue, for
	// rows whose writers queued them as their first write.
	`
CREATE TABLE undolog_feed_floor (
	one       boolean PRIMARY KEY DEFAULT true CHECK (one),
	below     bigint NOT NULL, -- queue ids at or below it are published or rolled back
	next      bigint NOT NULL, -- the next floor, the sequence's value read before...
	next_xid  xid8 NOT NULL    -- ...the publish of this transaction id took it: the floor once every lower id has ended
);
INSERT INTO undolog_feed_floor (below, next, next_xid) VALUES (0, 0, '0');
CREATE OR REPLACE FUNCTION undolog_publish(wait boolean, kinds text[], effects bigint[], sessions text[], seqs integer[])
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	newest bigint;
	floor_below bigint;
	floor_next bigint;
	floor_next_xid xid8;
	oldest xid8; -- the snapshot's xmin: older transactions have all ended
	top bigint;  -- the queue's last id drawn
BEGIN
	IF wait THEN
		PERFORM pg_advisory_xact_lock(8461811179599128432);
	ELSIF NOT pg_try_advisory_xact_lock(8461811179599128432) THEN
		INSERT INTO undolog_changes_pending (kind, effect_id, session, seq)
			SELECT * FROM unnest(kinds, effects, sessions, seqs);
		RETURN false;
	END IF;
	SELECT f.below, f.next, f.next_xid, pg_snapshot_xmin(pg_current_snapshot()),
		(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM undolog_changes_pending_id_seq)
		INTO floor_below, floor_next, floor_next_xid, oldest, top FROM undolog_feed_floor f;
	-- One statement, its snapshot taken once the lock is held: the queued
	-- changes first, in their order, then the write's own.
	WITH last AS (SELECT coalesce(max(pos), 0) AS n FROM undolog_changes),
	m AS (DELETE FROM undolog_changes_pending WHERE id > CASE WHEN wait THEN floor_below ELSE 0 END AND id <= top
		RETURNING id, kind, effect_id, session, seq),
	a AS (SELECT 0 AS g, id AS o, kind, effect_id, session, seq FROM m
		UNION ALL
		SELECT 1, u.o, u.k, u.e, u.s, u.q FROM unnest(kinds, effects, sessions, seqs) WITH ORDINALITY AS u(k, e, s, q, o)),
	ins AS (INSERT INTO undolog_changes (pos, kind, effect_id, session, seq)
		SELECT last.n + row_number() OVER (ORDER BY a.g, a.o), a.kind, a.effect_id, a.session, a.seq FROM a, last
		RETURNING pos)
	SELECT max(pos) INTO newest FROM ins;
	-- Every transaction that could hold a row at or below the next floor
	-- had ended by the first statement's snapshot, so the move saw them all.
	IF floor_next_xid <= oldest THEN
		-- This transaction's id (pg_current_xact_id takes one if the move
		-- wrote nothing) is above that of every writer that drew an id at
		-- or below top: they took theirs before they drew.
		UPDATE undolog_feed_floor SET below = floor_next, next = top, next_xid = pg_current_xact_id();
	END IF;
	-- Waiters hear of positions once they are in the feed: sent with the
	-- commit of the transaction that gave them (notify.go).
	IF newest IS NOT NULL THEN
		PERFORM pg_notify('undolog_changes', coalesce(current_schema(), '') || ' ' || newest);
	END IF;
	RETURN true;
END $$;
-- CREATE OR REPLACE gives a function back its defaults: it runs with its
-- owner's rights again, as since 8.
DO $$
BEGIN
	EXECUTE format('ALTER FUNCTION undolog_publish(boolean, text[], bigint[], text[], integer[]) SECURITY DEFINER SET search_path = %I, pg_temp',
		current_schema());
END $$;
`,
	// 11: every function finds tables, functions and operators where the
	// migration put them, whoever calls it: pg_catalog (searched first when
	// the path does not name it), then undolog's own schema (current_schema()
	// in the functions), then the caller's temporary tables last, as
	// undolog_publish has since 8. Without a search_path of its own a
	// trigger's function ran in its caller's: a temporary table named like
	// one of undolog's came first (an agent's empty undolog_session_history
	// let it write to a session a person halted), and a schema of the
	// caller's placed before pg_catalog could stand in for pg_has_role.
	// (CREATE OR REPLACE resets it: a later migration that replaces a
	// function sets it again.) Writers are granted columns, not tables, and
	// write only records of undolog's form (below). And a person's resolve
	// of a call in doubt is recorded as such
	// (statemachine.TriggerResolvedInDoubt): an approver's, as resolve is,
	// where it was a fail any agent could record. The history gate as in 3,
	// with that added.
	`
CREATE OR REPLACE FUNCTION undolog_check_effect_record() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	verb text;
	grp  text := 'undolog_agent';
BEGIN
	verb := CASE
		WHEN NEW.kind = 'undo' AND NEW.to_state = 'resolved' THEN 'resolve'
		WHEN NEW.kind = 'undo' THEN 'undo'
		WHEN NEW.trigger = 'Person resolves the call in doubt' THEN 'resolve'
		WHEN NEW.to_state = 'approved' THEN 'approve'
		WHEN NEW.to_state = 'rejected' THEN 'reject'
		WHEN NEW.to_state IN ('compensating', 'compensated', 'compensation_failed') THEN 'undo'
		WHEN NEW.to_state = 'executing' THEN 'start'
		WHEN NEW.to_state = 'committed' THEN 'commit'
		WHEN NEW.trigger = 'Fail RPC' THEN 'fail'
		ELSE 'intercept'
	END;
	IF verb IN ('resolve', 'undo', 'approve', 'reject') THEN
		grp := 'undolog_approver';
	END IF;
	-- A group's member writing in its own name first: it needs no look
	-- at the catalog for the owner.
	IF NEW.role = session_user::text AND coalesce(pg_has_role(session_user, to_regrole(grp), 'MEMBER'), false) THEN
		RETURN NEW;
	END IF;
	IF pg_has_role(session_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'MEMBER') THEN
		RETURN NEW;
	END IF;
	IF NEW.role IS DISTINCT FROM session_user::text THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not write a record in the name of role %s', session_user, NEW.role);
	END IF;
	RAISE EXCEPTION USING ERRCODE = '42501',
		MESSAGE = format('the database role %s may not %s: it is not a member of %s', session_user, verb, grp);
END $$;
-- Writers are granted columns, not tables (RolesSQL): a grant on a table
-- let them lock it whole (LOCK TABLE ... IN ACCESS EXCLUSIVE MODE), and
-- every command of every role waited until someone killed that backend.
-- Closing a request was a DELETE, which has no column grant: it is this
-- function's, which deletes as DELETE did.
CREATE FUNCTION undolog_close_request(effect bigint) RETURNS void LANGUAGE sql SECURITY DEFINER AS
	'DELETE FROM undolog_approvals_open WHERE effect_id = effect';
REVOKE EXECUTE ON FUNCTION undolog_close_request(bigint) FROM PUBLIC;
-- An agent closes a request as undolog does: when its session stops
-- taking calls (closeOpenApprovals), in the same transaction; a close of
-- another call's request, whose session still waits for the decision, took
-- it out of every approver's queue. Checked at the commit, when the
-- session's row says where it went; the effect's session, which no writer
-- may change, not the request's.
CREATE FUNCTION undolog_check_request_closed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	waiting text;
BEGIN
	IF pg_has_role(session_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'MEMBER')
		OR coalesce(pg_has_role(session_user, to_regrole('undolog_approver'), 'MEMBER'), false) THEN
		RETURN NULL;
	END IF;
	SELECT s.id INTO waiting FROM undolog_effects e JOIN undolog_sessions s ON s.id = e.session
		WHERE e.id = OLD.effect_id AND s.state IN ('active', 'awaiting_approval');
	IF waiting IS NOT NULL THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('the database role %s may not close the request of effect %s: session %s waits for its decision (not a member of undolog_approver)',
				session_user, OLD.effect_id, waiting);
	END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER undolog_approvals_open_closed AFTER DELETE ON undolog_approvals_open
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION undolog_check_request_closed();
DO $$
DECLARE
	grp text;
BEGIN
	FOREACH grp IN ARRAY ARRAY['undolog_reader', 'undolog_agent', 'undolog_approver'] LOOP
		IF to_regrole(grp) IS NOT NULL THEN
			EXECUTE format($g$REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON undolog_meta, undolog_counters,
				undolog_sessions, undolog_effects, undolog_history, undolog_session_history, undolog_signatures, undolog_undo,
				undolog_approvals, undolog_approvals_open, undolog_changes, undolog_changes_pending, undolog_feed_floor FROM %1$I$g$, grp);
			IF grp <> 'undolog_reader' THEN
				EXECUTE format($g$
					GRANT INSERT (id, seq, rec, state), UPDATE (rec, state) ON undolog_sessions TO %1$I;
					GRANT INSERT (id, session, tool, tier, state, rec), UPDATE (state, rec) ON undolog_effects TO %1$I;
					GRANT INSERT (effect_id, seq, rec, role, kind, to_state, trigger, actor) ON undolog_history TO %1$I;
					GRANT INSERT (session, seq, rec, role, to_state, trigger) ON undolog_session_history TO %1$I;
					GRANT INSERT (sig, effect_id), UPDATE (effect_id) ON undolog_signatures TO %1$I;
					GRANT INSERT (session, effect_id, rec, state) ON undolog_undo TO %1$I;
					GRANT INSERT (effect_id, rec), UPDATE (rec) ON undolog_approvals TO %1$I;
					GRANT INSERT (effect_id, session, expires), UPDATE (session, expires) ON undolog_approvals_open TO %1$I;
					GRANT INSERT (kind, effect_id, session, seq) ON undolog_changes_pending TO %1$I;
					GRANT EXECUTE ON FUNCTION undolog_close_request(bigint) TO %1$I$g$, grp);
			END IF;
			IF grp = 'undolog_approver' THEN
				GRANT UPDATE (rec, state) ON undolog_undo TO undolog_approver;
			END IF;
		END IF;
	END LOOP;
END $$;
-- A writer other than the owner writes records in the form this build
-- writes (its format byte and the record's type byte first), as undolog
-- does: a blank or foreign record is refused. (What follows them the
-- database does not read: verify does.) The WHEN clauses let every record
-- of that form through without a call.
CREATE FUNCTION undolog_check_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF pg_has_role(session_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'MEMBER') THEN
		RETURN NEW;
	END IF;
	RAISE EXCEPTION USING ERRCODE = '42501',
		MESSAGE = format('the database role %s may not write into %s a record undolog does not write', session_user, TG_TABLE_NAME);
END $$;
CREATE TRIGGER undolog_sessions_written BEFORE INSERT OR UPDATE OF rec ON undolog_sessions FOR EACH ROW
	WHEN (substring(NEW.rec FROM 1 FOR 2) IS DISTINCT FROM '\x0353'::bytea) EXECUTE FUNCTION undolog_check_record();
CREATE TRIGGER undolog_effects_written BEFORE INSERT OR UPDATE OF rec ON undolog_effects FOR EACH ROW
	WHEN (substring(NEW.rec FROM 1 FOR 2) IS DISTINCT FROM '\x0345'::bytea) EXECUTE FUNCTION undolog_check_record();
CREATE TRIGGER undolog_history_written BEFORE INSERT ON undolog_history FOR EACH ROW
	WHEN (substring(NEW.rec FROM 1 FOR 2) IS DISTINCT FROM '\x0348'::bytea) EXECUTE FUNCTION undolog_check_record();
CREATE TRIGGER undolog_session_history_written BEFORE INSERT ON undolog_session_history FOR EACH ROW
	WHEN (substring(NEW.rec FROM 1 FOR 2) IS DISTINCT FROM '\x0348'::bytea) EXECUTE FUNCTION undolog_check_record();
CREATE TRIGGER undolog_undo_written BEFORE INSERT OR UPDATE OF rec ON undolog_undo FOR EACH ROW
	WHEN (substring(NEW.rec FROM 1 FOR 2) IS DISTINCT FROM '\x0355'::bytea) EXECUTE FUNCTION undolog_check_record();
CREATE TRIGGER undolog_approvals_written BEFORE INSERT OR UPDATE OF rec ON undolog_approvals FOR EACH ROW
	WHEN (substring(NEW.rec FROM 1 FOR 2) IS DISTINCT FROM '\x0341'::bytea) EXECUTE FUNCTION undolog_check_record();
-- An undo entry leaves pending only in an undo: an approver's (an agent
-- set its entry compensated by SQL, and undo passed over the call).
CREATE FUNCTION undolog_check_undo_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF pg_has_role(session_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'MEMBER')
		OR coalesce(pg_has_role(session_user, to_regrole('undolog_approver'), 'MEMBER'), false) THEN
		RETURN NEW;
	END IF;
	RAISE EXCEPTION USING ERRCODE = '42501',
		MESSAGE = format('the database role %s may not undo: it is not a member of undolog_approver (undo entry of effect %s)', session_user, NEW.effect_id);
END $$;
CREATE TRIGGER undolog_undo_moves_insert BEFORE INSERT ON undolog_undo FOR EACH ROW
	WHEN (NEW.state IS DISTINCT FROM 'pending') EXECUTE FUNCTION undolog_check_undo_row();
CREATE TRIGGER undolog_undo_moves BEFORE UPDATE ON undolog_undo FOR EACH ROW
	WHEN (NEW.state IS DISTINCT FROM 'pending' OR OLD.state IS DISTINCT FROM 'pending')
	EXECUTE FUNCTION undolog_check_undo_row();
-- The feed names each record once, and only records that are there:
-- undolog_publish takes the changes it is given, and those queued, from
-- any writer, whose SQL could name a record twice (a follower read it
-- again, and verify failed for every role from then on), a record that is
-- not there, or an effect under another session's name. Such a change is
-- dropped (from the queue too) and gets no position; the rest keep their
-- order. A session's name may come again after gc, so its first record may
-- be named again (verify cannot tell that from a forgery either), and its
-- later records once after the newest naming of its first.
CREATE INDEX IF NOT EXISTS undolog_changes_effect_record ON undolog_changes (effect_id, seq) WHERE kind = 'E';
CREATE INDEX IF NOT EXISTS undolog_changes_session_record ON undolog_changes (session, seq) WHERE kind = 'S';
CREATE OR REPLACE FUNCTION undolog_publish(wait boolean, kinds text[], effects bigint[], sessions text[], seqs integer[])
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
	newest bigint;
	floor_below bigint;
	floor_next bigint;
	floor_next_xid xid8;
	oldest xid8; -- the snapshot's xmin: older transactions have all ended
	top bigint;  -- the queue's last id drawn
BEGIN
	-- The feed's lock is its floor's row, which no role but the owner may
	-- lock (an advisory lock any role may take, and hold for good without a
	-- transaction: every publish waited, and no follower saw a change).
	IF wait THEN
		PERFORM 1 FROM undolog_feed_floor FOR UPDATE;
	ELSIF NOT EXISTS (SELECT 1 FROM undolog_feed_floor FOR UPDATE SKIP LOCKED) THEN
		INSERT INTO undolog_changes_pending (kind, effect_id, session, seq)
			SELECT * FROM unnest(kinds, effects, sessions, seqs);
		RETURN false;
	END IF;
	SELECT f.below, f.next, f.next_xid, pg_snapshot_xmin(pg_current_snapshot()),
		(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM undolog_changes_pending_id_seq)
		INTO floor_below, floor_next, floor_next_xid, oldest, top FROM undolog_feed_floor f;
	-- One statement, its snapshot taken once the lock is held: the queued
	-- changes first, in their order, then the write's own.
	WITH last AS (SELECT coalesce(max(pos), 0) AS n FROM undolog_changes),
	m AS (DELETE FROM undolog_changes_pending WHERE id > CASE WHEN wait THEN floor_below ELSE 0 END AND id <= top
		RETURNING id, kind, effect_id, session, seq),
	a AS (SELECT 0 AS g, id AS o, kind, effect_id, session, seq FROM m
		UNION ALL
		SELECT 1, u.o, u.k, u.e, u.s, u.q FROM unnest(kinds, effects, sessions, seqs) WITH ORDINALITY AS u(k, e, s, q, o)),
	first AS (SELECT DISTINCT ON (a.kind, a.effect_id, a.session, a.seq) a.* FROM a
		ORDER BY a.kind, a.effect_id, a.session, a.seq, a.g, a.o),
	-- Each test is a lookup by index per change (OFFSET 0: not a hash of
	-- the whole table, which the planner may make of an EXISTS).
	named AS (SELECT f.* FROM first f WHERE CASE f.kind
		WHEN 'E' THEN
			EXISTS (SELECT 1 FROM undolog_history h JOIN undolog_effects e ON e.id = h.effect_id
				WHERE h.effect_id = f.effect_id AND h.seq = f.seq AND e.session = f.session OFFSET 0)
			AND NOT EXISTS (SELECT 1 FROM undolog_changes c WHERE c.kind = 'E' AND c.effect_id = f.effect_id AND c.seq = f.seq OFFSET 0)
		WHEN 'S' THEN
			EXISTS (SELECT 1 FROM undolog_session_history h WHERE h.session = f.session AND h.seq = f.seq OFFSET 0)
			AND (f.seq = 1
				OR EXISTS (SELECT 1 FROM first b WHERE b.kind = 'S' AND b.session = f.session AND b.seq = 1)
				OR NOT EXISTS (SELECT 1 FROM undolog_changes c WHERE c.kind = 'S' AND c.session = f.session AND c.seq = f.seq
					AND c.pos > coalesce((SELECT max(b.pos) FROM undolog_changes b
						WHERE b.kind = 'S' AND b.session = f.session AND b.seq = 1), 0) OFFSET 0))
		ELSE false END),
	ins AS (INSERT INTO undolog_changes (pos, kind, effect_id, session, seq)
		SELECT last.n + row_number() OVER (ORDER BY named.g, named.o), named.kind, named.effect_id, named.session, named.seq
		FROM named, last
		RETURNING pos)
	SELECT max(pos) INTO newest FROM ins;
	-- Every transaction that could hold a row at or below the next floor
	-- had ended by the first statement's snapshot, so the move saw them all.
	IF floor_next_xid <= oldest THEN
		-- This transaction's id (pg_current_xact_id takes one if the move
		-- wrote nothing) is above that of every writer that drew an id at
		-- or below top: they took theirs before they drew.
		UPDATE undolog_feed_floor SET below = floor_next, next = top, next_xid = pg_current_xact_id();
	END IF;
	-- Waiters hear of positions once they are in the feed: sent with the
	-- commit of the transaction that gave them (notify.go).
	IF newest IS NOT NULL THEN
		PERFORM pg_notify('undolog_changes', coalesce(current_schema(), '') || ' ' || newest);
	END IF;
	RETURN true;
END $$;
DO $$
DECLARE
	fn text;
BEGIN
	FOREACH fn IN ARRAY ARRAY['undolog_append_only()', 'undolog_close_request(bigint)', 'undolog_check_request_closed()', 'undolog_check_record()', 'undolog_check_undo_row()', 'undolog_is_owner(oid)', 'undolog_check_session_record()',
		'undolog_check_effect_record()', 'undolog_check_effect_row()', 'undolog_check_session_row()',
		'undolog_publish(boolean, text[], bigint[], text[], integer[])', 'undolog_gate_history()',
		'undolog_publish_queue(boolean)'] LOOP
		EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
	END LOOP;
END $$;
`,
	// 12: undolog_publish keeps the plan of its move. The move takes the
	// floor and the queue's top as arguments, and the plan cache, left to
	// choose, never judged its generic plan the cheaper: every publish
	// planned the move anew, in a process that lives on and in a backend a
	// pooler keeps warm alike. Now a backend plans it once. (CREATE OR
	// REPLACE resets it, as it does search_path.)
	`ALTER FUNCTION undolog_publish(boolean, text[], bigint[], text[], integer[]) SET plan_cache_mode = force_generic_plan`,
}
