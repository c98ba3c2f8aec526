package boltfile

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
	"github.com/undolog/undolog/storage/internal/record"
)

// txReader is a bbolt transaction as the rules read it.
type txReader struct{ tx *readTx }

// txWriter is the committer's write transaction as the rules write it.
type txWriter struct {
	txReader
	w *writeTx
}

var (
	_ storage.ReadTx  = txReader{}
	_ storage.WriteTx = txWriter{}
)

func (r txReader) Session(id string) (model.Session, error) { return getSession(r.tx, id) }
func (r txReader) Effect(id uint64) (model.Effect, error)   { return getEffect(r.tx, id) }

func (r txReader) EffectHistory(id uint64, session string) ([]model.HistoryRecord, error) {
	return effectHistory(r.tx, id, session)
}

func (r txReader) SessionHistory(session string) ([]model.HistoryRecord, error) {
	return sessionHistory(r.tx, session)
}

func (r txReader) Undo(session string, id uint64, known *model.Effect) (*model.UndoEntry, error) {
	if known != nil && known.ID == id {
		return getUndo(r.tx, known)
	}
	return getUndoOf(r.tx, session, id)
}

func (r txReader) Approval(id uint64) (*model.Approval, error) { return getApproval(r.tx, id) }

func (r txReader) SignatureOwner(sig string) (uint64, bool, error) {
	v := signatureOwner(r.tx, sig)
	if v == nil {
		return 0, false, nil
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("%w: the signature index entry of %.16s is malformed", model.ErrCorrupt, sig)
	}
	return btoi(v), true, nil
}

// indexBuckets are the buckets of the effect indexes, by storage.Index.
var indexBuckets = map[storage.Index][]byte{
	storage.BySession: bBySession, storage.ByTool: bByTool, storage.ByState: bByState,
	storage.ByTier: bByTier, storage.WithUndo: bUndo, storage.ByUndoState: bUndoByState,
}

func (r txReader) Effects(ix storage.Index, name string, asc bool, cursor uint64, fn func(id uint64) (bool, error)) error {
	if ix == storage.AllEffects {
		// A walk of every effect (a whole-log listing, export's count)
		// touches the records' pages: it gives them back as it goes.
		return scan(r.tx.Bucket(bEffects), nil, asc, cursor, func(id uint64) (bool, error) {
			r.tx.walk()
			return fn(id)
		})
	}
	b, ok := indexBuckets[ix]
	if !ok {
		return fmt.Errorf("no effect index %d", ix)
	}
	if r.tx.Bucket(b) == nil {
		// An index a log written before lacks (schema 6) may give more.
		return scan(r.tx.Bucket(bEffects), nil, asc, cursor, fn)
	}
	return scan(r.tx.Bucket(b), namePrefix(name), asc, cursor, fn)
}

func (r txReader) Sessions(asc bool, cursor uint64, fn func(seq uint64, id string) (bool, error)) error {
	c := r.tx.Bucket(bSessionsByTime).Cursor()
	var k, v []byte
	switch {
	case asc:
		k, v = c.Seek(itob(cursor + 1))
	case cursor == 0:
		k, v = c.Last()
	default:
		c.Seek(itob(cursor))
		k, v = c.Prev()
	}
	for k != nil {
		more, err := fn(btoi(k), string(v))
		if err != nil || !more {
			return err
		}
		if asc {
			k, v = c.Next()
		} else {
			k, v = c.Prev()
		}
	}
	return nil
}

func (r txReader) OpenRequests(session string, fn func(storage.OpenRequest) (bool, error)) error {
	c := r.tx.Bucket(bApprovalsOpen).Cursor()
	k, v := c.First()
	var prefix []byte
	if b := r.tx.Bucket(bOpenBySession); session != "" && b != nil {
		// Only the session's own requests, each under its own session.
		prefix = namePrefix(session)
		c = b.Cursor()
		k, v = c.Seek(prefix)
	}
	for ; k != nil; k, v = c.Next() {
		if prefix != nil {
			if len(k) != len(prefix)+8 || string(k[:len(prefix)]) != string(prefix) {
				break
			}
			k = k[len(prefix):]
		} else if session != "" && !openFor(v, session) {
			continue
		}
		name, expires, known := parsePending(v)
		if prefix != nil {
			name = session
		}
		req := storage.OpenRequest{EffectID: btoi(k), Session: name, Known: known}
		if known && expires != 0 {
			req.Expires = time.Unix(0, expires).UTC()
		}
		more, err := fn(req)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (r txReader) Changes(after uint64, fn func(pos uint64, rec model.HistoryRecord) (bool, error)) error {
	c := r.tx.Bucket(bChanges).Cursor()
	for k, v := c.Seek(itob(after + 1)); k != nil; k, v = c.Next() {
		bucket, hkey, err := changeLocation(v)
		if err != nil {
			return fmt.Errorf("%w: change %x: %v", model.ErrCorrupt, k, err)
		}
		b := r.tx.Bucket(bucket)
		var rec model.HistoryRecord
		if ok, err := getRecord(b, hkey, &rec); err != nil {
			return err
		} else if !ok {
			continue // dropped by gc
		}
		if err := placeChange(r.tx, &rec, bucket, hkey); err != nil {
			return err
		}
		if rec.PrevHash == "" && rec.Seq > 1 && len(hkey) > 4 {
			prevKey := binary.BigEndian.AppendUint32(append([]byte{}, hkey[:len(hkey)-4]...), rec.Seq-1)
			var prev model.HistoryRecord
			if _, err := getRecord(b, prevKey, &prev); err != nil {
				return err
			}
			record.LinkHistory(&rec, prev.Hash)
		}
		more, err := fn(btoi(k), rec)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (r txReader) LastChange() (uint64, error) { return r.tx.Bucket(bChanges).Sequence(), nil }

func (r txReader) SchemaVersion() uint64 { return btoi(r.tx.Bucket(bMeta).Get(keySchema)) }

func (w txWriter) NextEffectID() (uint64, error)   { return w.w.nextSequence(bEffects) }
func (w txWriter) NextSessionSeq() (uint64, error) { return w.w.nextSequence(bSessionsByTime) }

func (w txWriter) ReserveIDs(effect, sessionSeq uint64) error {
	if err := w.w.raiseSequence(bEffects, effect); err != nil {
		return err
	}
	return w.w.raiseSequence(bSessionsByTime, sessionSeq)
}

func (w txWriter) InsertSession(s *model.Session) error {
	if err := w.w.put(bSessionsByTime, itob(s.Seq), []byte(s.ID)); err != nil {
		return err
	}
	return w.PutSession(s)
}

func (w txWriter) PutSession(s *model.Session) error { return putSession(w.w, s) }

func (w txWriter) PutEffect(e *model.Effect, from sm.State) error { return putEffect(w.w, e, from) }

func (w txWriter) SetSignatureOwner(sig string, id uint64) error {
	return w.w.put(bSignatures, signatureKey(sig), itob(id))
}

func (w txWriter) MoveSignatureOwner(sig string, from, to uint64) error {
	if v := signatureOwner(w.tx, sig); len(v) != 8 || btoi(v) != from {
		return fmt.Errorf("%w: effect %d does not own signature %.16s", model.ErrConflict, from, sig)
	}
	// A schema-1 log may hold it under its hex digits: one key stays.
	if legacy := []byte(sig); !bytes.Equal(legacy, signatureKey(sig)) && w.tx.Bucket(bSignatures).Get(legacy) != nil {
		if err := w.w.delete(bSignatures, legacy); err != nil {
			return err
		}
	}
	return w.SetSignatureOwner(sig, to)
}

func (w txWriter) AddHistory(rec *model.HistoryRecord) error {
	bucket, kind, key := bHistory, byte(changeEffect), historyKey(rec.EffectID, rec.Seq)
	if rec.Kind == model.KindSession {
		bucket, kind, key = bSessionHistory, changeSession, sessionHistoryKey(rec.Session, rec.Seq)
	}
	if err := putRecord(w.w, bucket, key, rec); err != nil {
		return err
	}
	seq, err := w.w.nextSequence(bChanges)
	if err != nil {
		return err
	}
	return w.w.put(bChanges, itob(seq), changeValue(kind, key))
}

func (w txWriter) PutUndo(u *model.UndoEntry) error {
	key := nameKey(u.Session, u.EffectID)
	was, err := storedUndoState(w.tx, key)
	if err != nil {
		return err
	}
	if err := putRecord(w.w, bUndo, key, u); err != nil {
		return err
	}
	return putUndoState(w.w, u.EffectID, was, string(u.State))
}

func (w txWriter) PutApproval(a *model.Approval) error {
	return putRecord(w.w, bApprovals, itob(a.EffectID), a)
}

func (w txWriter) OpenRequest(id uint64, session string, expires *time.Time) error {
	v := pendingValue(session, expires)
	if w.tx.Bucket(bOpenBySession) != nil {
		was, err := openSession(w.tx, id)
		if err != nil {
			return err
		}
		if was != "" && was != session {
			if err := w.w.delete(bOpenBySession, nameKey(was, id)); err != nil {
				return err
			}
		}
		if err := w.w.put(bOpenBySession, nameKey(session, id), v); err != nil {
			return err
		}
	}
	return w.w.put(bApprovalsOpen, itob(id), v)
}

func (w txWriter) CloseRequest(id uint64) error {
	if w.tx.Bucket(bOpenBySession) != nil {
		session, err := openSession(w.tx, id)
		if err != nil {
			return err
		}
		if session != "" {
			if err := w.w.delete(bOpenBySession, nameKey(session, id)); err != nil {
				return err
			}
		}
	}
	return w.w.delete(bApprovalsOpen, itob(id))
}

func (w txWriter) DeleteEffect(e *model.Effect) error {
	if w.tx.Bucket(bUndoByState) != nil {
		state, err := storedUndoState(w.tx, nameKey(e.Session, e.ID))
		if err != nil {
			return err
		}
		if state != "" {
			if err := w.w.delete(bUndoByState, nameKey(state, e.ID)); err != nil {
				return err
			}
		}
		if err := w.CloseRequest(e.ID); err != nil {
			return err
		}
	}
	for seq := uint32(1); seq <= e.HistoryLen; seq++ {
		if err := w.w.delete(bHistory, historyKey(e.ID, seq)); err != nil {
			return err
		}
	}
	if e.ReplayOf == nil {
		for _, k := range [][]byte{signatureKey(e.CallSignature), []byte(e.CallSignature)} {
			if err := w.w.delete(bSignatures, k); err != nil {
				return err
			}
		}
	}
	for _, k := range []struct {
		b   []byte
		key []byte
	}{
		{bBySession, nameKey(e.Session, e.ID)}, {bByState, nameKey(string(e.State), e.ID)}, {bByTool, nameKey(e.Tool, e.ID)},
		{bByTier, nameKey(string(e.Tier), e.ID)}, {bUndo, nameKey(e.Session, e.ID)}, {bApprovals, itob(e.ID)},
		{bApprovalsOpen, itob(e.ID)}, {bEffects, itob(e.ID)},
	} {
		if err := w.w.delete(k.b, k.key); err != nil {
			return err
		}
	}
	return nil
}

func (w txWriter) DeleteSession(s *model.Session) error {
	for seq := uint32(1); seq <= s.HistoryLen; seq++ {
		if err := w.w.delete(bSessionHistory, sessionHistoryKey(s.ID, seq)); err != nil {
			return err
		}
	}
	if err := w.w.delete(bSessionsByTime, itob(s.Seq)); err != nil {
		return err
	}
	return w.w.delete(bSessions, []byte(s.ID))
}

// View runs fn in a read-only transaction (see view). A file's
// transactions are not cancelled: ctx is not consulted, and what the lock
// timeout bounds is what a caller waits.
func (s *Engine) View(_ context.Context, fn func(storage.ReadTx) error) error {
	return s.view(func(tx *readTx) error { return fn(txReader{tx}) })
}

// Update runs fn in a write transaction of this process's committer (see
// update); like View, it is not cancelled.
func (s *Engine) Update(_ context.Context, fn func(storage.WriteTx) error) error {
	return s.update(func(tx *writeTx) error { return fn(txWriter{txReader{plainTx(tx.Tx)}, tx}) })
}

// UpdateUnflushed queues fn as a write of this process's committer and
// returns at once (see updateUnflushed): fn's error goes unreported, and a
// crash of this process within unflushedWait may lose what it wrote.
func (s *Engine) UpdateUnflushed(_ context.Context, fn func(storage.WriteTx) error) error {
	s.updateUnflushed(func(tx *writeTx) error { return fn(txWriter{txReader{plainTx(tx.Tx)}, tx}) })
	return nil
}

var (
	_ storage.File      = (*Engine)(nil)
	_ storage.Holder    = (*Engine)(nil)
	_ storage.Suspender = (*Engine)(nil)
)
