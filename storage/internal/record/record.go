// Package record is the form the engines store records in: a compact
// binary encoding of effects, history records, undo entries, approval
// requests and sessions, which reads the JSON of logs written before it
// too. It is exact: what Decode gives back is what Encode was given (raw
// JSON byte for byte, nil apart from null, times to the nanosecond), which
// the history's hashes need.
package record

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// Records are stored in a compact binary form: a format byte, a record-type
// byte, then the fields in a fixed order (varints, length-prefixed strings,
// hashes as 32 raw bytes, well-known words as one-byte tokens). It takes half
// the room of JSON and decodes several times faster. Records of logs written
// before the binary form are JSON: a record starting with '{' is read as such.

const recordBinary = 0x01

// Form1 is the format byte of the first binary form, which records of
// schemas 2 and 3 have; tests write such records.
const Form1 = recordBinary

// recordBinary2 is the binary form with the fields added since at the end of
// its records: an owner's process start time (effect), the owner of a
// running compensation (undo entry). Records of form 1 end before them, so
// a record of form 2 cut short is still an error.
const recordBinary2 = 0x02

// recordBinary3 is form 2 with an owner's lease (model.Owner.LeaseUntil)
// after the owner's other fields at the end: the effect's last field, and
// the undo entry's owner's. Forms 1 and 2 read with no lease.
const recordBinary3 = 0x03

// Record-type bytes.
const (
	recEffect  = 'E'
	recHistory = 'H'
	recUndo    = 'U'
	recApprove = 'A'
	recSession = 'S'
)

// tokens are the words records repeat: states, tiers, kinds, triggers of the
// spec's table, well-known actors. A token is stored as its index + 1; 0 is
// followed by the literal. The list only ever grows at the end.
var tokens = []string{
	"pending", "executing", "committed", "compensating", "compensated", "compensation_failed",
	"approved", "rejected", "replayed", "safe", "compensable", "irreversible",
	model.KindEffect, model.KindUndo, model.KindSession, "skipped", "resolved",
	"active", "awaiting_approval", "completed", "failed", "halted",
	model.CompensationCommand, model.CompensationMCP, model.CompensationManual, model.ApprovalTimedOut, "unknown", model.TimeoutActor,
	"Intercept", "Session created", "Intercept → Execute", "Human approves via dashboard",
	"Human rejects via dashboard", "Intercept → Replay", "Commit RPC", "Fail RPC",
	"Saga orchestrator on session failure", "Proxy resumes tool call", "Compensation succeeds",
	"Compensation exhausted retries",
}

var tokenIndex = func() map[string]uint64 {
	m := make(map[string]uint64, len(tokens))
	for i, t := range tokens {
		m[t] = uint64(i) + 1
	}
	return m
}()

// Encode encodes a record (a pointer to one of the record types) in
// the binary form.
func Encode(v any) ([]byte, error) {
	w := Writer{Buf: make([]byte, 0, 256)}
	switch r := v.(type) {
	case *model.Effect:
		w.effect(r)
	case *model.HistoryRecord:
		w.history(r)
	case *model.UndoEntry:
		w.undo(r)
	case *model.Approval:
		w.approval(r)
	case *model.Session:
		w.session(r)
	default:
		return nil, fmt.Errorf("no binary form for %T", v)
	}
	return w.Buf, nil
}

// Decode decodes what Encode wrote (or JSON) into v, copying
// everything out of data, which may be bbolt's memory.
func Decode(data []byte, v any) error {
	if len(data) == 0 || data[0] < recordBinary || data[0] > recordBinary3 {
		return json.Unmarshal(data, v)
	}
	if len(data) < 2 {
		return errors.New("binary record without a type")
	}
	r := Reader{Buf: data[2:], form: data[0]}
	var want byte
	switch x := v.(type) {
	case *model.Effect:
		want = recEffect
		*x = model.Effect{}
		r.effect(x)
	case *model.HistoryRecord:
		want = recHistory
		*x = model.HistoryRecord{}
		r.history(x)
	case *model.UndoEntry:
		want = recUndo
		*x = model.UndoEntry{}
		r.undo(x)
	case *model.Approval:
		want = recApprove
		*x = model.Approval{}
		r.approval(x)
	case *model.Session:
		want = recSession
		*x = model.Session{}
		r.session(x)
	default:
		return fmt.Errorf("no binary form for %T", v)
	}
	switch {
	case data[1] != want:
		return fmt.Errorf("binary record of type %q where %q belongs", data[1], want)
	case r.Err != nil:
		return r.Err
	case len(r.Buf) != 0:
		return fmt.Errorf("%d bytes after the record", len(r.Buf))
	}
	return nil
}

// Writer appends fields in the binary form to Buf.
type Writer struct{ Buf []byte }

func (w *Writer) head(t byte)   { w.Buf = append(w.Buf, recordBinary3, t) }
func (w *Writer) Uint(v uint64) { w.Buf = binary.AppendUvarint(w.Buf, v) }
func (w *Writer) int(v int)     { w.Buf = binary.AppendVarint(w.Buf, int64(v)) }

func (w *Writer) str(s string) {
	w.Uint(uint64(len(s)))
	w.Buf = append(w.Buf, s...)
}

func (w *Writer) Bytes(b []byte) {
	w.Uint(uint64(len(b)))
	w.Buf = append(w.Buf, b...)
}

func (w *Writer) flag(b bool) {
	if b {
		w.Buf = append(w.Buf, 1)
	} else {
		w.Buf = append(w.Buf, 0)
	}
}

func (w *Writer) strs(list []string) {
	w.Uint(uint64(len(list)))
	for _, s := range list {
		w.str(s)
	}
}

// raw keeps nil apart from empty: JSON null and "" are different results.
func (w *Writer) raw(b []byte) {
	if b == nil {
		w.Uint(0)
		return
	}
	w.Uint(uint64(len(b)) + 1)
	w.Buf = append(w.Buf, b...)
}

func (w *Writer) token(s string) {
	if i, ok := tokenIndex[s]; ok {
		w.Uint(i)
		return
	}
	w.Uint(0)
	w.str(s)
}

// hash stores a lower-case hex SHA-256 as 32 bytes, anything else as text.
func (w *Writer) hash(h string) {
	if b, ok := RawHash(h); ok {
		w.Buf = append(w.Buf, 1)
		w.Buf = append(w.Buf, b...)
		return
	}
	w.Buf = append(w.Buf, 0)
	w.str(h)
}

// RawHash is the 32 bytes of a lower-case hex SHA-256 (signatures, history
// hashes); ok is false for anything else, which is then kept as text.
func RawHash(h string) (b []byte, ok bool) {
	if len(h) != 64 {
		return nil, false
	}
	b, err := hex.DecodeString(h)
	return b, err == nil && hex.EncodeToString(b) == h
}

func (w *Writer) time(t time.Time) {
	if t.IsZero() {
		w.flag(false)
		return
	}
	w.flag(true)
	w.Buf = binary.AppendVarint(w.Buf, t.UnixNano())
}

func (w *Writer) timePtr(t *time.Time) {
	w.flag(t != nil)
	if t != nil {
		w.time(*t)
	}
}

func (w *Writer) compensation(c *model.Compensation) {
	w.token(c.Kind)
	w.strs(c.Argv)
	w.str(c.Dir)
	w.str(c.Tool)
	w.raw(c.Args)
	w.raw(c.Capture)
	w.str(c.Note)
	w.int(c.MaxRetries)
	w.int(c.InitialBackoffMS)
}

func (w *Writer) effect(e *model.Effect) {
	w.head(recEffect)
	w.Uint(e.ID)
	w.str(e.Session)
	w.str(e.Tool)
	w.token(string(e.Tier))
	w.token(string(e.State))
	w.hash(e.CallSignature)
	w.raw(e.Args)
	w.raw(e.Result)
	w.str(e.Error)
	w.flag(e.ReplayOf != nil)
	if e.ReplayOf != nil {
		w.Uint(*e.ReplayOf)
	}
	w.int(e.ReplayCount)
	w.timePtr(e.LastReplayedAt)
	w.flag(e.Compensation != nil)
	if e.Compensation != nil {
		w.compensation(e.Compensation)
	}
	w.str(e.Key)
	w.strs(e.Redact)
	w.flag(e.Owner != nil)
	if e.Owner != nil {
		w.int(e.Owner.PID)
		w.str(e.Owner.Host)
		w.time(e.Owner.StartedAt)
	}
	w.time(e.CreatedAt)
	w.time(e.UpdatedAt)
	w.Uint(uint64(e.HistoryLen))
	w.hash(e.HistoryHead)
	// Fields of form 2.
	var procStart uint64
	var lease time.Time
	if e.Owner != nil {
		procStart, lease = e.Owner.ProcessStart, e.Owner.LeaseUntil
	}
	w.Uint(procStart)
	// Fields of form 3.
	w.time(lease)
}

// history stores neither the effect id and session, which its key gives
// (see PlaceHistory), nor PrevHash, the hash of the record before it (see
// LinkHistory). The record's hash covers all three. Its hash version costs
// no byte: the hash's flag byte is 2 for model.HashWithContent (see historyHash).
func (w *Writer) history(h *model.HistoryRecord) {
	w.head(recHistory)
	w.Uint(uint64(h.Seq))
	w.token(h.Kind)
	w.token(h.From)
	w.token(h.To)
	w.token(h.Trigger)
	w.token(h.Actor)
	w.str(h.Reason)
	w.str(h.Error)
	w.time(h.At)
	if b, ok := RawHash(h.Hash); ok && h.HashVersion == model.HashWithContent {
		w.Buf = append(w.Buf, model.HashWithContent)
		w.Buf = append(w.Buf, b...)
	} else {
		w.hash(h.Hash)
	}
	// The role is last and only there when set, so records without one
	// (every record of a log file) are byte for byte as before.
	if h.Role != "" {
		w.str(h.Role)
	}
}

// undo stores only what the entry adds to its effect: the effect id and
// session are its key, and the tool and compensation are the effect's (see
// readUndo).
func (w *Writer) undo(u *model.UndoEntry) {
	w.head(recUndo)
	w.token(string(u.State))
	w.int(u.Attempts)
	w.str(u.LastError)
	w.time(u.CreatedAt)
	w.time(u.UpdatedAt)
	// Fields of form 2.
	w.flag(u.Owner != nil)
	if u.Owner != nil {
		w.int(u.Owner.PID)
		w.str(u.Owner.Host)
		w.time(u.Owner.StartedAt)
		w.Uint(u.Owner.ProcessStart)
		w.time(u.Owner.LeaseUntil) // form 3
	}
}

func (w *Writer) approval(a *model.Approval) {
	w.head(recApprove)
	w.Uint(a.EffectID)
	w.str(a.Session)
	w.str(a.Tool)
	w.raw(a.Args)
	w.str(a.Reason)
	w.time(a.RequestedAt)
	w.timePtr(a.ExpiresAt)
	w.token(a.Outcome)
	w.token(a.DecidedBy)
	w.timePtr(a.DecidedAt)
	w.str(a.Decision)
	// Earlier rounds follow only when there are some: records written
	// before end here.
	if len(a.Earlier) > 0 {
		w.Uint(uint64(len(a.Earlier)))
		for _, r := range a.Earlier {
			w.time(r.RequestedAt)
			w.timePtr(r.ExpiresAt)
			w.token(r.Outcome)
			w.token(r.DecidedBy)
			w.timePtr(r.DecidedAt)
			w.str(r.Decision)
		}
	}
}

func (w *Writer) session(s *model.Session) {
	w.head(recSession)
	w.str(s.ID)
	w.token(string(s.State))
	// Maps: 0 for nil, else 1 + their size, then the pairs in key order so
	// that equal sessions encode equally.
	if s.Meta == nil {
		w.Uint(0)
	} else {
		w.Uint(uint64(len(s.Meta)) + 1)
		for _, k := range slices.Sorted(maps.Keys(s.Meta)) {
			w.str(k)
			w.str(s.Meta[k])
		}
	}
	w.str(s.Reason)
	w.time(s.CreatedAt)
	w.time(s.UpdatedAt)
	if s.Counts == nil {
		w.Uint(0)
	} else {
		w.Uint(uint64(len(s.Counts)) + 1)
		for _, k := range slices.Sorted(maps.Keys(s.Counts)) {
			w.token(string(k))
			w.int(s.Counts[k])
		}
	}
	w.int(s.Effects)
	w.int(s.PendingApprovals)
	w.strs(s.Upstream)
	w.Uint(uint64(s.HistoryLen))
	w.hash(s.HistoryHead)
	w.Uint(s.Seq)
	// The upstream's directory is last and only there when set, so that a
	// session without one is byte for byte as before.
	if s.UpstreamDir != "" {
		w.str(s.UpstreamDir)
	}
}

// Reader reads fields until the first error, which it keeps; every
// read is bounds-checked, so damaged bytes give an error, never a panic.
type Reader struct {
	Buf  []byte // what is left to read
	Err  error  // the first thing that could not be read
	form byte   // recordBinary or recordBinary2
}

func (r *Reader) fail(what string) {
	if r.Err == nil {
		r.Err = fmt.Errorf("binary record: bad %s", what)
	}
}

func (r *Reader) Uint() uint64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.Buf)
	if n <= 0 {
		r.fail("number")
		return 0
	}
	r.Buf = r.Buf[n:]
	return v
}

func (r *Reader) int() int {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Varint(r.Buf)
	if n <= 0 || int64(int(v)) != v {
		r.fail("number")
		return 0
	}
	r.Buf = r.Buf[n:]
	return int(v)
}

func (r *Reader) Bytes(n uint64) []byte {
	if r.Err != nil {
		return nil
	}
	if n > uint64(len(r.Buf)) {
		r.fail("length")
		return nil
	}
	b := r.Buf[:n:n]
	r.Buf = r.Buf[n:]
	return b
}

func (r *Reader) str() string { return string(r.Bytes(r.Uint())) }

func (r *Reader) flag() bool {
	b := r.Bytes(1)
	if len(b) == 1 && b[0] > 1 {
		r.fail("flag")
	}
	return len(b) == 1 && b[0] == 1
}

func (r *Reader) strs() []string {
	n := r.Uint()
	if n == 0 || r.Err != nil {
		return nil
	}
	if n > uint64(len(r.Buf)) { // each string takes at least one byte
		r.fail("list length")
		return nil
	}
	out := make([]string, 0, n)
	for i := uint64(0); i < n && r.Err == nil; i++ {
		out = append(out, r.str())
	}
	return out
}

func (r *Reader) raw() json.RawMessage {
	n := r.Uint()
	if n == 0 {
		return nil
	}
	return append(json.RawMessage{}, r.Bytes(n-1)...)
}

func (r *Reader) token() string {
	i := r.Uint()
	switch {
	case i == 0:
		return r.str()
	case i > uint64(len(tokens)):
		r.fail("token")
		return ""
	}
	return tokens[i-1]
}

func (r *Reader) hash() string {
	if r.flag() {
		return hex.EncodeToString(r.Bytes(32))
	}
	return r.str()
}

func (r *Reader) time() time.Time {
	if !r.flag() || r.Err != nil {
		return time.Time{}
	}
	v, n := binary.Varint(r.Buf)
	if n <= 0 {
		r.fail("time")
		return time.Time{}
	}
	r.Buf = r.Buf[n:]
	return time.Unix(0, v)
}

func (r *Reader) timePtr() *time.Time {
	if !r.flag() {
		return nil
	}
	t := r.time()
	return &t
}

func (r *Reader) compensation(c *model.Compensation) {
	c.Kind = r.token()
	c.Argv = r.strs()
	c.Dir = r.str()
	c.Tool = r.str()
	c.Args = r.raw()
	c.Capture = r.raw()
	c.Note = r.str()
	c.MaxRetries = r.int()
	c.InitialBackoffMS = r.int()
}

func (r *Reader) effect(e *model.Effect) {
	e.ID = r.Uint()
	e.Session = r.str()
	e.Tool = r.str()
	e.Tier = sm.Tier(r.token())
	e.State = sm.State(r.token())
	e.CallSignature = r.hash()
	e.Args = r.raw()
	e.Result = r.raw()
	e.Error = r.str()
	if r.flag() {
		v := r.Uint()
		e.ReplayOf = &v
	}
	e.ReplayCount = r.int()
	e.LastReplayedAt = r.timePtr()
	if r.flag() {
		e.Compensation = &model.Compensation{}
		r.compensation(e.Compensation)
	}
	e.Key = r.str()
	e.Redact = r.strs()
	if r.flag() {
		e.Owner = &model.Owner{PID: r.int(), Host: r.str(), StartedAt: r.time()}
	}
	e.CreatedAt = r.time()
	e.UpdatedAt = r.time()
	e.HistoryLen = r.uint32()
	e.HistoryHead = r.hash()
	if r.form >= recordBinary2 {
		if start := r.Uint(); e.Owner != nil {
			e.Owner.ProcessStart = start
		}
	}
	if r.form >= recordBinary3 {
		if lease := r.time(); e.Owner != nil {
			e.Owner.LeaseUntil = lease
		}
	}
}

func (r *Reader) uint32() uint32 {
	v := r.Uint()
	if v > 1<<32-1 {
		r.fail("count")
	}
	return uint32(v)
}

func (r *Reader) history(h *model.HistoryRecord) {
	h.Seq = r.uint32()
	h.Kind = r.token()
	h.From = r.token()
	h.To = r.token()
	h.Trigger = r.token()
	h.Actor = r.token()
	h.Reason = r.str()
	h.Error = r.str()
	h.At = r.time()
	h.Hash, h.HashVersion = r.historyHash()
	if len(r.Buf) > 0 {
		h.Role = r.str()
	}
}

// historyHash reads a history record's hash and its version: the flag byte
// of hash, or model.HashWithContent followed by 32 bytes.
func (r *Reader) historyHash() (string, int) {
	if len(r.Buf) > 0 && r.Buf[0] == model.HashWithContent {
		r.Buf = r.Buf[1:]
		return hex.EncodeToString(r.Bytes(32)), model.HashWithContent
	}
	return r.hash(), 0
}

func (r *Reader) undo(u *model.UndoEntry) {
	u.State = sm.EntryState(r.token())
	u.Attempts = r.int()
	u.LastError = r.str()
	u.CreatedAt = r.time()
	u.UpdatedAt = r.time()
	if r.form >= recordBinary2 && r.flag() {
		u.Owner = &model.Owner{PID: r.int(), Host: r.str(), StartedAt: r.time(), ProcessStart: r.Uint()}
		if r.form >= recordBinary3 {
			u.Owner.LeaseUntil = r.time()
		}
	}
}

// mapSize reads a map's 0-for-nil size and checks it against what is left
// (each pair takes at least two bytes).
func (r *Reader) mapSize() (n uint64, isNil bool) {
	v := r.Uint()
	if v == 0 || r.Err != nil {
		return 0, true
	}
	if v-1 > uint64(len(r.Buf))/2 {
		r.fail("map size")
		return 0, true
	}
	return v - 1, false
}

func (r *Reader) session(s *model.Session) {
	s.ID = r.str()
	s.State = sm.SessionState(r.token())
	if n, isNil := r.mapSize(); !isNil {
		s.Meta = make(map[string]string, n)
		for i := uint64(0); i < n && r.Err == nil; i++ {
			k := r.str()
			s.Meta[k] = r.str()
		}
	}
	s.Reason = r.str()
	s.CreatedAt = r.time()
	s.UpdatedAt = r.time()
	if n, isNil := r.mapSize(); !isNil {
		s.Counts = make(map[sm.State]int, n)
		for i := uint64(0); i < n && r.Err == nil; i++ {
			k := sm.State(r.token())
			s.Counts[k] = r.int()
		}
	}
	s.Effects = r.int()
	s.PendingApprovals = r.int()
	s.Upstream = r.strs()
	s.HistoryLen = r.uint32()
	s.HistoryHead = r.hash()
	s.Seq = r.Uint()
	if len(r.Buf) > 0 && r.Err == nil {
		s.UpstreamDir = r.str()
	}
}

func (r *Reader) approval(a *model.Approval) {
	a.EffectID = r.Uint()
	a.Session = r.str()
	a.Tool = r.str()
	a.Args = r.raw()
	a.Reason = r.str()
	a.RequestedAt = r.time()
	a.ExpiresAt = r.timePtr()
	a.Outcome = r.token()
	a.DecidedBy = r.token()
	a.DecidedAt = r.timePtr()
	a.Decision = r.str()
	if r.Err != nil || len(r.Buf) == 0 {
		return
	}
	n := r.Uint()
	if n == 0 || n > uint64(len(r.Buf))/6 { // a round takes at least six bytes
		r.fail("round count")
		return
	}
	a.Earlier = make([]model.ApprovalRound, 0, n)
	for i := uint64(0); i < n && r.Err == nil; i++ {
		a.Earlier = append(a.Earlier, model.ApprovalRound{RequestedAt: r.time(), ExpiresAt: r.timePtr(), Outcome: r.token(),
			DecidedBy: r.token(), DecidedAt: r.timePtr(), Decision: r.str()})
	}
}

// What the binary form leaves out because where a record is kept says it,
// which a reader puts back.

// PlaceHistory fills in the effect id and session a binary history record
// does not store.
func PlaceHistory(r *model.HistoryRecord, effectID uint64, session string) {
	if r.EffectID == 0 && r.Session == "" {
		r.EffectID, r.Session = effectID, session
	}
}

// LinkHistory fills in the PrevHash a binary history record does not store:
// the hash of the record before it. The record's own hash covers it, so a
// record edited, dropped or moved still fails verification.
func LinkHistory(r *model.HistoryRecord, prevHash string) {
	if r.PrevHash == "" && r.Seq > 1 {
		r.PrevHash = prevHash
	}
}

// UndoNeedsEffect says whether undo entry u, as decoded, leaves its tool and
// compensation to its effect (the binary form does).
func UndoNeedsEffect(u *model.UndoEntry) bool { return u.Tool == "" && u.Compensation.Kind == "" }

// UndoFromEffect fills in what undo entry u leaves to its effect e.
func UndoFromEffect(u *model.UndoEntry, e *model.Effect) error {
	if e.Compensation == nil {
		return fmt.Errorf("%w: undo entry of effect %d, which has no compensation", model.ErrCorrupt, u.EffectID)
	}
	u.Tool, u.Compensation = e.Tool, *e.Compensation
	return nil
}
