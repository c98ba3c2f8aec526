package logstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// Problem is one inconsistency Verify found.
type Problem struct {
	Kind    string `json:"kind"`
	Effect  uint64 `json:"effect,omitempty"`
	Session string `json:"session,omitempty"`
	Detail  string `json:"detail"`
}

func (p Problem) String() string {
	where := ""
	switch {
	case p.Effect != 0:
		where = fmt.Sprintf("effect %d: ", p.Effect)
	case p.Session != "":
		where = fmt.Sprintf("session %s: ", p.Session)
	}
	return fmt.Sprintf("%s: %s%s", p.Kind, where, p.Detail)
}

// VerifyReport sums up a verification.
type VerifyReport struct {
	Sessions int       `json:"sessions"`
	Effects  int       `json:"effects"`
	Records  int       `json:"history_records"`
	Problems []Problem `json:"problems"`
}

// Verify walks the whole log: every record, every hash chain,
// every index entry against its record (both ways), signature uniqueness, the
// per-session counts, and that each effect's state equals its last history
// record. It reports every problem it finds; it changes nothing.
func (s *Store) Verify(ctx context.Context) (VerifyReport, error) {
	rep := VerifyReport{Problems: []Problem{}}
	err := s.view(func(tx *bolt.Tx) error {
		v := verifier{tx: tx, rep: &rep, effects: map[uint64]*model.Effect{}, sessions: map[string]*model.Session{}}
		return v.run()
	})
	return rep, err
}

type verifier struct {
	tx       *bolt.Tx
	rep      *VerifyReport
	effects  map[uint64]*model.Effect
	sessions map[string]*model.Session
}

func (v *verifier) add(kind string, effect uint64, session, format string, args ...any) {
	v.rep.Problems = append(v.rep.Problems, Problem{Kind: kind, Effect: effect, Session: session, Detail: fmt.Sprintf(format, args...)})
}

func (v *verifier) run() error {
	// bbolt's own tx.Check is not used: it walks pages in a goroutine of its
	// own, where a damaged page panics beyond any recover. The walk below
	// reaches every page that holds a record, under the store's guard.
	// Sessions and their own history chains.
	err := v.tx.Bucket(bSessions).ForEach(func(k, val []byte) error {
		var sess model.Session
		if err := decodeRecord(val, &sess); err != nil {
			v.add("record", 0, string(k), "unreadable session record: %v", err)
			return nil
		}
		v.sessions[sess.ID] = &sess
		v.rep.Sessions++
		if got := v.tx.Bucket(bSessionsByTime).Get(itob(sess.Seq)); string(got) != sess.ID {
			v.add("index", 0, sess.ID, "sessions_by_time entry %d is missing or names %q", sess.Seq, got)
		}
		hist, err := sessionHistory(v.tx, sess.ID)
		if err != nil {
			v.add("history", 0, sess.ID, "%v", err)
			return nil
		}
		problems, read := sessionProblems(&sess, hist)
		v.rep.Records += read
		v.rep.Problems = append(v.rep.Problems, problems...)
		return nil
	})
	if err != nil {
		return err
	}
	v.tx.Bucket(bSessionsByTime).ForEach(func(k, val []byte) error {
		if v.sessions[string(val)] == nil {
			v.add("index", 0, string(val), "sessions_by_time entry %x names a missing session", k)
		}
		return nil
	})
	// Effects, their history chains and the state they claim.
	counts := map[string]map[sm.State]int{}
	err = v.tx.Bucket(bEffects).ForEach(func(k, val []byte) error {
		var e model.Effect
		if err := decodeRecord(val, &e); err != nil || len(k) != 8 || btoi(k) != e.ID {
			v.add("record", 0, "", "unreadable effect record %x", k)
			return nil
		}
		v.effects[e.ID] = &e
		v.rep.Effects++
		if counts[e.Session] == nil {
			counts[e.Session] = map[sm.State]int{}
		}
		counts[e.Session][e.State]++
		if v.sessions[e.Session] == nil {
			v.add("reference", e.ID, "", "belongs to missing session %q", e.Session)
		}
		u, _ := getUndo(v.tx, &e)
		a, _ := getApproval(v.tx, e.ID)
		v.undoAndApproval(&e, u, a)
		hist, err := effectHistory(v.tx, e.ID, e.Session)
		if err != nil {
			v.add("history", e.ID, "", "%v", err)
			return nil
		}
		problems, read := effectProblems(&e, hist, u, a)
		v.rep.Records += read
		v.rep.Problems = append(v.rep.Problems, problems...)
		return nil
	})
	if err != nil {
		return err
	}
	for id, sess := range v.sessions {
		total := 0
		for st, n := range counts[id] {
			total += n
			if sess.Counts[st] != n {
				v.add("count", 0, id, "counts %d %s effects, the log holds %d", sess.Counts[st], st, n)
			}
		}
		for st, n := range sess.Counts {
			if counts[id][st] == 0 && n != 0 {
				v.add("count", 0, id, "counts %d %s effects, the log holds 0", n, st)
			}
		}
		if sess.Effects != total {
			v.add("count", 0, id, "counts %d effects, the log holds %d", sess.Effects, total)
		}
	}
	v.orphanHistory()
	v.indexes()
	v.undoAndApprovals()
	return nil
}

// checkChain checks the sequence numbers and hashes of one history (of
// effect e, or of session s), and its pinned end, and returns what it found
// and how many records it read. The records that carry hashWithContent are
// checked against what the effect says now, as it was at each record (see
// contentPoint), or against what the session says (see sessionContent).
func checkChain(hist []model.HistoryRecord, wantLen uint32, wantHead string, e *model.Effect, s *model.Session) (problems []string, read int) {
	prev := ""
	// Most records of an effect cover the same point: its digest is taken
	// once per point.
	var point, contentOf contentPoint
	content, have := "", false
	var covering []string // records with content whose hash fails
	for i, r := range hist {
		read++
		if r.Seq != uint32(i+1) {
			return append(problems, fmt.Sprintf("record %d has sequence %d: a record is missing", i+1, r.Seq)), read
		}
		if r.PrevHash != prev {
			problems = append(problems, fmt.Sprintf("record %d does not chain to record %d", r.Seq, r.Seq-1))
		}
		point = point.after(&r)
		switch {
		case r.HashVersion != hashWithContent:
		case e != nil && (!have || point != contentOf):
			content, contentOf, have = effectContent(e, point), point, true
		case s != nil && !have:
			content, have = sessionContent(s), true
		}
		if got := recordHash(&r, content); got != r.Hash {
			if r.HashVersion == hashWithContent {
				covering = append(covering, strconv.FormatUint(uint64(r.Seq), 10))
			} else {
				problems = append(problems, fmt.Sprintf("record %d was altered (hash mismatch)", r.Seq))
			}
		}
		prev = r.Hash
	}
	// One edit of what the effect says fails every record that covers it.
	if len(covering) > 0 {
		which := "record " + covering[0] + " was"
		if len(covering) > 1 {
			which = "records " + strings.Join(covering, ", ") + " were"
		}
		what := "the effect says (args, result, error, compensation)"
		if s != nil {
			what = "the session says (meta)"
		}
		problems = append(problems, which+" altered, or what "+what+" was (hash mismatch)")
	}
	if uint32(len(hist)) != wantLen || prev != wantHead {
		problems = append(problems, fmt.Sprintf("history has %d records ending %.12s; the record pins %d ending %.12s", len(hist), prev, wantLen, wantHead))
	}
	// The error is the one its records carry (which their hashes cover).
	if n := len(hist); e != nil && n > 0 && hist[n-1].HashVersion == hashWithContent && e.Error != point.err {
		problems = append(problems, fmt.Sprintf("the effect's error was altered: its history records %q", point.err))
	}
	return problems, read
}

// signatureProblem says what is wrong with the effect's call signature
// given its stored args, or "". Args stored redacted give no signature to
// compare (it was taken before redaction); their records cover them.
func signatureProblem(e *model.Effect) string {
	args, err := model.CanonicalArgs(e.Args)
	if err != nil {
		return "stored args are not valid JSON"
	}
	if model.Signature(e.Session, e.Tool, args, e.Key) != e.CallSignature && len(e.Redact) == 0 {
		return "call signature does not match its args"
	}
	return ""
}

// undoProblem says how an undo entry disagrees with its effect, or "". An
// entry that holds its own compensation (JSON entries of older logs) must
// hold the effect's, which the effect's history covers.
func undoProblem(e *model.Effect, u *model.UndoEntry) string {
	if e.Compensation == nil {
		return "" // an older log's effect that kept no compensation: the entry's stands alone
	}
	var a, b recordWriter
	a.compensation(e.Compensation)
	b.compensation(&u.Compensation)
	if u.Tool != e.Tool || !bytes.Equal(a.buf, b.buf) {
		return "undo entry's compensation differs from the effect's"
	}
	return ""
}

// effectProblems is every check of one effect against its own records,
// written once for verify and CheckEffect: its history chain and what the
// history covers of it, the states its history leaves it and its undo entry
// u in, its signature against its args, and its undo entry's compensation
// and its approval request a against it. It returns how many records it read.
func effectProblems(e *model.Effect, hist []model.HistoryRecord, u *model.UndoEntry, a *model.Approval) (problems []Problem, read int) {
	add := func(kind, format string, args ...any) {
		problems = append(problems, Problem{Kind: kind, Effect: e.ID, Detail: fmt.Sprintf(format, args...)})
	}
	chain, read := checkChain(hist, e.HistoryLen, e.HistoryHead, e, nil)
	for _, p := range chain {
		add("history", "%s", p)
	}
	state, entry := "", string(sm.EntryPending) // an entry no record moved is pending
	for _, r := range hist {
		switch r.Kind {
		case model.KindEffect:
			if r.From != state {
				add("history", "record %d moves from %q but the effect was %q", r.Seq, r.From, state)
			}
			if state == "" {
				if r.To != string(sm.Pending) {
					add("history", "first record enters %q, not pending", r.To)
				}
			} else if _, err := sm.Validate(e.Tier, sm.State(r.From), sm.State(r.To)); err != nil {
				add("history", "record %d: %v", r.Seq, err)
			}
			state = r.To
		case model.KindUndo:
			if r.From != entry {
				add("history", "undo record %d moves from %q but the entry was %q", r.Seq, r.From, entry)
			}
			entry = r.To
		default:
			add("history", "record %d has unknown kind %q", r.Seq, r.Kind)
		}
	}
	if state != string(e.State) {
		add("state", "state is %s but the last history record says %q", e.State, state)
	}
	if u != nil && string(u.State) != entry {
		add("state", "undo entry is %s but its history says %s", u.State, entry)
	}
	if p := signatureProblem(e); p != "" {
		add("signature", "%s", p)
	}
	if u != nil {
		if p := undoProblem(e, u); p != "" {
			add("undo", "%s", p)
		}
	}
	if a != nil {
		// An approver is shown the request: it must say what the effect does,
		// and why, as its first record (which its hash covers) says.
		if a.Session != e.Session || a.Tool != e.Tool || !bytes.Equal(a.Args, e.Args) {
			add("approval", "the request's session, tool or args differ from the effect's")
		}
		if len(hist) > 0 && a.Reason != hist[0].Reason {
			add("approval", "the request's reason differs from the effect's history: %q", hist[0].Reason)
		}
	}
	return problems, read
}

// CheckEffect checks one effect as read (GetEffect) against its own records
// (see effectProblems). Whatever fails is ErrCorrupt naming the effect: a
// compensation or a cached result is used only from an effect that passes.
func CheckEffect(d model.EffectDetail) error {
	problems, _ := effectProblems(&d.Effect, d.History, d.Undo, d.Approval)
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: effect %d fails its check, damaged or tampered (%s); run undolog verify",
		model.ErrCorrupt, d.Effect.ID, problems[0].Detail)
}

// checkEffectTx is CheckEffect inside a transaction, for effect e as read
// there.
func checkEffectTx(tx *bolt.Tx, e *model.Effect) error {
	d := model.EffectDetail{Effect: *e}
	var err error
	if d.History, err = effectHistory(tx, e.ID, e.Session); err != nil {
		return err
	}
	if d.Undo, err = getUndo(tx, e); err != nil {
		return err
	}
	if d.Approval, err = getApproval(tx, e.ID); err != nil {
		return err
	}
	return CheckEffect(d)
}

// sessionProblems is every check of one session against its own history,
// written once for verify and CheckSession: the chain and what it covers of
// the session (its meta), the state it leaves the session in, and the
// upstream it states.
func sessionProblems(s *model.Session, hist []model.HistoryRecord) (problems []Problem, read int) {
	add := func(kind, format string, args ...any) {
		problems = append(problems, Problem{Kind: kind, Session: s.ID, Detail: fmt.Sprintf(format, args...)})
	}
	chain, read := checkChain(hist, s.HistoryLen, s.HistoryHead, nil, s)
	for _, p := range chain {
		add("history", "%s", p)
	}
	if n := len(hist); n > 0 && hist[n-1].To != string(s.State) {
		add("state", "state is %s but the last history record says %s", s.State, hist[n-1].To)
	}
	upstream, stated, err := statedUpstream(hist)
	switch {
	case err != nil:
		add("history", "%v", err)
	case stated && !slices.Equal(upstream, s.Upstream):
		add("history", "the session's upstream was altered: its history records %q", upstream)
	}
	return problems, read
}

// CheckSession checks a session as read against its history (see
// sessionProblems): ErrCorrupt naming the session if it fails.
func CheckSession(s model.Session, hist []model.HistoryRecord) error {
	problems, _ := sessionProblems(&s, hist)
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: session %s fails its check, damaged or tampered (%s); run undolog verify",
		model.ErrCorrupt, s.ID, problems[0].Detail)
}

func (v *verifier) orphanHistory() {
	v.tx.Bucket(bHistory).ForEach(func(k, _ []byte) error {
		if len(k) != 12 || v.effects[btoi(k[:8])] == nil {
			v.add("history", 0, "", "history record %x belongs to no effect", k)
		}
		return nil
	})
	v.tx.Bucket(bSessionHistory).ForEach(func(k, _ []byte) error {
		i := bytes.IndexByte(k, 0)
		if i < 0 || v.sessions[string(k[:i])] == nil {
			v.add("history", 0, "", "session history record %q belongs to no session", k)
		}
		return nil
	})
}

// indexes checks every index entry against its record and every record
// against its index entries.
func (v *verifier) indexes() {
	owners := map[string]uint64{}
	for id, e := range v.effects {
		if e.ReplayOf != nil {
			if o := v.effects[*e.ReplayOf]; o == nil || o.CallSignature != e.CallSignature {
				v.add("reference", id, "", "replay_of %d is missing or has another signature", *e.ReplayOf)
			}
			continue
		}
		if other, dup := owners[e.CallSignature]; dup {
			v.add("signature", id, "", "signature %.16s is also owned by effect %d", e.CallSignature, other)
		}
		owners[e.CallSignature] = id
		if got := signatureOwner(v.tx, e.CallSignature); got == nil || btoi(got) != id {
			v.add("index", id, "", "signature index does not point at the effect")
		}
	}
	v.tx.Bucket(bSignatures).ForEach(func(k, val []byte) error {
		if len(val) != 8 {
			v.add("index", 0, "", "signature index entry %.16s is malformed", signatureOfKey(k))
			return nil
		}
		if e := v.effects[btoi(val)]; e == nil || e.CallSignature != signatureOfKey(k) || e.ReplayOf != nil {
			v.add("index", btoi(val), "", "signature index entry %.16s is dangling", signatureOfKey(k))
		}
		return nil
	})
	fields := []struct {
		bucket []byte
		name   string
		of     func(*model.Effect) string
	}{
		{bBySession, "session", func(e *model.Effect) string { return e.Session }},
		{bByState, "state", func(e *model.Effect) string { return string(e.State) }},
		{bByTool, "tool", func(e *model.Effect) string { return e.Tool }},
		{bByTier, "tier", func(e *model.Effect) string { return string(e.Tier) }},
	}
	for _, f := range fields {
		b := v.tx.Bucket(f.bucket)
		for id, e := range v.effects {
			if b.Get(nameKey(f.of(e), id)) == nil {
				v.add("index", id, "", "%s index lacks the effect", f.name)
			}
		}
		b.ForEach(func(k, _ []byte) error {
			if len(k) < 9 {
				v.add("index", 0, "", "%s index key %x is malformed", f.name, k)
				return nil
			}
			id := btoi(k[len(k)-8:])
			if e := v.effects[id]; e == nil || f.of(e) != string(k[:len(k)-9]) {
				v.add("index", id, "", "%s index entry %q is dangling", f.name, k[:len(k)-9])
			}
			return nil
		})
	}
}

// undoAndApproval checks that effect e has the undo entry u and approval
// request a its tier calls for, and the request's index entry. (What they
// say is checked against the effect by effectProblems.)
func (v *verifier) undoAndApproval(e *model.Effect, u *model.UndoEntry, a *model.Approval) {
	if e.ReplayOf != nil {
		return
	}
	id := e.ID
	if (e.Tier == sm.Compensable) != (u != nil) {
		v.add("undo", id, "", "a %s effect with undo entry=%v", e.Tier, u != nil)
	}
	if (e.Tier == sm.Irreversible) != (a != nil) {
		v.add("approval", id, "", "a %s effect with approval request=%v", e.Tier, a != nil)
	}
	openValue := v.tx.Bucket(bApprovalsOpen).Get(itob(id))
	open := openValue != nil
	if a != nil && (a.Outcome == model.ApprovalPending) != open {
		v.add("index", id, "", "approval is %s but pending index entry=%v", a.Outcome, open)
	}
	if a != nil && open {
		var want int64
		if a.ExpiresAt != nil {
			want = a.ExpiresAt.UnixNano()
		}
		if _, expires, known := parsePending(openValue); known && expires != want {
			v.add("index", id, "", "pending index entry expires at %d, the request at %d", expires, want)
		}
	}
}

func (v *verifier) undoAndApprovals() {
	v.tx.Bucket(bUndo).ForEach(func(k, _ []byte) error {
		if len(k) < 9 {
			v.add("undo", 0, "", "undo key %x is malformed", k)
			return nil
		}
		id := btoi(k[len(k)-8:])
		if e := v.effects[id]; e == nil || e.Session != string(k[:len(k)-9]) {
			v.add("undo", id, "", "undo entry belongs to no effect of session %q", k[:len(k)-9])
		}
		return nil
	})
	v.tx.Bucket(bApprovalsOpen).ForEach(func(k, val []byte) error {
		if e := v.effects[btoi(k)]; len(k) != 8 || e == nil || !openFor(val, e.Session) {
			v.add("index", btoi(k), "", "pending approval entry is dangling")
		}
		return nil
	})
}
