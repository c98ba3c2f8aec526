package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
	"github.com/undolog/undolog/storage/internal/record"
)

// reader is a transaction as the rules read it. In a write transaction it
// locks the session and effect rows it reads (forUpdate).
type reader struct {
	ctx       context.Context
	tx        querier
	forUpdate bool
}

// writer is a write transaction; it keeps the history records it adds, to
// queue them for the change feed with its commit.
type writer struct {
	reader
	role    string
	changes []change
	// session is the record of the session of the effect read last,
	// read (and locked) with it: the rules read it next.
	session struct {
		id    string
		data  []byte
		state *string // the row's state column
	}
	// nextID is an effect id taken with a signature look-up that found
	// no owner (the id the intercept takes next), 0 if none.
	nextID uint64
	// ahead is the signature look-up made with the session's read
	// (LookAhead): sig, and the column read, once read.
	ahead struct {
		sig  string
		read bool
		id   int64
		// sessionSeq is the next session number, taken with the look-up
		// when the session was not there (an intercept makes it next), 0
		// if not.
		sessionSeq int64
	}
	// history holds the effect history rows added since the last
	// statement sent: they go as one INSERT, in the place of the first
	// (queueHistory), since a statement's start (its triggers' WHEN
	// clauses parsed anew, its indexes opened) costs the server more than
	// a row. Which check refuses a move first stays as it was.
	history historyRows
	pipe    *pipelined // the transaction, whose queue the INSERT holds a place in
	// recent, if set, are the rows the engine wrote last, which a write
	// that begins with an effect's read may decide on (onRecent, then).
	recent   *recentRows
	onRecent *onRecent
	wrote    writes // the effect and session rows written
	// taken are the effect ids this transaction took: no undo entry can
	// be there for one yet.
	taken []uint64
	// goesOn: its caller acts once it is committed (GoesOnAtCommit).
	goesOn bool
	// wakes: its commit wakes the engines waiting (WakeWaiters).
	wakes bool
}

// historyRows are effect history rows as the columns of one INSERT.
type historyRows struct {
	insert                                 *pgx.QueuedQuery // its place in the queue, arguments still to come
	effects                                []int64
	seqs                                   []int32
	recs                                   [][]byte
	roles, kinds, states, triggers, actors []string
}

// queueHistory gives the INSERT of the history rows held back its
// arguments; the transaction calls it before it sends anything.
func (w *writer) queueHistory() {
	h := &w.history
	if h.insert == nil {
		return
	}
	if n := len(h.effects); n <= valuesRows {
		args := make([]any, 0, 8*n)
		for i := range n {
			args = append(args, h.effects[i], h.seqs[i], h.recs[i], h.roles[i], h.kinds[i], h.states[i], h.triggers[i], h.actors[i])
		}
		h.insert.SQL, h.insert.Arguments = historyValues[n], args
	} else {
		h.insert.SQL = historyInsert + ` SELECT * FROM unnest($1::bigint[], $2::integer[], $3::bytea[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])`
		h.insert.Arguments = []any{h.effects, h.seqs, h.recs, h.roles, h.kinds, h.states, h.triggers, h.actors}
	}
	*h = historyRows{}
}

// Role is the role the engine authenticates as; the database checks that
// each history row's role is its session_user.
func (w *writer) Role() string { return w.role }

type change struct {
	kind     string
	effectID uint64
	session  string
	seq      uint32
}

var (
	_ storage.ReadTx   = reader{}
	_ storage.WriteTx  = (*writer)(nil)
	_ storage.Identity = (*writer)(nil)
)

func (r reader) lock() string {
	if r.forUpdate {
		return " FOR UPDATE"
	}
	return ""
}

// decode reads a stored record, naming it if it is damaged.
func decode(data []byte, v any, what string) error {
	if err := record.Decode(data, v); err != nil {
		return fmt.Errorf("%w: record %s: %v", model.ErrCorrupt, what, err)
	}
	return nil
}

func (r reader) Session(id string) (model.Session, error) {
	var data []byte
	var state *string
	err := r.tx.QueryRow(r.ctx, `SELECT rec, state FROM undolog_sessions WHERE id = $1`+r.lock(), id).Scan(&data, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return model.Session{}, fmt.Errorf("%w: no session %q", model.ErrNotFound, id)
	} else if err != nil {
		return model.Session{}, err
	}
	return decodeSession(id, data, state)
}

// decodeSession reads a session's record and holds it to the row's state
// column, which the database guards (a halted session's state changes only
// by an approver's hand: the migration to 7): a record written back from
// before, a halted session's active one, disagrees with it.
func decodeSession(id string, data []byte, state *string) (model.Session, error) {
	var s model.Session
	if err := decode(data, &s, "sessions/"+id); err != nil {
		return s, err
	}
	if state != nil && *state != string(s.State) { // NULL: a row not written since the migration
		rec, row := model.Apart(string(s.State), *state)
		return s, fmt.Errorf("%w: session %s's record says %s, its row %s: it was changed outside undolog; run undolog verify", model.ErrCorrupt, id, rec, row)
	}
	return s, nil
}

// Effect reads and locks an effect and its session, which the rules read
// next: one round trip for the two. The session is locked first, as an
// intercept locks it before the effect it repeats: writers that took them
// in the other order deadlocked, and waited a second for PostgreSQL to say.
func (w *writer) Effect(id uint64) (model.Effect, error) {
	if e, ok, err := w.fromRecent(id); ok || err != nil {
		return e, err
	}
	var e model.Effect
	var data, sdata []byte
	var session string
	var state *string
	err := w.tx.QueryRow(w.ctx, `WITH s AS MATERIALIZED (SELECT id, rec, state FROM undolog_sessions
			WHERE id = (SELECT session FROM undolog_effects WHERE id = $1) FOR UPDATE)
		SELECT e.rec, s.id, s.rec, s.state FROM s JOIN undolog_effects e ON e.session = s.id WHERE e.id = $1 FOR UPDATE OF e`,
		int64(id)).Scan(&data, &session, &sdata, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return w.reader.Effect(id) // not there, or without its session
	} else if err != nil {
		return e, err
	}
	w.session.id, w.session.data, w.session.state = session, sdata, state
	return e, decode(data, &e, fmt.Sprintf("effects/%d", id))
}

// GoesOnAtCommit has the write's changes published after it returns: by
// the engine's next write, which carries the publish with its COMMIT (the
// end of a quick call), or by the publisher past its gap.
func (w *writer) GoesOnAtCommit() { w.goesOn = true }

// WakeWaiters has the write's commit notify the listening engines, in
// its round trip, that a decision was made (wakeSQL).
func (w *writer) WakeWaiters() { w.wakes = true }

// LookAhead has the next read of a session look up sig too (an intercept
// reads its session, then its signature): one round trip for the two.
func (w *writer) LookAhead(sig string) { w.ahead.sig, w.ahead.read, w.ahead.sessionSeq = sig, false, 0 }

func (w *writer) Session(id string) (model.Session, error) {
	if w.session.data == nil || w.session.id != id {
		if w.ahead.sig != "" && !w.ahead.read {
			return w.sessionAndSignature(id)
		}
		return w.reader.Session(id)
	}
	data, state := w.session.data, w.session.state
	w.session.id, w.session.data, w.session.state = "", nil, nil
	return decodeSession(id, data, state)
}

func (r reader) Effect(id uint64) (model.Effect, error) {
	var e model.Effect
	var data []byte
	err := r.tx.QueryRow(r.ctx, `SELECT rec FROM undolog_effects WHERE id = $1`+r.lock(), int64(id)).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("%w: no effect %d", model.ErrNotFound, id)
	} else if err != nil {
		return e, err
	}
	return e, decode(data, &e, fmt.Sprintf("effects/%d", id))
}

func (r reader) EffectHistory(id uint64, session string) ([]model.HistoryRecord, error) {
	return r.history(`SELECT seq, rec FROM undolog_history WHERE effect_id = $1 ORDER BY seq`, int64(id), id, session)
}

func (r reader) SessionHistory(session string) ([]model.HistoryRecord, error) {
	return r.history(`SELECT seq, rec FROM undolog_session_history WHERE session = $1 ORDER BY seq`, session, 0, session)
}

func (r reader) history(query string, key any, effectID uint64, session string) ([]model.HistoryRecord, error) {
	rows, err := r.tx.Query(r.ctx, query, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []model.HistoryRecord
	for rows.Next() {
		var seq int32
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			return nil, err
		}
		var h model.HistoryRecord
		if err := record.Decode(data, &h); err != nil {
			return nil, fmt.Errorf("%w: history record %d of %v: %v", model.ErrCorrupt, seq, key, err)
		}
		record.PlaceHistory(&h, effectID, session)
		if n := len(out); n > 0 && out[n-1].Seq == h.Seq-1 {
			record.LinkHistory(&h, out[n-1].Hash)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func (r reader) Undo(session string, id uint64, known *model.Effect) (*model.UndoEntry, error) {
	var data []byte
	err := r.tx.QueryRow(r.ctx, `SELECT rec FROM undolog_undo WHERE session = $1 AND effect_id = $2`, session, int64(id)).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var u model.UndoEntry
	if err := decode(data, &u, fmt.Sprintf("undo/%s/%d", session, id)); err != nil {
		return nil, err
	}
	u.EffectID, u.Session = id, session
	if record.UndoNeedsEffect(&u) {
		e := known
		if e == nil || e.ID != id {
			got, err := r.Effect(id)
			if err != nil {
				return nil, err
			}
			e = &got
		}
		if err := record.UndoFromEffect(&u, e); err != nil {
			return nil, err
		}
	}
	return &u, nil
}

func (r reader) Approval(id uint64) (*model.Approval, error) {
	var data []byte
	err := r.tx.QueryRow(r.ctx, `SELECT rec FROM undolog_approvals WHERE effect_id = $1`, int64(id)).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var a model.Approval
	if err := decode(data, &a, fmt.Sprintf("approvals/%d", id)); err != nil {
		return nil, err
	}
	a.EffectID = id
	return &a, nil
}

func (r reader) SignatureOwner(sig string) (uint64, bool, error) {
	var id int64
	err := r.tx.QueryRow(r.ctx, `SELECT effect_id FROM undolog_signatures WHERE sig = $1`, sig).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return uint64(id), err == nil, err
}

// signatureOwner is SignatureOwner's look-up: the owner's id, or the next
// effect id negated.
const signatureOwner = `SELECT coalesce((SELECT effect_id FROM undolog_signatures WHERE sig = $1),
		-nextval('undolog_effect_ids'))`

// sessionAndSignature reads and locks session id and then looks up the
// signature LookAhead was given, in one round trip; SignatureOwner takes
// the look-up's answer. It is made once the session's row is locked, as
// it would be after.
func (w *writer) sessionAndSignature(id string) (model.Session, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT rec, state FROM undolog_sessions WHERE id = $1 FOR UPDATE`, id)
	b.Queue(`SELECT (`+signatureOwner+`), CASE WHEN NOT EXISTS (SELECT 1 FROM undolog_sessions WHERE id = $2)
		THEN nextval('undolog_session_seqs') ELSE 0 END`, w.ahead.sig, id)
	br := w.tx.SendBatch(w.ctx, b)
	defer br.Close()
	var data []byte
	var state *string
	serr := br.QueryRow().Scan(&data, &state)
	if serr != nil && !errors.Is(serr, pgx.ErrNoRows) {
		return model.Session{}, serr
	}
	if err := br.QueryRow().Scan(&w.ahead.id, &w.ahead.sessionSeq); err != nil {
		return model.Session{}, err
	}
	w.ahead.read = true
	if serr != nil {
		return model.Session{}, fmt.Errorf("%w: no session %q", model.ErrNotFound, id)
	}
	return decodeSession(id, data, state)
}

// SignatureOwner, in a write, takes the next effect id with a look-up that
// finds no owner: the intercept that looked takes one next, and this saves
// it the round trip. COALESCE evaluates nextval only then; a refused
// intercept leaves its id unused, as a rolled-back one does.
func (w *writer) SignatureOwner(sig string) (uint64, bool, error) {
	var id int64
	if w.ahead.read && w.ahead.sig == sig {
		id = w.ahead.id
		w.ahead.sig, w.ahead.read = "", false
	} else if err := w.tx.QueryRow(w.ctx, signatureOwner, sig).Scan(&id); err != nil {
		return 0, false, err
	}
	if id < 0 {
		w.nextID = uint64(-id)
		return 0, false, nil
	}
	return uint64(id), true, nil
}

// indexColumns are the columns of the effect indexes, by storage.Index.
var indexColumns = map[storage.Index]string{
	storage.BySession: "session", storage.ByTool: "tool", storage.ByState: "state", storage.ByTier: "tier",
}

// page is how many ids a walk reads per query.
const page = 512

func (r reader) Effects(ix storage.Index, name string, asc bool, cursor uint64, fn func(id uint64) (bool, error)) error {
	table, where := "undolog_effects", "TRUE"
	args := []any{}
	switch col, ok := indexColumns[ix]; {
	case ix == storage.AllEffects:
	case ix == storage.WithUndo:
		table, where = "undolog_undo", "session = $3"
		args = append(args, name)
	case ok:
		where = col + " = $3"
		args = append(args, name)
	default:
		return fmt.Errorf("no effect index %d", ix)
	}
	idCol := "id"
	if table == "undolog_undo" {
		idCol = "effect_id"
	}
	cmp, order, cursor := direction(asc, cursor)
	query := fmt.Sprintf(`SELECT %[1]s FROM %[2]s WHERE %[3]s AND %[1]s %[4]s $1 ORDER BY %[1]s %[5]s LIMIT $2`, idCol, table, where, cmp, order)
	return r.walkIDs(query, cursor, args, fn)
}

// direction is the comparison and order of a walk of ids after cursor, and
// the cursor to start from (0 going down: from the top).
func direction(asc bool, cursor uint64) (cmp, order string, from uint64) {
	if asc {
		return ">", "ASC", cursor
	}
	if cursor == 0 {
		cursor = 1<<63 - 1
	}
	return "<", "DESC", cursor
}

// walkIDs pages through the ids of query ($1 the cursor, $2 the page size,
// then rest), calling fn with each until it returns false.
func (r reader) walkIDs(query string, cursor uint64, rest []any, fn func(id uint64) (bool, error)) error {
	for {
		ids, err := r.ids(query, append([]any{int64(cursor), page}, rest...)...)
		if err != nil {
			return err
		}
		for _, id := range ids {
			more, err := fn(id)
			if err != nil || !more {
				return err
			}
		}
		if len(ids) < page {
			return nil
		}
		cursor = ids[len(ids)-1]
	}
}

// ids runs a query of one bigint column.
func (r reader) ids(query string, args ...any) ([]uint64, error) {
	rows, err := r.tx.Query(r.ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, uint64(id))
	}
	return out, rows.Err()
}

func (r reader) Sessions(asc bool, cursor uint64, fn func(seq uint64, id string) (bool, error)) error {
	order, cmp := "ASC", ">"
	if !asc {
		order, cmp = "DESC", "<"
		if cursor == 0 {
			cursor = 1<<63 - 1
		}
	}
	query := fmt.Sprintf(`SELECT seq, id FROM undolog_sessions WHERE seq %s $1 ORDER BY seq %s LIMIT $2`, cmp, order)
	for {
		type entry struct {
			seq uint64
			id  string
		}
		var batch []entry
		rows, err := r.tx.Query(r.ctx, query, int64(cursor), page)
		if err != nil {
			return err
		}
		for rows.Next() {
			var seq int64
			var id string
			if err := rows.Scan(&seq, &id); err != nil {
				rows.Close()
				return err
			}
			batch = append(batch, entry{uint64(seq), id})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, e := range batch {
			more, err := fn(e.seq, e.id)
			if err != nil || !more {
				return err
			}
		}
		if len(batch) < page {
			return nil
		}
		cursor = batch[len(batch)-1].seq
	}
}

func (r reader) OpenRequests(session string, fn func(storage.OpenRequest) (bool, error)) error {
	query, args := `SELECT effect_id, session, expires FROM undolog_approvals_open ORDER BY effect_id`, []any{}
	if session != "" {
		query, args = `SELECT effect_id, session, expires FROM undolog_approvals_open WHERE session = $1 ORDER BY effect_id`, []any{session}
	}
	rows, err := r.tx.Query(r.ctx, query, args...)
	if err != nil {
		return err
	}
	var batch []storage.OpenRequest
	for rows.Next() {
		var id, expires int64
		var name string
		if err := rows.Scan(&id, &name, &expires); err != nil {
			rows.Close()
			return err
		}
		req := storage.OpenRequest{EffectID: uint64(id), Session: name, Known: true}
		if expires != 0 {
			req.Expires = time.Unix(0, expires).UTC()
		}
		batch = append(batch, req)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, req := range batch {
		more, err := fn(req)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (r reader) Changes(after uint64, fn func(pos uint64, rec model.HistoryRecord) (bool, error)) error {
	const query = `SELECT c.pos, c.kind, c.effect_id, c.session, c.seq,
		CASE WHEN c.kind = 'E' THEN h.rec ELSE sh.rec END,
		CASE WHEN c.kind = 'E' THEN hp.rec ELSE shp.rec END
	FROM undolog_changes c
	LEFT JOIN undolog_history h ON c.kind = 'E' AND h.effect_id = c.effect_id AND h.seq = c.seq
	LEFT JOIN undolog_history hp ON c.kind = 'E' AND hp.effect_id = c.effect_id AND hp.seq = c.seq - 1
	LEFT JOIN undolog_session_history sh ON c.kind = 'S' AND sh.session = c.session AND sh.seq = c.seq
	LEFT JOIN undolog_session_history shp ON c.kind = 'S' AND shp.session = c.session AND shp.seq = c.seq - 1
	WHERE c.pos > $1 ORDER BY c.pos LIMIT $2`
	for {
		type entry struct {
			pos uint64
			rec model.HistoryRecord
		}
		var batch []entry
		last, n := after, 0
		rows, err := r.tx.Query(r.ctx, query, int64(after), page)
		if err != nil {
			return err
		}
		for rows.Next() {
			var pos, effectID int64
			var seq int32
			var kind, session string
			var data, prev []byte
			if err := rows.Scan(&pos, &kind, &effectID, &session, &seq, &data, &prev); err != nil {
				rows.Close()
				return err
			}
			n, last = n+1, uint64(pos)
			if data == nil {
				continue // dropped by gc
			}
			var h model.HistoryRecord
			if err := record.Decode(data, &h); err != nil {
				rows.Close()
				return fmt.Errorf("%w: change %d: %v", model.ErrCorrupt, pos, err)
			}
			record.PlaceHistory(&h, uint64(effectID), session)
			if prev != nil {
				var p model.HistoryRecord
				if err := record.Decode(prev, &p); err != nil {
					rows.Close()
					return fmt.Errorf("%w: change %d: %v", model.ErrCorrupt, pos, err)
				}
				record.LinkHistory(&h, p.Hash)
			}
			batch = append(batch, entry{uint64(pos), h})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, e := range batch {
			more, err := fn(e.pos, e.rec)
			if err != nil || !more {
				return err
			}
		}
		if n < page {
			return nil
		}
		after = last
	}
}

// LastChange is the newest position given; changes committed but not yet
// given one (their writer is about to) are not in the feed yet.
func (r reader) LastChange() (uint64, error) {
	var n int64
	err := r.tx.QueryRow(r.ctx, `SELECT coalesce(max(pos), 0) FROM undolog_changes`).Scan(&n)
	return uint64(n), err
}

func (r reader) SchemaVersion() uint64 {
	v, _ := schemaVersion(r.ctx, r.tx)
	return v
}

func (w *writer) next(sequence string) (uint64, error) {
	var n int64
	err := w.tx.QueryRow(w.ctx, `SELECT nextval($1::regclass)`, sequence).Scan(&n)
	return uint64(n), err
}

func (w *writer) NextEffectID() (uint64, error) {
	id := w.nextID
	w.nextID = 0
	if id == 0 {
		var err error
		if id, err = w.next("undolog_effect_ids"); err != nil {
			return 0, err
		}
	}
	w.taken = append(w.taken, id)
	return id, nil
}

func (w *writer) NextSessionSeq() (uint64, error) {
	if n := w.ahead.sessionSeq; n != 0 {
		w.ahead.sessionSeq = 0
		return uint64(n), nil
	}
	return w.next("undolog_session_seqs")
}

func (w *writer) ReserveIDs(effect, sessionSeq uint64) error {
	// setval is not undone by a rollback: a reservation that stays only
	// leaves ids unused. An id taken before may be one reserved now.
	w.nextID, w.ahead.sessionSeq = 0, 0
	for _, r := range []struct {
		sequence string
		n        uint64
	}{{"undolog_effect_ids", effect}, {"undolog_session_seqs", sessionSeq}} {
		if r.n == 0 {
			continue
		}
		if err := w.exec(`SELECT setval($1::regclass, $2) FROM (SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS used FROM `+
			r.sequence+`) s WHERE used < $2`, r.sequence, int64(r.n)); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) exec(query string, args ...any) error {
	_, err := w.tx.Exec(w.ctx, query, args...)
	return err
}

func (w *writer) InsertSession(s *model.Session) error {
	w.session.id, w.session.data = "", nil
	data, err := record.Encode(s)
	if err != nil {
		return err
	}
	w.wrote.session(s.ID, data, string(s.State))
	return w.exec(`INSERT INTO undolog_sessions (id, seq, rec, state) VALUES ($1, $2, $3, $4)`, s.ID, int64(s.Seq), data, string(s.State))
}

func (w *writer) PutSession(s *model.Session) error {
	w.session.id, w.session.data = "", nil
	data, err := record.Encode(s)
	if err != nil {
		return err
	}
	w.wrote.session(s.ID, data, string(s.State))
	if w.putRecentSession(s.ID, data, string(s.State)) {
		return nil
	}
	return w.exec(`UPDATE undolog_sessions SET rec = $2, state = $3 WHERE id = $1`, s.ID, data, string(s.State))
}

func (w *writer) PutEffect(e *model.Effect, from sm.State) error {
	data, err := record.Encode(e)
	if err != nil {
		return err
	}
	w.wrote.effect(e.ID, e.Session, data, string(e.State))
	if from == "" {
		return w.exec(`INSERT INTO undolog_effects (id, session, tool, tier, state, rec) VALUES ($1, $2, $3, $4, $5, $6)`,
			int64(e.ID), e.Session, e.Tool, string(e.Tier), string(e.State), data)
	}
	if w.putRecentEffect(e.ID, data, string(e.State)) {
		return nil
	}
	return w.exec(`UPDATE undolog_effects SET state = $2, rec = $3 WHERE id = $1`, int64(e.ID), string(e.State), data)
}

func (w *writer) SetSignatureOwner(sig string, id uint64) error {
	return w.exec(`INSERT INTO undolog_signatures (sig, effect_id) VALUES ($1, $2)`, sig, int64(id))
}

func (w *writer) MoveSignatureOwner(sig string, from, to uint64) error {
	// A read, not a queued write: the answer says whether from owned it.
	var moved int64
	err := w.tx.QueryRow(w.ctx, `UPDATE undolog_signatures SET effect_id = $3 WHERE sig = $1 AND effect_id = $2 RETURNING effect_id`,
		sig, int64(from), int64(to)).Scan(&moved)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: effect %d does not own signature %.16s", model.ErrConflict, from, sig)
	}
	return err
}

func (w *writer) AddHistory(h *model.HistoryRecord) error {
	data, err := record.Encode(h)
	if err != nil {
		return err
	}
	if h.Kind == model.KindSession {
		err = w.exec(`INSERT INTO undolog_session_history (session, seq, rec, role, to_state, trigger) VALUES ($1, $2, $3, $4, $5, $6)`,
			h.Session, int32(h.Seq), data, h.Role, h.To, h.Trigger)
		w.changes = append(w.changes, change{kind: "S", session: h.Session, seq: h.Seq})
		return err
	}
	r := &w.history
	if r.insert == nil {
		r.insert = w.pipe.pending.Queue(``) // queueHistory writes it
	}
	r.effects, r.seqs, r.recs = append(r.effects, int64(h.EffectID)), append(r.seqs, int32(h.Seq)), append(r.recs, data)
	r.roles, r.kinds, r.states = append(r.roles, h.Role), append(r.kinds, h.Kind), append(r.states, h.To)
	r.triggers, r.actors = append(r.triggers, h.Trigger), append(r.actors, h.Actor)
	w.changes = append(w.changes, change{kind: "E", effectID: h.EffectID, session: h.Session, seq: h.Seq})
	return nil
}

// queueChanges queues the transaction's history records for the change
// feed, last thing before the commit, and says whether there were any: once
// they are committed, the engine's publisher gives them their positions
// (publishLater). Giving them here, under the feed's lock, made every
// commit that found the lock taken wait for the holder's, or queue anyway.
func (w *writer) queueChanges() bool {
	if len(w.changes) == 0 {
		return false
	}
	if n := len(w.changes); n <= valuesRows {
		args := make([]any, 0, 4*n)
		for _, c := range w.changes {
			args = append(args, c.kind, int64(c.effectID), c.session, int32(c.seq))
		}
		w.exec(changesValues[n], args...)
		return true
	}
	kinds, sessions := make([]string, len(w.changes)), make([]string, len(w.changes))
	effects, seqs := make([]int64, len(w.changes)), make([]int32, len(w.changes))
	for i, c := range w.changes {
		kinds[i], sessions[i], effects[i], seqs[i] = c.kind, c.session, int64(c.effectID), int32(c.seq)
	}
	w.exec(changesInsert+` SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::integer[])`, kinds, effects, sessions, seqs)
	return true
}

func (w *writer) PutUndo(u *model.UndoEntry) error {
	data, err := record.Encode(u)
	if err != nil {
		return err
	}
	if slices.Contains(w.taken, u.EffectID) {
		// A plain INSERT costs the server less than one ON CONFLICT.
		return w.exec(`INSERT INTO undolog_undo (session, effect_id, rec, state) VALUES ($1, $2, $3, $4)`,
			u.Session, int64(u.EffectID), data, string(u.State))
	}
	return w.exec(`INSERT INTO undolog_undo (session, effect_id, rec, state) VALUES ($1, $2, $3, $4)
		ON CONFLICT (session, effect_id) DO UPDATE SET rec = EXCLUDED.rec, state = EXCLUDED.state`, u.Session, int64(u.EffectID), data, string(u.State))
}

func (w *writer) PutApproval(a *model.Approval) error {
	data, err := record.Encode(a)
	if err != nil {
		return err
	}
	return w.exec(`INSERT INTO undolog_approvals (effect_id, rec) VALUES ($1, $2)
		ON CONFLICT (effect_id) DO UPDATE SET rec = EXCLUDED.rec`, int64(a.EffectID), data)
}

func (w *writer) OpenRequest(id uint64, session string, expires *time.Time) error {
	var at int64
	if expires != nil {
		at = expires.UnixNano()
	}
	return w.exec(`INSERT INTO undolog_approvals_open (effect_id, session, expires) VALUES ($1, $2, $3)
		ON CONFLICT (effect_id) DO UPDATE SET session = EXCLUDED.session, expires = EXCLUDED.expires`, int64(id), session, at)
}

// CloseRequest deletes through undolog_close_request: writers have no
// DELETE on the table, which would let them lock it whole.
func (w *writer) CloseRequest(id uint64) error {
	return w.exec(`SELECT undolog_close_request($1)`, int64(id))
}

func (w *writer) DeleteEffect(e *model.Effect) error {
	w.queueHistory() // the deletes, which may be of its rows, come after
	w.wrote.effect(e.ID, e.Session, nil, "")
	id := int64(e.ID)
	for _, q := range []string{
		`DELETE FROM undolog_history WHERE effect_id = $1`,
		`DELETE FROM undolog_undo WHERE effect_id = $1`,
		`DELETE FROM undolog_approvals WHERE effect_id = $1`,
		`DELETE FROM undolog_approvals_open WHERE effect_id = $1`,
		`DELETE FROM undolog_effects WHERE id = $1`,
	} {
		if err := w.exec(q, id); err != nil {
			return err
		}
	}
	if e.ReplayOf == nil {
		return w.exec(`DELETE FROM undolog_signatures WHERE sig = $1 AND effect_id = $2`, e.CallSignature, id)
	}
	return nil
}

func (w *writer) DeleteSession(s *model.Session) error {
	w.queueHistory()
	w.session.id, w.session.data = "", nil
	w.wrote.session(s.ID, nil, "")
	if err := w.exec(`DELETE FROM undolog_session_history WHERE session = $1`, s.ID); err != nil {
		return err
	}
	if err := w.exec(`DELETE FROM undolog_sessions WHERE id = $1`, s.ID); err != nil {
		return err
	}
	// undolog_publish gives positions only to changes whose record exists:
	// this one, of seq 0 (a session's history starts at 1), takes its
	// position here, under the feed's lock, as a publish does. Waiters hear
	// of it with the commit.
	if err := w.exec(`SELECT 1 FROM undolog_feed_floor FOR UPDATE`); err != nil {
		return err
	}
	return w.exec(`WITH ins AS (INSERT INTO undolog_changes (pos, kind, effect_id, session, seq)
		SELECT coalesce(max(pos), 0) + 1, 'S', 0, $1, 0 FROM undolog_changes RETURNING pos)
		SELECT pg_notify('undolog_changes', coalesce(current_schema(), '') || ' ' || pos) FROM ins`, s.ID)
}

// historyInsert is the head of the INSERT of effect history rows; the
// columns beside the record are what the database's trigger checks the move
// by (see the migration to rolesSchema).
const historyInsert = `INSERT INTO undolog_history (effect_id, seq, rec, role, kind, to_state, trigger, actor)`

// valuesRows is the most rows an INSERT lists as VALUES; more go as arrays
// (unnest). For a lifecycle's one to three rows VALUES costs the server less
// (no function scan), and each count is a statement of its own.
const valuesRows = 4

// changesInsert is the head of the INSERT of changes queued for the feed.
const changesInsert = `INSERT INTO undolog_changes_pending (kind, effect_id, session, seq)`

// historyValues and changesValues are their INSERTs of 1 to valuesRows rows
// as VALUES, by the number of rows.
var (
	historyValues = valuesInserts(historyInsert, 8)
	changesValues = valuesInserts(changesInsert, 4)
)

// valuesInserts is head followed by VALUES of n rows of cols parameters, at
// n, for n up to valuesRows.
func valuesInserts(head string, cols int) []string {
	out := make([]string, valuesRows+1)
	for rows := 1; rows <= valuesRows; rows++ {
		var b strings.Builder
		b.WriteString(head)
		b.WriteString(" VALUES ")
		for r := range rows {
			if r > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for c := range cols {
				if c > 0 {
					b.WriteString(", ")
				}
				b.WriteByte('$')
				b.WriteString(strconv.Itoa(r*cols + c + 1))
			}
			b.WriteByte(')')
		}
		out[rows] = b.String()
	}
	return out
}
