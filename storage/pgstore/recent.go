package pgstore

import (
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage/internal/record"
)

// recentRows are the effect and session rows this engine's writes committed
// last, as they wrote them. A write that begins by reading and locking one
// effect and its session (a commit, a start, a fail) decides on these rows
// instead, with no round trip for the read: its statements lock the session
// row, then the effect's, only where each is still as written here
// (compare-and-swap, sent with its other writes and its COMMIT). If another
// writer changed either since, the statement fails, the transaction rolls
// back, and the write runs again with a read. Nothing is decided on a row
// the database does not hold at the time of the write.
type recentRows struct {
	mu       sync.Mutex
	effects  map[uint64]recentEffect
	sessions map[string]recentRow
}

type recentEffect struct {
	session string
	row     recentRow
}

// recentRow is a row's record and state column (nil: NULL).
type recentRow struct {
	rec   []byte
	state *string
}

// recentMax bounds the rows kept; past it they are all let go.
const recentMax = 4096

func (r *recentRows) get(id uint64) (recentEffect, recentRow, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.effects[id]
	if !ok {
		return e, recentRow{}, false
	}
	s, ok := r.sessions[e.session]
	return e, s, ok
}

// keep records what a committed write left in the rows it wrote; a nil rec
// is a row deleted.
func (r *recentRows) keep(w *writes) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.effects == nil || len(r.effects) > recentMax || len(r.sessions) > recentMax {
		r.effects, r.sessions = map[uint64]recentEffect{}, map[string]recentRow{}
	}
	for id, e := range w.effects {
		if e.row.rec == nil {
			delete(r.effects, id)
		} else {
			r.effects[id] = e
		}
	}
	for id, s := range w.sessions {
		if s.rec == nil {
			delete(r.sessions, id)
		} else {
			r.sessions[id] = s
		}
	}
}

// forget lets go of rows a write found changed.
func (r *recentRows) forget(effect uint64, session string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.effects, effect)
	delete(r.sessions, session)
}

// writes are the effect and session rows a write transaction wrote.
type writes struct {
	effects  map[uint64]recentEffect
	sessions map[string]recentRow
}

func (w *writes) effect(id uint64, session string, rec []byte, state string) {
	if w.effects == nil {
		w.effects = map[uint64]recentEffect{}
	}
	w.effects[id] = recentEffect{session, recentRow{rec, &state}}
}

func (w *writes) session(id string, rec []byte, state string) {
	if w.sessions == nil {
		w.sessions = map[string]recentRow{}
	}
	w.sessions[id] = recentRow{rec, &state}
}

// errRead is a read asked for by a write deciding on recent rows: it runs
// again with reads.
var errRead = errors.New("pgstore: a write on recent rows reads")

// onRecent is a write transaction's use of recent rows: the effect and
// session it read from them, and the places its compare-and-swap
// statements hold in its queue, the session's first.
type onRecent struct {
	effect     uint64
	session    string
	e, s       recentRow
	eq, sq     *pgx.QueuedQuery
	eSet, sSet bool
}

// The compare-and-swap statements divide by the number of rows they found
// as expected: none, and the statement fails (division by zero) and the
// transaction with it. The one that only checks locks the row as a read
// FOR UPDATE would.
const (
	casSession = `WITH u AS (UPDATE undolog_sessions SET rec = $2, state = $3
		WHERE id = $1 AND rec = $4 AND state IS NOT DISTINCT FROM $5 RETURNING 1) SELECT 1 / (SELECT count(*)::int FROM u)`
	casEffect = `WITH u AS (UPDATE undolog_effects SET state = $2, rec = $3
		WHERE id = $1 AND rec = $4 AND state IS NOT DISTINCT FROM $5 RETURNING 1) SELECT 1 / (SELECT count(*)::int FROM u)`
	checkSession = `SELECT 1 / (SELECT count(*)::int FROM (SELECT 1 FROM undolog_sessions
		WHERE id = $1 AND rec = $2 AND state IS NOT DISTINCT FROM $3 FOR UPDATE) l)`
	checkEffect = `SELECT 1 / (SELECT count(*)::int FROM (SELECT 1 FROM undolog_effects
		WHERE id = $1 AND rec = $2 AND state IS NOT DISTINCT FROM $3 FOR UPDATE) l)`
)

// fromRecent decides on the recent rows of effect id and its session, if
// this engine holds them and the transaction has read nothing yet.
func (w *writer) fromRecent(id uint64) (model.Effect, bool, error) {
	if w.recent == nil || w.pipe.sent || w.onRecent != nil {
		return model.Effect{}, false, nil
	}
	re, rs, ok := w.recent.get(id)
	if !ok {
		return model.Effect{}, false, nil
	}
	var e model.Effect
	if err := record.Decode(re.row.rec, &e); err != nil {
		return e, false, nil // read it
	}
	w.onRecent = &onRecent{effect: id, session: re.session, e: re.row, s: rs,
		sq: w.pipe.pending.Queue(``), eq: w.pipe.pending.Queue(``)}
	w.pipe.noReads = true
	w.session.id, w.session.data, w.session.state = re.session, rs.rec, rs.state
	return e, true, nil
}

// putRecentSession and putRecentEffect write a recent row where it is still as read.
func (w *writer) putRecentSession(id string, rec []byte, state string) bool {
	r := w.onRecent
	if r == nil || r.sSet || id != r.session {
		return false
	}
	r.sq.SQL, r.sq.Arguments, r.sSet = casSession, []any{id, rec, state, r.s.rec, r.s.state}, true
	return true
}

func (w *writer) putRecentEffect(id uint64, rec []byte, state string) bool {
	r := w.onRecent
	if r == nil || r.eSet || id != r.effect {
		return false
	}
	r.eq.SQL, r.eq.Arguments, r.eSet = casEffect, []any{int64(id), state, rec, r.e.rec, r.e.state}, true
	return true
}

// checkRecent has the recent rows not written checked (and locked) where
// they hold their places: the decision stands on them too.
func (w *writer) checkRecent() {
	r := w.onRecent
	if r == nil {
		return
	}
	if !r.sSet {
		r.sq.SQL, r.sq.Arguments, r.sSet = checkSession, []any{r.session, r.s.rec, r.s.state}, true
	}
	if !r.eSet {
		r.eq.SQL, r.eq.Arguments, r.eSet = checkEffect, []any{int64(r.effect), r.e.rec, r.e.state}, true
	}
}
