package effectlog

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// recordHash covers every field of the record and the previous hash, and
// for model.HashWithContent records the effect's content digest too (see
// effectContent).
//
// The role is covered when set, as one more field at the end: a record
// without one hashes as records did before roles.
func recordHash(r *model.HistoryRecord, content string) string {
	if r.HashVersion == model.HashWithContent {
		fields := []string{"undolog-history-v2", r.Kind, strconv.FormatUint(uint64(r.Seq), 10),
			strconv.FormatUint(r.EffectID, 10), r.Session, r.From, r.To, r.Trigger, r.Actor, r.Reason,
			r.Error, r.At.UTC().Format(time.RFC3339Nano), r.PrevHash, content}
		if r.Role != "" {
			fields = append(fields, r.Role)
		}
		return model.FieldsHash(fields...)
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
	w := digest{buf: make([]byte, 0, 256+len(e.Args)+len(e.Result))}
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

// sessionContent is the digest of what a session says that its records do
// not state themselves: its meta, set when it is created. Its upstream is
// stated by the records that set it (see statedUpstream), as the upstream
// can change and a digest of it would leave the records before a change
// unverifiable.
func sessionContent(s *model.Session) string {
	var w digest
	w.uint(uint64(len(s.Meta))) // nil and empty alike: JSON records of older logs hold either
	for _, k := range slices.Sorted(maps.Keys(s.Meta)) {
		w.str(k)
		w.str(s.Meta[k])
	}
	sum := sha256.Sum256(w.buf)
	return string(sum[:])
}

// digest is the input of a content digest: fields as varints and
// length-prefixed bytes. Its form is part of every history hash written
// since model.HashWithContent, so it never changes, whatever an engine's
// own record form does.
type digest struct{ buf []byte }

func (w *digest) uint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }
func (w *digest) int(v int)     { w.buf = binary.AppendVarint(w.buf, int64(v)) }

func (w *digest) str(s string) {
	w.uint(uint64(len(s)))
	w.buf = append(w.buf, s...)
}

func (w *digest) flag(b bool) {
	if b {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

func (w *digest) strs(list []string) {
	w.uint(uint64(len(list)))
	for _, s := range list {
		w.str(s)
	}
}

// raw keeps nil apart from empty: JSON null and "" are different results.
func (w *digest) raw(b []byte) {
	if b == nil {
		w.uint(0)
		return
	}
	w.uint(uint64(len(b)) + 1)
	w.buf = append(w.buf, b...)
}

// compensationKinds are the numbers a compensation's kind is written as
// (the digest began as the record form of its day, which wrote these words
// as their place in a list of words); any other kind is 0 and the word.
var compensationKinds = map[string]uint64{
	model.CompensationCommand: 23, model.CompensationMCP: 24, model.CompensationManual: 25,
}

func (w *digest) compensation(c *model.Compensation) {
	if n, ok := compensationKinds[c.Kind]; ok {
		w.uint(n)
	} else {
		w.uint(0)
		w.str(c.Kind)
	}
	w.strs(c.Argv)
	w.str(c.Dir)
	w.str(c.Tool)
	w.raw(c.Args)
	w.raw(c.Capture)
	w.str(c.Note)
	w.int(c.MaxRetries)
	w.int(c.InitialBackoffMS)
}

// appendEffectHistory chains rec onto the effect's history and records it in
// the change feed. The caller writes the effect afterwards; the effect's
// content must already be what it is once rec is written (its state may
// still be the one rec leaves).
func appendEffectHistory(tx storage.WriteTx, e *model.Effect, rec model.HistoryRecord) error {
	rec.EffectID, rec.Session, rec.HashVersion = e.ID, e.Session, model.HashWithContent
	p := contentPoint{result: hasResult(e.State) || rec.Kind == model.KindEffect && hasResult(sm.State(rec.To)), err: e.Error}
	return chain(tx, rec, effectContent(e, p), &e.HistoryLen, &e.HistoryHead)
}

// appendSessionHistory is the same for a session's own transitions; its
// records cover what the session says (see sessionContent).
func appendSessionHistory(tx storage.WriteTx, s *model.Session, rec model.HistoryRecord) error {
	rec.Kind, rec.Session, rec.HashVersion = model.KindSession, s.ID, model.HashWithContent
	return chain(tx, rec, sessionContent(s), &s.HistoryLen, &s.HistoryHead)
}

// chain links rec to the end of a history (length n, last hash head), writes
// it and moves n and head on.
func chain(tx storage.WriteTx, rec model.HistoryRecord, content string, n *uint32, head *string) error {
	rec.Seq, rec.PrevHash = *n+1, *head
	if id, ok := tx.(storage.Identity); ok {
		rec.Role = id.Role()
	}
	rec.Hash = recordHash(&rec, content)
	if err := tx.AddHistory(&rec); err != nil {
		return err
	}
	*n, *head = rec.Seq, rec.Hash
	return nil
}

// TriggerUpstream is the trigger of the session record that sets the
// session's upstream MCP server command; its reason holds the command as a
// JSON array, which the record's hash covers, or, with the directory it ran
// in and what located its state, {"command": [...], "dir": "...", "env":
// {"NAME": "value" or null}}.
const TriggerUpstream = "Upstream recorded"

type statedDir struct {
	Command []string       `json:"command"`
	Dir     string         `json:"dir"`
	Env     model.StateEnv `json:"env,omitempty"`
}

// recordUpstream sets the session's upstream and appends the record that
// states it. Its state's environment is kept in the record only: the
// session's own copy would be one more thing to hold to it.
func recordUpstream(tx storage.WriteTx, s *model.Session, upstream []string, dir string, env model.StateEnv, actor string, now time.Time) error {
	if len(env) == 0 {
		env = nil
	}
	var stated []byte
	var err error
	if dir == "" && env == nil {
		stated, err = json.Marshal(upstream) // as undologs before directories wrote it
	} else {
		stated, err = json.Marshal(statedDir{Command: upstream, Dir: dir, Env: env})
	}
	if err != nil {
		return err
	}
	s.Upstream, s.UpstreamDir, s.UpdatedAt = upstream, dir, now
	return appendSessionHistory(tx, s, model.HistoryRecord{From: string(s.State), To: string(s.State), Trigger: TriggerUpstream,
		Actor: actorOr(actor), Reason: string(stated), At: now})
}

// upstreamStated is what a session's history states of its upstream.
type upstreamStated struct {
	command []string
	dir     string
	env     model.StateEnv
	// stated is false for a session of an older undolog, which set its
	// upstream without a record.
	stated bool
}

// statedUpstream is the upstream (its directory and state's environment)
// a session's history states: that of its last TriggerUpstream record, else
// none for a session created by an undolog that records upstreams (its
// first record covers its content).
func statedUpstream(hist []model.HistoryRecord) (upstreamStated, error) {
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Trigger == TriggerUpstream {
			reason := []byte(hist[i].Reason)
			if len(reason) > 0 && reason[0] == '{' {
				var sd statedDir
				if err := json.Unmarshal(reason, &sd); err != nil || (sd.Dir == "" && sd.Env == nil) {
					return upstreamStated{stated: true}, fmt.Errorf("record %d states no upstream: %v", hist[i].Seq, err)
				}
				return upstreamStated{command: sd.Command, dir: sd.Dir, env: sd.Env, stated: true}, nil
			}
			var upstream []string
			if err := json.Unmarshal(reason, &upstream); err != nil {
				return upstreamStated{stated: true}, fmt.Errorf("record %d states no upstream: %v", hist[i].Seq, err)
			}
			return upstreamStated{command: upstream, stated: true}, nil
		}
	}
	return upstreamStated{stated: len(hist) > 0 && hist[0].HashVersion == model.HashWithContent}, nil
}

// stateEnvMoved says how a session's history states its upstream's state
// located otherwise by a later record than by the first that states it (a
// proxy joined the session with another MEMORY_FILE_PATH, or with a server
// that records none): the first variable that differs, and how; "" where
// none does. The calls before the later record were made on a state undo
// cannot reach through it.
func stateEnvMoved(hist []model.HistoryRecord) string {
	var first model.StateEnv
	for _, r := range hist {
		if r.Trigger != TriggerUpstream {
			continue
		}
		var sd statedDir
		if strings.HasPrefix(r.Reason, "{") && json.Unmarshal([]byte(r.Reason), &sd) != nil {
			continue // fails the session's check
		}
		if first == nil {
			first = sd.Env
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(first)) {
			was := first[name]
			if now, ok := sd.Env[name]; !ok {
				return fmt.Sprintf("%s was %s, then not recorded", name, valueOrUnset(was))
			} else if !sameValue(was, now) {
				return fmt.Sprintf("%s was %s, then %s", name, valueOrUnset(was), valueOrUnset(now))
			}
		}
	}
	return ""
}

// sameValue says whether two values of a StateEnv are the same (nil:
// unset).
func sameValue(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }

func valueOrUnset(v *string) string {
	if v == nil {
		return "unset"
	}
	return strconv.Quote(*v)
}

// setSessionState moves a session through the session table and records it.
func setSessionState(r *requests, s *model.Session, to sm.SessionState, c model.Change, now time.Time) error {
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
		if err := closeOpenApprovals(r, s, to, now); err != nil {
			return err
		}
	}
	return appendSessionHistory(r.tx, s, model.HistoryRecord{From: string(from), To: string(to), Trigger: t.Trigger,
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
