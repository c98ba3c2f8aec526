package logstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
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

func getRecord(b *bolt.Bucket, key []byte, v any) (bool, error) {
	data := b.Get(key)
	if data == nil {
		return false, nil
	}
	if err := decodeRecord(data, v); err != nil { // copies out of the mmap
		return true, fmt.Errorf("%w: record %s/%x: %v", model.ErrCorrupt, bucketName(b), key, err)
	}
	return true, nil
}

func bucketName(b *bolt.Bucket) string {
	for _, name := range allBuckets {
		if b.Tx().Bucket(name) == b {
			return string(name)
		}
	}
	return "?"
}

func putRecord(tx *writeTx, bucket, key []byte, v any) error {
	data, err := encodeRecord(v)
	if err != nil {
		return err
	}
	return tx.put(bucket, key, data)
}

func getEffect(tx *bolt.Tx, id uint64) (model.Effect, error) {
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

func getSession(tx *bolt.Tx, id string) (model.Session, error) {
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
func getUndo(tx *bolt.Tx, e *model.Effect) (*model.UndoEntry, error) {
	return readUndo(tx, e.Session, e.ID, func() (*model.Effect, error) { return e, nil })
}

// getUndoOf reads the undo entry of effect id of session, and the effect only
// if the entry needs it.
func getUndoOf(tx *bolt.Tx, session string, id uint64) (*model.UndoEntry, error) {
	return readUndo(tx, session, id, func() (*model.Effect, error) {
		e, err := getEffect(tx, id)
		return &e, err
	})
}

// readUndo reads an undo entry; the binary form leaves its tool and
// compensation to the effect, which effect supplies.
func readUndo(tx *bolt.Tx, session string, id uint64, effect func() (*model.Effect, error)) (*model.UndoEntry, error) {
	var u model.UndoEntry
	ok, err := getRecord(tx.Bucket(bUndo), nameKey(session, id), &u)
	if err != nil || !ok {
		return nil, err
	}
	u.EffectID, u.Session = id, session
	if u.Tool == "" && u.Compensation.Kind == "" {
		e, err := effect()
		if err != nil {
			return nil, err
		}
		if e.Compensation == nil {
			return nil, fmt.Errorf("%w: undo entry of effect %d, which has no compensation", model.ErrCorrupt, id)
		}
		u.Tool, u.Compensation = e.Tool, *e.Compensation
	}
	return &u, nil
}

func getApproval(tx *bolt.Tx, id uint64) (*model.Approval, error) {
	var a model.Approval
	ok, err := getRecord(tx.Bucket(bApprovals), itob(id), &a)
	if err != nil || !ok {
		return nil, err
	}
	return &a, nil
}

func putSession(tx *writeTx, s *model.Session) error {
	return putRecord(tx, bSessions, []byte(s.ID), s)
}

// putEffect writes the effect record and moves its state index entry.
func putEffect(tx *writeTx, e *model.Effect, oldState sm.State) error {
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

// hashWithContent is the HashVersion of the records this undolog writes for
// effects: the hash also covers the effect's content at that point, so that
// an args, result, error or compensation changed on disk breaks the chain.
// Records of earlier undologs (version 0) keep verifying under their rule.
const hashWithContent = 2

// recordHash covers every field of the record and the previous hash, and
// for hashWithContent records the effect's content digest too (see
// effectContent).
func recordHash(r *model.HistoryRecord, content string) string {
	if r.HashVersion == hashWithContent {
		return model.FieldsHash("undolog-history-v2", r.Kind, strconv.FormatUint(uint64(r.Seq), 10),
			strconv.FormatUint(r.EffectID, 10), r.Session, r.From, r.To, r.Trigger, r.Actor, r.Reason,
			r.Error, r.At.UTC().Format(time.RFC3339Nano), r.PrevHash, content)
	}
	return model.FieldsHash("undolog-history-v1", r.Kind, strconv.FormatUint(uint64(r.Seq), 10),
		strconv.FormatUint(r.EffectID, 10), r.Session, r.From, r.To, r.Trigger, r.Actor, r.Reason,
		r.Error, r.At.UTC().Format(time.RFC3339Nano), r.PrevHash)
}

// contentPoint is what of an effect's changing content a history record
// covers. The result exists from the record that committed or replayed the
// effect on (terminal states: it never changes after); the error is the one
// the last record that failed the effect carries, cleared by the record that
// starts it again. Everything else an effect says is set when it is created.
// So verify can tell, from the effect and its history alone, what each
// record covered; no digest is stored.
type contentPoint struct {
	result bool
	err    string
}

// after is the point once r is written.
func (p contentPoint) after(r *model.HistoryRecord) contentPoint {
	if r.Kind != model.KindEffect {
		return p
	}
	switch sm.State(r.To) {
	case sm.Committed, sm.Replayed:
		p.result = true
	case sm.Pending, sm.Executing:
		p.err = r.Error
	}
	return p
}

func hasResult(s sm.State) bool { return s == sm.Committed || s == sm.Replayed }

// effectContent is the digest of what an effect says (session, tool, tier,
// signature, args, key, replay_of, compensation, redactions, and the result
// and error as of p). Replay counts, times, the owner and the state are left
// out: they change without a record (the state is in the records).
func effectContent(e *model.Effect, p contentPoint) string {
	w := recordWriter{buf: make([]byte, 0, 256+len(e.Args)+len(e.Result))}
	w.str(e.Session)
	w.str(e.Tool)
	w.str(string(e.Tier))
	w.str(e.CallSignature)
	w.raw(e.Args)
	w.str(e.Key)
	w.flag(e.ReplayOf != nil)
	if e.ReplayOf != nil {
		w.uint(*e.ReplayOf)
	}
	w.flag(e.Compensation != nil)
	if e.Compensation != nil {
		w.compensation(e.Compensation)
	}
	w.strs(e.Redact)
	w.flag(p.result)
	if p.result {
		w.raw(e.Result)
	}
	w.str(p.err)
	sum := sha256.Sum256(w.buf)
	return string(sum[:])
}

// appendEffectHistory chains rec onto the effect's history and records it in
// the change feed. The caller writes the effect afterwards; the effect's
// content must already be what it is once rec is written (its state may
// still be the one rec leaves).
func appendEffectHistory(tx *writeTx, e *model.Effect, rec model.HistoryRecord) error {
	rec.EffectID, rec.Session, rec.HashVersion = e.ID, e.Session, hashWithContent
	p := contentPoint{result: hasResult(e.State) || rec.Kind == model.KindEffect && hasResult(sm.State(rec.To)), err: e.Error}
	return chain(tx, bHistory, changeEffect, rec, effectContent(e, p), &e.HistoryLen, &e.HistoryHead, func(seq uint32) []byte { return historyKey(e.ID, seq) })
}

// appendSessionHistory is the same for a session's own transitions; its
// records cover what the session says (see sessionContent).
func appendSessionHistory(tx *writeTx, s *model.Session, rec model.HistoryRecord) error {
	rec.Kind, rec.Session, rec.HashVersion = model.KindSession, s.ID, hashWithContent
	return chain(tx, bSessionHistory, changeSession, rec, sessionContent(s), &s.HistoryLen, &s.HistoryHead, func(seq uint32) []byte { return sessionHistoryKey(s.ID, seq) })
}

// sessionContent is the digest of what a session says that its records do
// not state themselves: its meta, set when it is created. Its upstream is
// stated by the records that set it (see statedUpstream), as the upstream
// can change and a digest of it would leave the records before a change
// unverifiable.
func sessionContent(s *model.Session) string {
	var w recordWriter
	w.uint(uint64(len(s.Meta))) // nil and empty alike: JSON records of older logs hold either
	for _, k := range slices.Sorted(maps.Keys(s.Meta)) {
		w.str(k)
		w.str(s.Meta[k])
	}
	sum := sha256.Sum256(w.buf)
	return string(sum[:])
}

// triggerUpstream is the trigger of the session record that sets the
// session's upstream MCP server command; its reason holds the command as a
// JSON array, which the record's hash covers.
const triggerUpstream = "Upstream recorded"

// recordUpstream sets the session's upstream and appends the record that
// states it.
func recordUpstream(tx *writeTx, s *model.Session, upstream []string, actor string, now time.Time) error {
	stated, err := json.Marshal(upstream)
	if err != nil {
		return err
	}
	s.Upstream, s.UpdatedAt = upstream, now
	return appendSessionHistory(tx, s, model.HistoryRecord{From: string(s.State), To: string(s.State), Trigger: triggerUpstream,
		Actor: actorOr(actor), Reason: string(stated), At: now})
}

// statedUpstream is the upstream a session's history states: that of its
// last triggerUpstream record, else none for a session created by an
// undolog that records upstreams (its first record covers its content).
// stated is false for a session of an older undolog, which set its upstream
// without a record.
func statedUpstream(hist []model.HistoryRecord) (upstream []string, stated bool, err error) {
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Trigger == triggerUpstream {
			if err := json.Unmarshal([]byte(hist[i].Reason), &upstream); err != nil {
				return nil, true, fmt.Errorf("record %d states no upstream: %v", hist[i].Seq, err)
			}
			return upstream, true, nil
		}
	}
	return nil, len(hist) > 0 && hist[0].HashVersion == hashWithContent, nil
}

// chain links rec to the end of a history (length n, last hash head), writes
// it, moves n and head on, and records it in the change feed.
func chain(tx *writeTx, bucket []byte, kind byte, rec model.HistoryRecord, content string, n *uint32, head *string, key func(uint32) []byte) error {
	rec.Seq, rec.PrevHash = *n+1, *head
	rec.Hash = recordHash(&rec, content)
	k := key(rec.Seq)
	if err := putRecord(tx, bucket, k, &rec); err != nil {
		return err
	}
	*n, *head = rec.Seq, rec.Hash
	return addChange(tx, kind, k)
}

func addChange(tx *writeTx, kind byte, key []byte) error {
	seq, err := tx.nextSequence(bChanges)
	if err != nil {
		return err
	}
	return tx.put(bChanges, itob(seq), changeValue(kind, key))
}

// setSessionState moves a session through the session table and records it.
func setSessionState(tx *writeTx, s *model.Session, to sm.SessionState, c model.Change, now time.Time) error {
	t, err := sm.ValidateSession(s.State, to)
	if err != nil {
		return err
	}
	from := s.State
	s.State, s.UpdatedAt = to, now
	if c.Reason != "" {
		s.Reason = c.Reason
	}
	if !to.AcceptsEffects() { // also a session an earlier undolog left with open requests
		if err := closeOpenApprovals(tx, s, to, now); err != nil {
			return err
		}
	}
	return appendSessionHistory(tx, s, model.HistoryRecord{From: string(from), To: string(to), Trigger: t.Trigger,
		Actor: actorOr(c.Actor), Reason: c.Reason, At: now})
}

// countMove keeps the session's per-state counts in step with an effect.
func countMove(s *model.Session, from, to sm.State) {
	if s.Counts == nil {
		s.Counts = map[sm.State]int{}
	}
	if from != "" {
		if s.Counts[from]--; s.Counts[from] <= 0 {
			delete(s.Counts, from)
		}
	}
	s.Counts[to]++
}

func actorOr(a string) string {
	if a == "" {
		return "unknown"
	}
	return a
}

// scan walks the keys of b that start with prefix and end in an 8-byte id, in
// id order (descending unless asc), strictly after/before the cursor id (0: from
// the start), until fn returns false.
func scan(b *bolt.Bucket, prefix []byte, asc bool, cursor uint64, fn func(id uint64) (bool, error)) error {
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

func step(c *bolt.Cursor, asc bool) []byte {
	var k []byte
	if asc {
		k, _ = c.Next()
	} else {
		k, _ = c.Prev()
	}
	return k
}
