package boltfile

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

// recordBinary2 is the binary form with the fields added since at the end of
// its records: an owner's process start time (effect), the owner of a
// running compensation (undo entry). Records of form 1 end before them, so
// a record of form 2 cut short is still an error.
const recordBinary2 = 0x02

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

// encodeRecord encodes a record (a pointer to one of the record types) in
// the binary form.
func encodeRecord(v any) ([]byte, error) {
	w := recordWriter{buf: make([]byte, 0, 256)}
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
	return w.buf, nil
}

// decodeRecord decodes what encodeRecord wrote (or JSON) into v, copying
// everything out of data, which may be bbolt's memory.
func decodeRecord(data []byte, v any) error {
	if len(data) == 0 || data[0] != recordBinary && data[0] != recordBinary2 {
		return json.Unmarshal(data, v)
	}
	if len(data) < 2 {
		return errors.New("binary record without a type")
	}
	r := recordReader{buf: data[2:], form: data[0]}
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
	case r.err != nil:
		return r.err
	case len(r.buf) != 0:
		return fmt.Errorf("%d bytes after the record", len(r.buf))
	}
	return nil
}

type recordWriter struct{ buf []byte }

func (w *recordWriter) head(t byte)   { w.buf = append(w.buf, recordBinary2, t) }
func (w *recordWriter) uint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }
func (w *recordWriter) int(v int)     { w.buf = binary.AppendVarint(w.buf, int64(v)) }

func (w *recordWriter) str(s string) {
	w.uint(uint64(len(s)))
	w.buf = append(w.buf, s...)
}

func (w *recordWriter) bytes(b []byte) {
	w.uint(uint64(len(b)))
	w.buf = append(w.buf, b...)
}

func (w *recordWriter) flag(b bool) {
	if b {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

func (w *recordWriter) strs(list []string) {
	w.uint(uint64(len(list)))
	for _, s := range list {
		w.str(s)
	}
}

// raw keeps nil apart from empty: JSON null and "" are different results.
func (w *recordWriter) raw(b []byte) {
	if b == nil {
		w.uint(0)
		return
	}
	w.uint(uint64(len(b)) + 1)
	w.buf = append(w.buf, b...)
}

func (w *recordWriter) token(s string) {
	if i, ok := tokenIndex[s]; ok {
		w.uint(i)
		return
	}
	w.uint(0)
	w.str(s)
}

// hash stores a lower-case hex SHA-256 as 32 bytes, anything else as text.
func (w *recordWriter) hash(h string) {
	if b, ok := rawHash(h); ok {
		w.buf = append(w.buf, 1)
		w.buf = append(w.buf, b...)
		return
	}
	w.buf = append(w.buf, 0)
	w.str(h)
}

// rawHash is the 32 bytes of a lower-case hex SHA-256 (signatures, history
// hashes); ok is false for anything else, which is then kept as text.
func rawHash(h string) (b []byte, ok bool) {
	if len(h) != 64 {
		return nil, false
	}
	b, err := hex.DecodeString(h)
	return b, err == nil && hex.EncodeToString(b) == h
}

func (w *recordWriter) time(t time.Time) {
	if t.IsZero() {
		w.flag(false)
		return
	}
	w.flag(true)
	w.buf = binary.AppendVarint(w.buf, t.UnixNano())
}

func (w *recordWriter) timePtr(t *time.Time) {
	w.flag(t != nil)
	if t != nil {
		w.time(*t)
	}
}

func (w *recordWriter) compensation(c *model.Compensation) {
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

func (w *recordWriter) effect(e *model.Effect) {
	w.head(recEffect)
	w.uint(e.ID)
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
		w.uint(*e.ReplayOf)
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
	w.uint(uint64(e.HistoryLen))
	w.hash(e.HistoryHead)
	// Fields of form 2.
	var procStart uint64
	if e.Owner != nil {
		procStart = e.Owner.ProcessStart
	}
	w.uint(procStart)
}

// history stores neither the effect id and session, which its key gives
// (see placeHistory), nor PrevHash, the hash of the record before it (see
// linkHistory). The record's hash covers all three. Its hash version costs
// no byte: the hash's flag byte is 2 for model.HashWithContent (see historyHash).
func (w *recordWriter) history(h *model.HistoryRecord) {
	w.head(recHistory)
	w.uint(uint64(h.Seq))
	w.token(h.Kind)
	w.token(h.From)
	w.token(h.To)
	w.token(h.Trigger)
	w.token(h.Actor)
	w.str(h.Reason)
	w.str(h.Error)
	w.time(h.At)
	if b, ok := rawHash(h.Hash); ok && h.HashVersion == model.HashWithContent {
		w.buf = append(w.buf, model.HashWithContent)
		w.buf = append(w.buf, b...)
	} else {
		w.hash(h.Hash)
	}
}

// undo stores only what the entry adds to its effect: the effect id and
// session are its key, and the tool and compensation are the effect's (see
// readUndo).
func (w *recordWriter) undo(u *model.UndoEntry) {
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
		w.uint(u.Owner.ProcessStart)
	}
}

func (w *recordWriter) approval(a *model.Approval) {
	w.head(recApprove)
	w.uint(a.EffectID)
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
		w.uint(uint64(len(a.Earlier)))
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

func (w *recordWriter) session(s *model.Session) {
	w.head(recSession)
	w.str(s.ID)
	w.token(string(s.State))
	// Maps: 0 for nil, else 1 + their size, then the pairs in key order so
	// that equal sessions encode equally.
	if s.Meta == nil {
		w.uint(0)
	} else {
		w.uint(uint64(len(s.Meta)) + 1)
		for _, k := range slices.Sorted(maps.Keys(s.Meta)) {
			w.str(k)
			w.str(s.Meta[k])
		}
	}
	w.str(s.Reason)
	w.time(s.CreatedAt)
	w.time(s.UpdatedAt)
	if s.Counts == nil {
		w.uint(0)
	} else {
		w.uint(uint64(len(s.Counts)) + 1)
		for _, k := range slices.Sorted(maps.Keys(s.Counts)) {
			w.token(string(k))
			w.int(s.Counts[k])
		}
	}
	w.int(s.Effects)
	w.int(s.PendingApprovals)
	w.strs(s.Upstream)
	w.uint(uint64(s.HistoryLen))
	w.hash(s.HistoryHead)
	w.uint(s.Seq)
}

// recordReader reads fields until the first error, which it keeps; every
// read is bounds-checked, so damaged bytes give an error, never a panic.
type recordReader struct {
	buf  []byte
	err  error
	form byte // recordBinary or recordBinary2
}

func (r *recordReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("binary record: bad %s", what)
	}
}

func (r *recordReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf)
	if n <= 0 {
		r.fail("number")
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

func (r *recordReader) int() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.buf)
	if n <= 0 || int64(int(v)) != v {
		r.fail("number")
		return 0
	}
	r.buf = r.buf[n:]
	return int(v)
}

func (r *recordReader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.buf)) {
		r.fail("length")
		return nil
	}
	b := r.buf[:n:n]
	r.buf = r.buf[n:]
	return b
}

func (r *recordReader) str() string { return string(r.bytes(r.uint())) }

func (r *recordReader) flag() bool {
	b := r.bytes(1)
	if len(b) == 1 && b[0] > 1 {
		r.fail("flag")
	}
	return len(b) == 1 && b[0] == 1
}

func (r *recordReader) strs() []string {
	n := r.uint()
	if n == 0 || r.err != nil {
		return nil
	}
	if n > uint64(len(r.buf)) { // each string takes at least one byte
		r.fail("list length")
		return nil
	}
	out := make([]string, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, r.str())
	}
	return out
}

func (r *recordReader) raw() json.RawMessage {
	n := r.uint()
	if n == 0 {
		return nil
	}
	return append(json.RawMessage{}, r.bytes(n-1)...)
}

func (r *recordReader) token() string {
	i := r.uint()
	switch {
	case i == 0:
		return r.str()
	case i > uint64(len(tokens)):
		r.fail("token")
		return ""
	}
	return tokens[i-1]
}

func (r *recordReader) hash() string {
	if r.flag() {
		return hex.EncodeToString(r.bytes(32))
	}
	return r.str()
}

func (r *recordReader) time() time.Time {
	if !r.flag() || r.err != nil {
		return time.Time{}
	}
	v, n := binary.Varint(r.buf)
	if n <= 0 {
		r.fail("time")
		return time.Time{}
	}
	r.buf = r.buf[n:]
	return time.Unix(0, v)
}

func (r *recordReader) timePtr() *time.Time {
	if !r.flag() {
		return nil
	}
	t := r.time()
	return &t
}

func (r *recordReader) compensation(c *model.Compensation) {
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

func (r *recordReader) effect(e *model.Effect) {
	e.ID = r.uint()
	e.Session = r.str()
	e.Tool = r.str()
	e.Tier = sm.Tier(r.token())
	e.State = sm.State(r.token())
	e.CallSignature = r.hash()
	e.Args = r.raw()
	e.Result = r.raw()
	e.Error = r.str()
	if r.flag() {
		v := r.uint()
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
		if start := r.uint(); e.Owner != nil {
			e.Owner.ProcessStart = start
		}
	}
}

func (r *recordReader) uint32() uint32 {
	v := r.uint()
	if v > 1<<32-1 {
		r.fail("count")
	}
	return uint32(v)
}

func (r *recordReader) history(h *model.HistoryRecord) {
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
}

// historyHash reads a history record's hash and its version: the flag byte
// of hash, or model.HashWithContent followed by 32 bytes.
func (r *recordReader) historyHash() (string, int) {
	if len(r.buf) > 0 && r.buf[0] == model.HashWithContent {
		r.buf = r.buf[1:]
		return hex.EncodeToString(r.bytes(32)), model.HashWithContent
	}
	return r.hash(), 0
}

func (r *recordReader) undo(u *model.UndoEntry) {
	u.State = sm.EntryState(r.token())
	u.Attempts = r.int()
	u.LastError = r.str()
	u.CreatedAt = r.time()
	u.UpdatedAt = r.time()
	if r.form >= recordBinary2 && r.flag() {
		u.Owner = &model.Owner{PID: r.int(), Host: r.str(), StartedAt: r.time(), ProcessStart: r.uint()}
	}
}

// mapSize reads a map's 0-for-nil size and checks it against what is left
// (each pair takes at least two bytes).
func (r *recordReader) mapSize() (n uint64, isNil bool) {
	v := r.uint()
	if v == 0 || r.err != nil {
		return 0, true
	}
	if v-1 > uint64(len(r.buf))/2 {
		r.fail("map size")
		return 0, true
	}
	return v - 1, false
}

func (r *recordReader) session(s *model.Session) {
	s.ID = r.str()
	s.State = sm.SessionState(r.token())
	if n, isNil := r.mapSize(); !isNil {
		s.Meta = make(map[string]string, n)
		for i := uint64(0); i < n && r.err == nil; i++ {
			k := r.str()
			s.Meta[k] = r.str()
		}
	}
	s.Reason = r.str()
	s.CreatedAt = r.time()
	s.UpdatedAt = r.time()
	if n, isNil := r.mapSize(); !isNil {
		s.Counts = make(map[sm.State]int, n)
		for i := uint64(0); i < n && r.err == nil; i++ {
			k := sm.State(r.token())
			s.Counts[k] = r.int()
		}
	}
	s.Effects = r.int()
	s.PendingApprovals = r.int()
	s.Upstream = r.strs()
	s.HistoryLen = r.uint32()
	s.HistoryHead = r.hash()
	s.Seq = r.uint()
}

func (r *recordReader) approval(a *model.Approval) {
	a.EffectID = r.uint()
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
	if r.err != nil || len(r.buf) == 0 {
		return
	}
	n := r.uint()
	if n == 0 || n > uint64(len(r.buf))/6 { // a round takes at least six bytes
		r.fail("round count")
		return
	}
	a.Earlier = make([]model.ApprovalRound, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		a.Earlier = append(a.Earlier, model.ApprovalRound{RequestedAt: r.time(), ExpiresAt: r.timePtr(), Outcome: r.token(),
			DecidedBy: r.token(), DecidedAt: r.timePtr(), Decision: r.str()})
	}
}
