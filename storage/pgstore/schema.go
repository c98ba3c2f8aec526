package pgstore

// SchemaVersion is the schema this build writes. A database with a higher
// version is refused (model.ErrNewerSchema); a lower one is migrated up.
const SchemaVersion = 2

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
	// 2: effect ids and session seqs come from sequences, so that writers
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
-- and wait is false: it returns false then).
CREATE FUNCTION undolog_publish(wait boolean, kinds text[], effects bigint[], sessions text[], seqs integer[])
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	last bigint;
	queued bigint := 0;
	own bigint := coalesce(cardinality(kinds), 0);
BEGIN
	IF wait THEN
		PERFORM pg_advisory_xact_lock(8461811179599128432);
	ELSIF NOT pg_try_advisory_xact_lock(8461811179599128432) THEN
		INSERT INTO undolog_changes_pending (kind, effect_id, session, seq)
			SELECT * FROM unnest(kinds, effects, sessions, seqs);
		RETURN false;
	END IF;
	SELECT coalesce(max(pos), 0) INTO last FROM undolog_changes;
	IF EXISTS (SELECT 1 FROM undolog_changes_pending) THEN
		WITH m AS (DELETE FROM undolog_changes_pending RETURNING id, kind, effect_id, session, seq)
		INSERT INTO undolog_changes (pos, kind, effect_id, session, seq)
			SELECT last + row_number() OVER (ORDER BY id), kind, effect_id, session, seq FROM m;
		GET DIAGNOSTICS queued = ROW_COUNT;
	END IF;
	IF own > 0 THEN
		INSERT INTO undolog_changes (pos, kind, effect_id, session, seq)
			SELECT last + queued + o, k, e, s, q FROM unnest(kinds, effects, sessions, seqs) WITH ORDINALITY AS u(k, e, s, q, o);
	END IF;
	RETURN true;
END $$;
`,
}
