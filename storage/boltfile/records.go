package boltfile

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/internal/record"
)

// Key layouts. Names used inside composite keys never contain NUL (validated
// on the way in), so name+NUL is an unambiguous prefix.

func nameKey(name string, id uint64) []byte {
	k := make([]byte, 0, len(name)+9)
	k = append(k, name...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, id)
}

func namePrefix(name string) []byte { return append([]byte(name), 0) }

func historyKey(id uint64, seq uint32) []byte {
	return binary.BigEndian.AppendUint32(itob(id), seq)
}

func sessionHistoryKey(session string, seq uint32) []byte {
	return binary.BigEndian.AppendUint32(namePrefix(session), seq)
}

// Change-feed values: a kind byte, then where the record is. changeEffect
// is followed by the effect id and sequence as varints; changeEffectKey (in
// logs written before) and changeSession by the history key itself.
const (
	changeEffect    = 'E'
	changeEffectKey = 'e'
	changeSession   = 's'
)

// changeValue is the change-feed value for the history record at key.
func changeValue(kind byte, key []byte) []byte {
	if kind == changeEffect && len(key) == 12 {
		v := binary.AppendUvarint([]byte{changeEffect}, binary.BigEndian.Uint64(key))
		return binary.AppendUvarint(v, uint64(binary.BigEndian.Uint32(key[8:])))
	}
	return append([]byte{kind}, key...)
}

// changeLocation reads a change-feed value: the history bucket and key it
// points at.
func changeLocation(v []byte) (bucket, key []byte, err error) {
	if len(v) < 2 {
		return nil, nil, errors.New("too short")
	}
	switch v[0] {
	case changeEffect:
		id, n := binary.Uvarint(v[1:])
		seq, m := binary.Uvarint(v[1+max(n, 0):])
		if n <= 0 || m <= 0 || 1+n+m != len(v) || seq > 1<<32-1 {
			return nil, nil, errors.New("malformed")
		}
		return bHistory, historyKey(id, uint32(seq)), nil
	case changeEffectKey:
		return bHistory, v[1:], nil
	case changeSession:
		return bSessionHistory, v[1:], nil
	}
	return nil, nil, fmt.Errorf("unknown kind %q", v[0])
}

func getRecord(b *readBucket, key []byte, v any) (bool, error) {
	data := b.Get(key)
	if data == nil {
		return false, nil
	}
	if err := record.Decode(data, v); err != nil { // copies out of the mmap
		return true, fmt.Errorf("%w: record %s/%x: %v", model.ErrCorrupt, bucketName(b), key, err)
	}
	return true, nil
}

func bucketName(b *readBucket) string { return b.name }

func putRecord(tx *writeTx, bucket, key []byte, v any) error {
	data, err := record.Encode(v)
	if err != nil {
		return err
	}
	return tx.put(bucket, key, data)
}

func getEffect(tx *readTx, id uint64) (model.Effect, error) {
	var e model.Effect
	ok, err := getRecord(tx.Bucket(bEffects), itob(id), &e)
	if err != nil {
		return e, err
	}
	if !ok {
		return e, fmt.Errorf("%w: no effect %d", model.ErrNotFound, id)
	}
	return e, nil
}

func getSession(tx *readTx, id string) (model.Session, error) {
	var s model.Session
	ok, err := getRecord(tx.Bucket(bSessions), []byte(id), &s)
	if err != nil {
		return s, err
	}
	if !ok {
		return s, fmt.Errorf("%w: no session %q", model.ErrNotFound, id)
	}
	return s, nil
}

// getUndo reads the undo entry of e (nil if it has none).
func getUndo(tx *readTx, e *model.Effect) (*model.UndoEntry, error) {
	return readUndo(tx, e.Session, e.ID, func() (*model.Effect, error) { return e, nil })
}

// getUndoOf reads the undo entry of effect id of session, and the effect only
// if the entry needs it.
func getUndoOf(tx *readTx, session string, id uint64) (*model.UndoEntry, error) {
	return readUndo(tx, session, id, func() (*model.Effect, error) {
		e, err := getEffect(tx, id)
		return &e, err
	})
}

// readUndo reads an undo entry; the binary form leaves its tool and
// compensation to the effect, which effect supplies.
func readUndo(tx *readTx, session string, id uint64, effect func() (*model.Effect, error)) (*model.UndoEntry, error) {
	var u model.UndoEntry
	ok, err := getRecord(tx.Bucket(bUndo), nameKey(session, id), &u)
	if err != nil || !ok {
		return nil, err
	}
	u.EffectID, u.Session = id, session
	if record.UndoNeedsEffect(&u) {
		e, err := effect()
		if err != nil {
			return nil, err
		}
		if err := record.UndoFromEffect(&u, e); err != nil {
			return nil, err
		}
	}
	return &u, nil
}

func getApproval(tx *readTx, id uint64) (*model.Approval, error) {
	var a model.Approval
	ok, err := getRecord(tx.Bucket(bApprovals), itob(id), &a)
	if err != nil || !ok {
		return nil, err
	}
	a.EffectID = id // its key says it, whatever form the record has (PutApproval writes it back there)
	return &a, nil
}

func putSession(tx *writeTx, s *model.Session) error {
	return putRecord(tx, bSessions, []byte(s.ID), s)
}

// putEffect writes the effect record and moves its state index entry; a new
// effect (oldState "") is entered in the session, tool and tier indexes too.
func putEffect(tx *writeTx, e *model.Effect, oldState sm.State) error {
	if oldState == "" {
		for _, idx := range []struct {
			bucket []byte
			name   string
		}{{bBySession, e.Session}, {bByTool, e.Tool}, {bByTier, string(e.Tier)}} {
			if err := tx.put(idx.bucket, nameKey(idx.name, e.ID), nil); err != nil {
				return err
			}
		}
	}
	if oldState != e.State {
		if oldState != "" {
			if err := tx.delete(bByState, nameKey(string(oldState), e.ID)); err != nil {
				return err
			}
		}
		if err := tx.put(bByState, nameKey(string(e.State), e.ID), nil); err != nil {
			return err
		}
	}
	return putRecord(tx, bEffects, itob(e.ID), e)
}

// scan walks the keys of b that start with prefix and end in an 8-byte id, in
// id order (descending unless asc), strictly after/before the cursor id (0: from
// the start), until fn returns false.
func scan(b *readBucket, prefix []byte, asc bool, cursor uint64, fn func(id uint64) (bool, error)) error {
	c := b.Cursor()
	var k []byte
	if asc {
		k, _ = c.Seek(append(append([]byte{}, prefix...), itob(cursor+1)...))
		if cursor == 0 {
			k, _ = c.Seek(prefix)
		}
	} else {
		start := itob(^uint64(0))
		if cursor != 0 {
			start = itob(cursor)
		}
		k, _ = c.Seek(append(append([]byte{}, prefix...), start...))
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
	}
	for ; k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k = step(c, asc) {
		more, err := fn(btoi(k[len(prefix):]))
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func step(c *readCursor, asc bool) []byte {
	var k []byte
	if asc {
		k, _ = c.Next()
	} else {
		k, _ = c.Prev()
	}
	return k
}

// signatureKey is a signature's key in the signatures index: its 32 bytes
// (logs written before kept the 64 hex digits, which signatureOwner also
// finds).
func signatureKey(sig string) []byte {
	if b, ok := record.RawHash(sig); ok {
		return b
	}
	return []byte(sig)
}

// signatureOwner returns the id (8 bytes) of the effect owning sig, or nil.
// Only a log from schema 1 can hold the signature as hex digits too.
func signatureOwner(tx *readTx, sig string) []byte {
	b := tx.Bucket(bSignatures)
	if v := b.Get(signatureKey(sig)); v != nil {
		return v
	}
	meta := tx.Bucket(bMeta)
	if meta.Get(keyHexSignatures) == nil && btoi(meta.Get(keySchema)) >= 2 {
		return nil
	}
	return b.Get([]byte(sig))
}

// signatureOwnerKey is signatureOwner given the signature's key (see
// signatureKey), and the signature itself only if a log of schema 1 needs it.
func signatureOwnerKey(tx *readTx, key []byte, sig func() string) []byte {
	if v := tx.Bucket(bSignatures).Get(key); v != nil {
		return v
	}
	meta := tx.Bucket(bMeta)
	if meta.Get(keyHexSignatures) == nil && btoi(meta.Get(keySchema)) >= 2 {
		return nil
	}
	return tx.Bucket(bSignatures).Get([]byte(sig()))
}

// signatureOfKey reads a signatures-index key back as the signature.
func signatureOfKey(k []byte) string {
	if len(k) == 32 {
		return hex.EncodeToString(k)
	}
	return string(k)
}

// pendingValue is a pending-approval index value: a zero byte, when the
// request expires (Unix nanoseconds, big-endian; 0: never) and its session,
// so that waiting requests are found and counted without decoding them.
// Logs written before held only the session (or nothing).
func pendingValue(session string, expires *time.Time) []byte {
	v := make([]byte, 9, 9+len(session))
	if expires != nil {
		binary.BigEndian.PutUint64(v[1:], uint64(expires.UnixNano()))
	}
	return append(v, session...)
}

// parsePending reads a pending-approval index value. known is false for the
// older forms, whose expiry is only in the approval record.
func parsePending(value []byte) (session string, expires int64, known bool) {
	if len(value) >= 9 && value[0] == 0 {
		return string(value[9:]), int64(binary.BigEndian.Uint64(value[1:9])), true
	}
	return string(value), 0, false
}

// openFor reports whether a pending-approval index value may belong to the
// session: it names its session (an empty value names none, so it may).
func openFor(value []byte, session string) bool {
	name, _, _ := parsePending(value)
	return name == "" || name == session
}

func effectHistory(tx *readTx, id uint64, session string) ([]model.HistoryRecord, error) {
	return readHistory(tx.Bucket(bHistory), itob(id), id, session)
}

func sessionHistory(tx *readTx, session string) ([]model.HistoryRecord, error) {
	return readHistory(tx.Bucket(bSessionHistory), namePrefix(session), 0, session)
}

// readHistory reads the history under prefix, which belongs to effectID (0
// for a session's own history) of session.
func readHistory(b *readBucket, prefix []byte, effectID uint64, session string) ([]model.HistoryRecord, error) {
	var out []model.HistoryRecord
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+4; k, v = c.Next() {
		var r model.HistoryRecord
		if err := record.Decode(v, &r); err != nil {
			return nil, fmt.Errorf("%w: history record %x: %v", model.ErrCorrupt, k, err)
		}
		record.PlaceHistory(&r, effectID, session)
		if n := len(out); n > 0 && out[n-1].Seq == r.Seq-1 {
			record.LinkHistory(&r, out[n-1].Hash)
		}
		out = append(out, r)
	}
	return out, nil
}

// placeChange fills in the effect id and session of a record of the change
// feed from its key: the session of an effect's record is the effect's.
func placeChange(tx *readTx, r *model.HistoryRecord, bucket, key []byte) error {
	if r.EffectID != 0 || r.Session != "" || len(key) < 5 {
		return nil
	}
	if string(bucket) == string(bSessionHistory) {
		record.PlaceHistory(r, 0, string(key[:len(key)-5]))
		return nil
	}
	id := btoi(key[:8])
	e, err := getEffect(tx, id)
	if err != nil {
		return err
	}
	record.PlaceHistory(r, id, e.Session)
	return nil
}
