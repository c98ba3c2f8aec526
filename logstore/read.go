package logstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// GetEffect returns an effect with its full history, undo entry and approval.
func (s *Store) GetEffect(ctx context.Context, id uint64) (model.EffectDetail, error) {
	var out model.EffectDetail
	found := false
	err := s.view(func(tx *bolt.Tx) error {
		e, err := getEffect(tx, id)
		if err != nil {
			return err
		}
		found = true
		out.Effect = e
		if out.History, err = effectHistory(tx, id, e.Session); err != nil {
			return err
		}
		if out.Undo, err = getUndo(tx, &e); err != nil {
			return err
		}
		out.Approval, err = getApproval(tx, id)
		return err
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: no effect %d", model.ErrNotFound, id)
	}
	return out, err
}

func effectHistory(tx *bolt.Tx, id uint64, session string) ([]model.HistoryRecord, error) {
	return readHistory(tx.Bucket(bHistory), itob(id), id, session)
}

func sessionHistory(tx *bolt.Tx, session string) ([]model.HistoryRecord, error) {
	return readHistory(tx.Bucket(bSessionHistory), namePrefix(session), 0, session)
}

// readHistory reads the history under prefix, which belongs to effectID (0
// for a session's own history) of session.
func readHistory(b *bolt.Bucket, prefix []byte, effectID uint64, session string) ([]model.HistoryRecord, error) {
	var out []model.HistoryRecord
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+4; k, v = c.Next() {
		var r model.HistoryRecord
		if err := decodeRecord(v, &r); err != nil {
			return nil, fmt.Errorf("%w: history record %x: %v", model.ErrCorrupt, k, err)
		}
		placeHistory(&r, effectID, session)
		if n := len(out); n > 0 && out[n-1].Seq == r.Seq-1 {
			linkHistory(&r, out[n-1].Hash)
		}
		out = append(out, r)
	}
	return out, nil
}

// placeHistory fills in the effect id and session a binary history record
// does not store: where it is kept says them.
func placeHistory(r *model.HistoryRecord, effectID uint64, session string) {
	if r.EffectID == 0 && r.Session == "" {
		r.EffectID, r.Session = effectID, session
	}
}

// linkHistory fills in the PrevHash a binary history record does not store:
// the hash of the record before it. The record's own hash covers it, so a
// record edited, dropped or moved still fails verification.
func linkHistory(r *model.HistoryRecord, prevHash string) {
	if r.PrevHash == "" && r.Seq > 1 {
		r.PrevHash = prevHash
	}
}

// SessionHistory returns the session's own transitions.
func (s *Store) SessionHistory(ctx context.Context, id string) ([]model.HistoryRecord, error) {
	var out []model.HistoryRecord
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		out, err = sessionHistory(tx, id)
		return err
	})
	return out, err
}

// EffectFilter selects effects. The most selective index among the filters
// given is walked (session, tool, state, tier); no filter walks the effects
// themselves. Results are newest first unless Ascending.
type EffectFilter struct {
	Session   string
	State     sm.State
	Tier      sm.Tier
	Tool      string
	Since     time.Time
	Limit     int
	Cursor    uint64 // id of the last effect of the previous page
	Ascending bool
}

// ListEffects returns the effects matching f and the cursor of the next page
// (0 when there is none).
func (s *Store) ListEffects(ctx context.Context, f EffectFilter) ([]model.Effect, uint64, error) {
	var out []model.Effect
	var next uint64
	err := s.view(func(tx *bolt.Tx) error {
		b, prefix := tx.Bucket(bEffects), []byte(nil)
		switch {
		case f.Session != "":
			b, prefix = tx.Bucket(bBySession), namePrefix(f.Session)
		case f.Tool != "":
			b, prefix = tx.Bucket(bByTool), namePrefix(f.Tool)
		case f.State != "":
			b, prefix = tx.Bucket(bByState), namePrefix(string(f.State))
		case f.Tier != "":
			b, prefix = tx.Bucket(bByTier), namePrefix(string(f.Tier))
		}
		return scan(b, prefix, f.Ascending, f.Cursor, func(id uint64) (bool, error) {
			e, err := getEffect(tx, id)
			if err != nil {
				return false, err
			}
			if !f.Since.IsZero() && e.CreatedAt.Before(f.Since) {
				// Ids grow with time: going back, nothing older follows.
				return f.Ascending, nil
			}
			if (f.Session != "" && e.Session != f.Session) || (f.Tool != "" && e.Tool != f.Tool) ||
				(f.State != "" && e.State != f.State) || (f.Tier != "" && e.Tier != f.Tier) {
				return true, nil
			}
			if f.Limit > 0 && len(out) == f.Limit {
				next = out[len(out)-1].ID
				return false, nil
			}
			out = append(out, e)
			return true, nil
		})
	})
	return out, next, err
}

// PendingApproval is a request awaiting a decision, with its effect.
type PendingApproval struct {
	model.Approval
	Effect model.Effect `json:"effect"`
}

// PendingApprovals returns up to limit (0: all) approval requests awaiting a
// decision, oldest first, and how many are waiting in all. Only the requests
// returned are read with their effects; the rest are only counted. Expired
// requests are not waiting: they are left out (and rejected as timed out by
// the next write that touches their session).
func (s *Store) PendingApprovals(ctx context.Context, session string, limit int) ([]PendingApproval, int, error) {
	var out []PendingApproval
	var waiting int
	now := s.now()
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bApprovalsOpen).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if session != "" && !openFor(v, session) {
				continue
			}
			full := limit > 0 && len(out) == limit
			if name, expires, known := parsePending(v); full && known && name != "" {
				if expires == 0 || now.UnixNano() < expires {
					waiting++ // counted from the index alone
				}
				continue
			}
			id := btoi(k)
			a, err := getApproval(tx, id)
			if err != nil {
				return err
			}
			if a == nil || (session != "" && a.Session != session) || (a.ExpiresAt != nil && !now.Before(*a.ExpiresAt)) {
				continue
			}
			waiting++
			if full {
				continue
			}
			e, err := getEffect(tx, id)
			if err != nil {
				return err
			}
			out = append(out, PendingApproval{Approval: *a, Effect: e})
		}
		return nil
	})
	return out, waiting, err
}

// UndoStack returns up to limit (0: all) of the session's undo entries, last
// in first out, and how many entries the session has.
func (s *Store) UndoStack(ctx context.Context, session string, limit int) ([]model.UndoEntry, int, error) {
	var out []model.UndoEntry
	var total int
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bUndo)
		return scan(b, namePrefix(session), false, 0, func(id uint64) (bool, error) {
			total++
			if limit > 0 && len(out) == limit {
				return true, nil // count the rest without reading them
			}
			u, err := getUndoOf(tx, session, id)
			if err != nil || u == nil {
				return false, err
			}
			out = append(out, *u)
			return true, nil
		})
	})
	return out, total, err
}

// ChangeRecord is one history record in the order the log recorded it.
type ChangeRecord struct {
	Position uint64              `json:"position"`
	Record   model.HistoryRecord `json:"record"`
}

// Changes returns up to limit history records (effects and sessions) recorded
// after position `after`, oldest first, and the position of the newest one.
// Followers poll it.
func (s *Store) Changes(ctx context.Context, after uint64, limit int) ([]ChangeRecord, uint64, error) {
	var out []ChangeRecord
	last := after
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bChanges).Cursor()
		for k, v := c.Seek(itob(after + 1)); k != nil; k, v = c.Next() {
			if limit > 0 && len(out) == limit {
				break
			}
			bucket, hkey, err := changeLocation(v)
			if err != nil {
				return fmt.Errorf("%w: change %x: %v", model.ErrCorrupt, k, err)
			}
			b := tx.Bucket(bucket)
			var r model.HistoryRecord
			if ok, err := getRecord(b, hkey, &r); err != nil {
				return err
			} else if !ok {
				continue // dropped by gc
			}
			if err := placeChange(tx, &r, bucket, hkey); err != nil {
				return err
			}
			if r.PrevHash == "" && r.Seq > 1 && len(hkey) > 4 {
				prevKey := binary.BigEndian.AppendUint32(append([]byte{}, hkey[:len(hkey)-4]...), r.Seq-1)
				var prev model.HistoryRecord
				if _, err := getRecord(b, prevKey, &prev); err != nil {
					return err
				}
				linkHistory(&r, prev.Hash)
			}
			last = btoi(k)
			out = append(out, ChangeRecord{Position: last, Record: r})
		}
		return nil
	})
	return out, last, err
}

// placeChange fills in the effect id and session of a record of the change
// feed from its key: the session of an effect's record is the effect's.
func placeChange(tx *bolt.Tx, r *model.HistoryRecord, bucket, key []byte) error {
	if r.EffectID != 0 || r.Session != "" || len(key) < 5 {
		return nil
	}
	if string(bucket) == string(bSessionHistory) {
		placeHistory(r, 0, string(key[:len(key)-5]))
		return nil
	}
	id := btoi(key[:8])
	e, err := getEffect(tx, id)
	if err != nil {
		return err
	}
	placeHistory(r, id, e.Session)
	return nil
}

// LastChange is the position of the newest history record: a cheap way for a
// viewer to tell whether anything changed since it last looked.
func (s *Store) LastChange(ctx context.Context) (uint64, error) {
	var last uint64
	err := s.view(func(tx *bolt.Tx) error {
		last = tx.Bucket(bChanges).Sequence()
		return nil
	})
	return last, err
}

// ExportRecord is one line of an export: what kind of record, and the record.
type ExportRecord struct {
	Type   string `json:"type"` // meta, session, session_history, effect, history, undo, approval
	Record any    `json:"record"`
}

// exportPage bounds how many effects an export reads in one transaction.
const exportPage = 256

// Export calls fn with every record of the log (or of one session), in an
// order that rebuilds it: meta, then per session its record and history, its
// effects each followed by their history, undo entry and approval. It reads
// in pages, each in a transaction of its own, and calls fn between them:
// a reader writing to a slow consumer (a pipe to less) never holds the log
// while it waits. A session's record and history are read with its first
// page of effects; a session gone (gc) between its pages ends early.
func (s *Store) Export(ctx context.Context, session string, fn func(ExportRecord) error) error {
	var page []ExportRecord
	emit := func(r ExportRecord) { page = append(page, r) }
	flush := func() error {
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		page = page[:0]
		return nil
	}
	err := s.view(func(tx *bolt.Tx) error {
		emit(ExportRecord{Type: "meta", Record: map[string]any{"schema_version": btoi(tx.Bucket(bMeta).Get(keySchema))}})
		if session != "" {
			_, err := getSession(tx, session)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	if session != "" {
		return s.exportSession(session, emit, flush)
	}
	for seq := uint64(0); ; {
		var ids []string
		err := s.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bSessionsByTime).Cursor()
			for k, v := c.Seek(itob(seq + 1)); k != nil && len(ids) < exportPage; k, v = c.Next() {
				ids, seq = append(ids, string(v)), btoi(k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return flush()
		}
		for _, id := range ids {
			if err := s.exportSession(id, emit, flush); err != nil {
				return err
			}
		}
	}
}

// exportSession emits session id's records, a page at a time, flushing
// each page once its transaction has ended.
func (s *Store) exportSession(id string, emit func(ExportRecord), flush func() error) error {
	for cursor, first := uint64(0), true; ; first = false {
		more := false
		err := s.view(func(tx *bolt.Tx) error {
			if first {
				sess, err := getSession(tx, id)
				if errors.Is(err, model.ErrNotFound) {
					return nil // dropped since it was listed
				} else if err != nil {
					return err
				}
				emit(ExportRecord{Type: "session", Record: sess})
				hist, err := sessionHistory(tx, id)
				if err != nil {
					return err
				}
				for _, r := range hist {
					emit(ExportRecord{Type: "session_history", Record: r})
				}
			}
			n := 0
			return scan(tx.Bucket(bBySession), namePrefix(id), true, cursor, func(eid uint64) (bool, error) {
				if n == exportPage {
					more = true
					return false, nil
				}
				n, cursor = n+1, eid
				return true, exportEffect(tx, eid, emit)
			})
		})
		if err != nil {
			return err
		}
		if err := flush(); err != nil || !more {
			return err
		}
	}
}

// exportEffect emits effect id with its history, undo entry and approval.
func exportEffect(tx *bolt.Tx, id uint64, emit func(ExportRecord)) error {
	e, err := getEffect(tx, id)
	if err != nil {
		return err
	}
	emit(ExportRecord{Type: "effect", Record: e})
	hist, err := effectHistory(tx, id, e.Session)
	if err != nil {
		return err
	}
	for _, r := range hist {
		emit(ExportRecord{Type: "history", Record: r})
	}
	if u, err := getUndo(tx, &e); err != nil {
		return err
	} else if u != nil {
		emit(ExportRecord{Type: "undo", Record: u})
	}
	if a, err := getApproval(tx, id); err != nil {
		return err
	} else if a != nil {
		emit(ExportRecord{Type: "approval", Record: a})
	}
	return nil
}

// UndoEntries returns the undo entries of the given effects of a session
// (those that have one), for views that show a page of effects.
func (s *Store) UndoEntries(ctx context.Context, session string, ids []uint64) (map[uint64]model.UndoEntry, error) {
	out := map[uint64]model.UndoEntry{}
	err := s.view(func(tx *bolt.Tx) error {
		for _, id := range ids {
			u, err := getUndoOf(tx, session, id)
			if err != nil {
				return err
			}
			if u != nil {
				out[id] = *u
			}
		}
		return nil
	})
	return out, err
}
