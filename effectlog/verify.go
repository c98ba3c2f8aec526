package effectlog

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// VerifyReport sums up a verification.
type VerifyReport struct {
	Sessions int             `json:"sessions"`
	Effects  int             `json:"effects"`
	Records  int             `json:"history_records"`
	Problems []model.Problem `json:"problems"`
	// Empty says the engine read the log as not made yet (a database
	// without its tables): nothing was there to check.
	Empty bool `json:"-"`
}

// Verify walks the whole log: every record, every hash chain,
// every index entry against its record (both ways), signature uniqueness, the
// per-session counts, and that each effect's state equals its last history
// record. It reports every problem it finds; it changes nothing. Each effect
// is checked as it is read, then only its keys are kept (storage.EffectSet):
// verify's memory is a few dozen bytes an effect, not the log.
func (s *Service) Verify(ctx context.Context) (VerifyReport, error) {
	var rep VerifyReport
	held := false
	err := s.view(ctx, func(tx storage.ReadTx) error {
		held = true
		rep = VerifyReport{Problems: []model.Problem{}}
		v := verifier{tx: tx, rep: &rep, effects: storage.NewEffectSet(), sessions: map[string]*model.Session{},
			counts: map[string]map[sm.State]int{}, waiting: map[string]int{}}
		return v.run()
	})
	rep.Empty = !held
	return rep, err
}

// verifier is verify's semantic half: what the records say, against each
// other and their histories. The engine checks its own indexes.
type verifier struct {
	tx       storage.ReadTx
	rep      *VerifyReport
	effects  *storage.EffectSet
	sessions map[string]*model.Session
	counts   map[string]map[sm.State]int
	waiting  map[string]int // requests waiting for a decision, by session
	// answered holds, by position in effects, the effects whose answer was
	// recorded.
	answered []uint64
	batch    []effectJob     // effects read, not yet handed to a checker
	pending  []*checkedBatch // batches being checked, oldest first
}

func (v *verifier) add(kind string, effect uint64, session, format string, args ...any) {
	v.problem(model.Problem{Kind: kind, Effect: effect, Session: session, Detail: fmt.Sprintf(format, args...)})
}

// problem reports p after what the effects read before it found.
func (v *verifier) problem(p model.Problem) {
	v.drain()
	v.rep.Problems = append(v.rep.Problems, p)
}

func (v *verifier) run() error {
	// Records walks every session before any effect: an effect's session
	// is known by the time it is checked.
	err := v.tx.Records(v.session, v.effect, v.problem)
	v.drain()
	if err != nil {
		return err
	}
	for id, sess := range v.sessions {
		for _, p := range countProblems(sess, v.counts[id], v.waiting[id]) {
			v.add("count", 0, id, "%s", p)
		}
	}
	v.signatures()
	return v.tx.CheckIndexes(v.sessions, v.effects, v.problem)
}

// countProblems compares what a session's record counts with what the log
// holds of it: its effects by state, and its requests waiting for a decision.
func countProblems(sess *model.Session, counts map[sm.State]int, waiting int) []string {
	var problems []string
	total := 0
	for st, n := range counts {
		total += n
		if sess.Counts[st] != n {
			problems = append(problems, fmt.Sprintf("counts %d %s effects, the log holds %d", sess.Counts[st], st, n))
		}
	}
	for st, n := range sess.Counts {
		if counts[st] == 0 && n != 0 {
			problems = append(problems, fmt.Sprintf("counts %d %s effects, the log holds 0", n, st))
		}
	}
	if sess.Effects != total {
		problems = append(problems, fmt.Sprintf("counts %d effects, the log holds %d", sess.Effects, total))
	}
	if sess.PendingApprovals != waiting {
		problems = append(problems, fmt.Sprintf("counts %d requests waiting for approval, the log holds %d", sess.PendingApprovals, waiting))
	}
	return problems
}

// session checks a session and its own history chain.
func (v *verifier) session(sess model.Session) {
	v.sessions[sess.ID] = &sess
	v.rep.Sessions++
	hist, err := v.tx.SessionHistory(sess.ID)
	if err != nil {
		v.add("history", 0, sess.ID, "%v", err)
		return
	}
	problems, read := sessionProblems(&sess, hist)
	v.rep.Records += read
	v.rep.Problems = append(v.rep.Problems, problems...)
}

// effect keeps an effect's keys and reads what its checks need; the checks
// themselves (the hashes, the signature from the args) run on another core,
// a batch at a time, while the next effects are read.
func (v *verifier) effect(e model.Effect) {
	pos := v.effects.Len()
	v.effects.Add(&e)
	v.rep.Effects++
	if v.counts[e.Session] == nil {
		v.counts[e.Session] = map[sm.State]int{}
	}
	v.counts[e.Session][e.State]++
	j := effectJob{e: e}
	j.u, _ = v.tx.Undo(e.Session, e.ID, &e)
	j.a, _ = v.tx.Approval(e.ID)
	if j.a != nil && j.a.Outcome == model.ApprovalPending {
		v.waiting[e.Session]++
	}
	j.hist, j.err = v.tx.EffectHistory(e.ID, e.Session)
	if j.err == nil && answeredIn(j.hist) {
		for len(v.answered) <= pos/64 {
			v.answered = append(v.answered, 0)
		}
		v.answered[pos/64] |= 1 << (pos % 64)
	}
	v.batch = append(v.batch, j)
	if len(v.batch) == verifyBatch {
		v.dispatch()
	}
}

// verifyBatch is how many effects' checks go to the checker at once; at
// most two batches wait, so that memory holds a few thousand effects.
const verifyBatch = 1024

type effectJob struct {
	e    model.Effect
	hist []model.HistoryRecord
	err  error
	u    *model.UndoEntry
	a    *model.Approval
}

type checkedBatch struct {
	problems []model.Problem
	read     int
	done     chan struct{}
}

// dispatch hands the batch to a checker and collects the oldest batches
// done, so that problems are reported in the order of their effects.
func (v *verifier) dispatch() {
	if len(v.batch) == 0 {
		return
	}
	jobs := v.batch
	v.batch = nil
	b := &checkedBatch{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		for i := range jobs {
			j := &jobs[i]
			problems, read := v.checkEffect(j)
			b.problems, b.read = append(b.problems, problems...), b.read+read
		}
	}()
	v.pending = append(v.pending, b)
	for len(v.pending) > 2 {
		v.collect()
	}
}

// collect waits for the oldest batch and reports what it found.
func (v *verifier) collect() {
	b := v.pending[0]
	v.pending = v.pending[1:]
	<-b.done
	v.rep.Records += b.read
	v.rep.Problems = append(v.rep.Problems, b.problems...)
}

// drain reports every batch still being checked, in order.
func (v *verifier) drain() {
	v.dispatch()
	for len(v.pending) > 0 {
		v.collect()
	}
}

// checkEffect is every check of one effect read by effect: its session,
// its undo entry and request, its history and what that covers. It reads
// only the job and the sessions (complete before any effect is read).
func (v *verifier) checkEffect(j *effectJob) (_ []model.Problem, read int) {
	var out []model.Problem
	e := &j.e
	if v.sessions[e.Session] == nil {
		out = append(out, model.Problem{Kind: "reference", Effect: e.ID, Detail: fmt.Sprintf("belongs to missing session %q", e.Session)})
	}
	out = append(out, undoAndApproval(e, j.u, j.a)...)
	if j.err != nil {
		return append(out, model.Problem{Kind: "history", Effect: e.ID, Detail: j.err.Error()}), 0
	}
	problems, read := effectProblems(e, j.hist, j.u, j.a)
	return append(out, problems...), read
}

func (v *verifier) answeredAt(pos int) bool {
	return pos/64 < len(v.answered) && v.answered[pos/64]&(1<<(pos%64)) != 0
}

// signatures checks that each call signature has one owner and that each
// replay names an effect of its signature. A call made again after its
// answer reached the client, or after it was rejected and its session
// resumed, is a new effect of the same signature, which owns it from then
// on: each earlier effect of a signature must be a committed one whose
// answer was recorded, or a rejected one. What is found is reported in id
// order.
func (v *verifier) signatures() {
	var found []model.Problem
	v.effects.Each(func(_ int, e storage.EffectKeys) {
		if !e.Replay {
			return
		}
		switch o, ok := v.effects.Get(e.ReplayOf); {
		case !ok:
			found = append(found, model.Problem{Kind: "reference", Effect: e.ID, Detail: fmt.Sprintf("replay_of %d is missing", e.ReplayOf)})
		case o.CallSignature != e.CallSignature:
			theirs, mine := hashesApart(o.CallSignature, e.CallSignature)
			found = append(found, model.Problem{Kind: "reference", Effect: e.ID, Detail: fmt.Sprintf("replay_of %d has another signature: %s, this effect's %s", e.ReplayOf, theirs, mine)})
		}
	})
	v.effects.Repeats(func(earlier, pos int) {
		if !v.answeredAt(earlier) && v.effects.Keys(earlier).State != string(sm.Rejected) {
			found = append(found, model.Problem{Kind: "signature", Effect: v.effects.ID(pos),
				Detail: fmt.Sprintf("signature %.16s is also owned by effect %d", v.effects.Signature(pos), v.effects.ID(earlier))})
		}
	})
	slices.SortStableFunc(found, func(a, b model.Problem) int { return cmpUint(a.Effect, b.Effect) })
	v.rep.Problems = append(v.rep.Problems, found...)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func orNone(s string) string {
	if s == "" {
		return "new"
	}
	return s
}

// checkChain checks the sequence numbers and hashes of one history (of
// effect e, or of session s), and its pinned end, and returns what it found
// and how many records it read. The records that carry model.HashWithContent are
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
			names, was := hashesApart(r.PrevHash, prev)
			problems = append(problems, fmt.Sprintf("record %d does not chain to record %d: it names %s, record %d's hash is %s", r.Seq, r.Seq-1, names, r.Seq-1, was))
		}
		point = point.after(&r)
		switch {
		case r.HashVersion != model.HashWithContent:
		case e != nil && (!have || point != contentOf):
			content, contentOf, have = effectContent(e, point), point, true
		case s != nil && !have:
			content, have = sessionContent(s), true
		}
		if got := recordHash(&r, content); got != r.Hash {
			if r.HashVersion == model.HashWithContent {
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
		ends, pinned := hashesApart(prev, wantHead)
		has := fmt.Sprintf("history has %d records ending %s", len(hist), ends)
		if len(hist) == 0 {
			has = "history has no records"
		}
		problems = append(problems, fmt.Sprintf("%s; the record pins %d ending %s", has, wantLen, pinned))
	}
	// The error is the one its records carry (which their hashes cover).
	if n := len(hist); e != nil && n > 0 && hist[n-1].HashVersion == model.HashWithContent && e.Error != point.err {
		says, recorded := model.Apart(e.Error, point.err)
		problems = append(problems, fmt.Sprintf("the effect's error was altered: it says %s, its history records %s", says, recorded))
	}
	return problems, read
}

// hashesApart renders two hashes a problem compares: their first 12
// characters, or as many as show where they differ, so that two hashes
// that differ never print alike; quoted (model.Apart) unless both are hex.
func hashesApart(a, b string) (string, string) {
	n := 12
	if a != b {
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		n = max(n, i+1)
	}
	a, b = a[:min(n, len(a))], b[:min(n, len(b))]
	if isHex(a) && isHex(b) {
		return a, b
	}
	return model.Apart(a, b)
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// signatureProblem says what is wrong with the effect's call signature
// given its stored args, or "". Args stored redacted give no signature to
// compare (it was taken before redaction); their records cover them.
func signatureProblem(e *model.Effect) string {
	args, err := model.CanonicalArgs(e.Args)
	if err != nil {
		return "stored args are not valid JSON"
	}
	if sig := model.Signature(e.Session, e.Tool, args, e.Key); sig != e.CallSignature && len(e.Redact) == 0 {
		stored, given := hashesApart(e.CallSignature, sig)
		return "call signature does not match its args: it is " + stored + ", its args give " + given
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
	if u.Tool != e.Tool {
		entry, effect := model.Apart(u.Tool, e.Tool)
		return "undo entry's tool differs from the effect's: " + entry + ", the effect's " + effect
	}
	if field := compensationDifference(&u.Compensation, e.Compensation); field != "" {
		return "undo entry's compensation differs from the effect's in " + field
	}
	return ""
}

// compensationDifference names the first field in which compensation a
// differs from b, with both values ("" when they agree); a nil JSON value
// differs from an empty one.
func compensationDifference(a, b *model.Compensation) string {
	text := func(name, x, y string) string {
		qx, qy := model.Apart(x, y)
		return name + ": " + qx + ", the effect's " + qy
	}
	raw := func(name string, x, y []byte) string {
		if x == nil || y == nil {
			return fmt.Sprintf("%s: none in one, %d bytes in the other", name, len(x)+len(y))
		}
		return name + " (" + bytesDifference(x, y) + ")"
	}
	sameRaw := func(x, y []byte) bool { return (x == nil) == (y == nil) && bytes.Equal(x, y) }
	switch {
	case a.Kind != b.Kind:
		return text("its kind", a.Kind, b.Kind)
	case !slices.Equal(a.Argv, b.Argv):
		x, y := listsApart(a.Argv, b.Argv)
		return "its argv: " + x + ", the effect's " + y
	case a.Dir != b.Dir:
		return text("its dir", a.Dir, b.Dir)
	case a.Tool != b.Tool:
		return text("its tool", a.Tool, b.Tool)
	case !sameRaw(a.Args, b.Args):
		return raw("its args", a.Args, b.Args)
	case !sameRaw(a.Capture, b.Capture):
		return raw("its capture", a.Capture, b.Capture)
	case a.Note != b.Note:
		return text("its note", a.Note, b.Note)
	case a.MaxRetries != b.MaxRetries:
		return fmt.Sprintf("its max_retries: %d, the effect's %d", a.MaxRetries, b.MaxRetries)
	case a.InitialBackoffMS != b.InitialBackoffMS:
		return fmt.Sprintf("its initial_backoff_ms: %d, the effect's %d", a.InitialBackoffMS, b.InitialBackoffMS)
	}
	return ""
}

// bytesDifference says where two byte strings first differ, with a few
// bytes of each from there (model.Apart), the second the effect's: large
// values are not printed whole, and what is printed differs.
func bytesDifference(x, y []byte) string {
	i := 0
	for i < len(x) && i < len(y) && x[i] == y[i] {
		i++
	}
	const window = 24
	from := max(0, i-8)
	qx, qy := model.Apart(string(x[from:min(len(x), i+window)]), string(y[from:min(len(y), i+window)]))
	return fmt.Sprintf("from byte %d: %s, the effect's %s", i, qx, qy)
}

// sameCompensation compares two compensations field by field
// (compensationDifference).
func sameCompensation(a, b *model.Compensation) bool { return compensationDifference(a, b) == "" }

// effectProblems is every check of one effect against its own records,
// written once for verify and CheckEffect: its history chain and what the
// history covers of it, the states its history leaves it and its undo entry
// u in, its signature against its args, and its undo entry's compensation
// and its approval request a against it. It returns how many records it read.
func effectProblems(e *model.Effect, hist []model.HistoryRecord, u *model.UndoEntry, a *model.Approval) (problems []model.Problem, read int) {
	add := func(kind, format string, args ...any) {
		problems = append(problems, model.Problem{Kind: kind, Effect: e.ID, Detail: fmt.Sprintf(format, args...)})
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
				from, was := model.Apart(r.From, state)
				add("history", "record %d moves from %s but the effect was %s", r.Seq, from, was)
			}
			if state == "" {
				if r.To != string(sm.Pending) {
					add("history", "first record enters %q, not pending", r.To)
				}
			} else if _, err := sm.Validate(e.Tier, sm.State(r.From), sm.State(r.To)); err != nil {
				add("history", "record %d: %v", r.Seq, err)
			}
			state = r.To
		case model.KindAnswer:
			// An answer is a committed call's: it moves nothing.
			if state != string(sm.Committed) || r.From != state || r.To != state {
				add("history", "answer record %d on a %s effect, %q -> %q", r.Seq, orNone(state), r.From, r.To)
			}
		case model.KindInput:
			// An input round is an executing call's: it moves nothing.
			if state != string(sm.Executing) || r.From != state || r.To != state {
				add("history", "input record %d on a %s effect, %q -> %q", r.Seq, orNone(state), r.From, r.To)
			}
		case model.KindUndo:
			if r.From != entry {
				from, was := model.Apart(r.From, entry)
				add("history", "undo record %d moves from %s but the entry was %s", r.Seq, from, was)
			}
			// A move undolog makes (a reclaim stays compensating), and a
			// skip only of an effect that never ran: a record appended by
			// hand moved an entry to compensated or skipped at once, and
			// undo passed the call by.
			if reclaim := r.From == r.To && r.To == string(sm.EntryCompensating); !reclaim {
				if _, err := sm.ValidateEntry(sm.EntryState(r.From), sm.EntryState(r.To)); err != nil {
					add("history", "undo record %d: %v", r.Seq, err)
				}
			}
			if r.To == string(sm.EntrySkipped) && state != string(sm.Pending) {
				add("history", "undo record %d skips the entry of a %s effect: only an effect that never ran is skipped", r.Seq, orNone(state))
			}
			entry = r.To
		default:
			add("history", "record %d has unknown kind %q", r.Seq, r.Kind)
		}
	}
	if state != string(e.State) {
		says, recorded := model.Apart(string(e.State), state)
		add("state", "state is %s but the last history record says %s", says, recorded)
	}
	if e.ReplayOf == nil {
		// A call's intercept writes these with it (a replay did nothing):
		// one missing was removed, and undo or a decision would pass it by.
		switch {
		case e.Tier == sm.Compensable && u == nil:
			add("undo", "a compensable call without its undo entry")
		case e.Tier == sm.Irreversible && a == nil:
			add("approval", "an irreversible call without its approval request")
		}
	}
	if u != nil && string(u.State) != entry {
		says, recorded := model.Apart(string(u.State), entry)
		add("state", "undo entry is %s but its history says %s", says, recorded)
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
		switch {
		case a.Session != e.Session:
			request, effect := model.Apart(a.Session, e.Session)
			add("approval", "the request's session differs from the effect's: %s, the effect's %s", request, effect)
		case a.Tool != e.Tool:
			request, effect := model.Apart(a.Tool, e.Tool)
			add("approval", "the request's tool differs from the effect's: %s, the effect's %s", request, effect)
		case !bytes.Equal(a.Args, e.Args):
			add("approval", "the request's args differ from the effect's (%s)", bytesDifference(a.Args, e.Args))
		}
		if len(hist) > 0 && a.Reason != hist[0].Reason {
			says, recorded := model.Apart(a.Reason, hist[0].Reason)
			add("approval", "the request's reason differs from the effect's history: the request says %s, the history %s", says, recorded)
		}
		if p := decisionProblem(a, hist); p != "" {
			add("approval", "%s", p)
		}
	}
	return problems, read
}

// decisionProblem holds a request's decisions (who, when, why, which) to
// the effect's history, whose hashes cover them: each approval or
// rejection of its rounds, in order, is a move of the effect from pending
// to that state by that actor with that reason, and every such move is a
// round's. (A round that timed out or was closed moved nothing.)
func decisionProblem(a *model.Approval, hist []model.HistoryRecord) string {
	var moves []model.HistoryRecord
	for _, r := range hist {
		if r.Kind == model.KindEffect && r.From == string(sm.Pending) && (r.To == string(sm.Approved) || r.To == string(sm.Rejected)) {
			moves = append(moves, r)
		}
	}
	k := 0
	for _, round := range append(append([]model.ApprovalRound(nil), a.Earlier...), a.ApprovalRound) {
		if round.Outcome != model.ApprovalApproved && round.Outcome != model.ApprovalRejected {
			continue
		}
		if k == len(moves) {
			return fmt.Sprintf("the request says %s by %s, which the effect's history does not record", round.Outcome, round.DecidedBy)
		}
		m := moves[k]
		k++
		if p := roundDisagreement(round, m); p != "" {
			return p
		}
	}
	if k < len(moves) {
		return fmt.Sprintf("the effect's history records %s by %s, which its request does not", moves[k].To, moves[k].Actor)
	}
	return ""
}

// roundDisagreement says in what a request's decided round and the
// history record of its decision differ, each side as it is: "" when they
// agree. A time is shown to the nanosecond, as it is compared.
func roundDisagreement(round model.ApprovalRound, m model.HistoryRecord) string {
	var differ []string
	field := func(what, request, history string) {
		if request != history {
			r, h := model.Apart(request, history)
			differ = append(differ, fmt.Sprintf("%s: the request says %s, the history %s", what, r, h))
		}
	}
	field("the decision", round.Outcome, m.To)
	field("who decided", round.DecidedBy, m.Actor)
	field("the reason", round.Decision, m.Reason)
	switch at := m.At.UTC().Format(time.RFC3339Nano); {
	case round.DecidedAt == nil:
		differ = append(differ, "when: the request says no time, the history "+at)
	case !round.DecidedAt.Equal(m.At):
		differ = append(differ, "when: the request says "+round.DecidedAt.UTC().Format(time.RFC3339Nano)+", the history "+at)
	}
	if len(differ) == 0 {
		return ""
	}
	return "the request and the effect's history disagree on a decision: " + strings.Join(differ, "; ")
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

// checkEffectTx is CheckEffect inside a write transaction, for effect e
// as read there.
func checkEffectTx(r *requests, e *model.Effect) error {
	d, err := detailOf(r.tx, *e, r.of)
	if err != nil {
		return err
	}
	return CheckEffect(d)
}

// sessionProblems is every check of one session against its own history,
// written once for verify and CheckSession: the chain and what it covers of
// the session (its meta), the state it leaves the session in, and the
// upstream it states.
func sessionProblems(s *model.Session, hist []model.HistoryRecord) (problems []model.Problem, read int) {
	add := func(kind, format string, args ...any) {
		problems = append(problems, model.Problem{Kind: kind, Session: s.ID, Detail: fmt.Sprintf(format, args...)})
	}
	chain, read := checkChain(hist, s.HistoryLen, s.HistoryHead, nil, s)
	for _, p := range chain {
		add("history", "%s", p)
	}
	if n := len(hist); n > 0 && hist[n-1].To != string(s.State) {
		says, recorded := model.Apart(string(s.State), hist[n-1].To)
		add("state", "state is %s but the last history record says %s", says, recorded)
	}
	up, err := statedUpstream(hist)
	switch {
	case err != nil:
		add("history", "%v", err)
	case up.stated && !slices.Equal(up.command, s.Upstream):
		says, recorded := listsApart(s.Upstream, up.command)
		add("history", "the session's upstream was altered: it says %s, its history records %s", says, recorded)
	case up.stated && up.dir != s.UpstreamDir:
		says, recorded := model.Apart(s.UpstreamDir, up.dir)
		add("history", "the session's upstream directory was altered: it says %s, its history records %s", says, recorded)
	}
	return problems, read
}

// listsApart is model.Apart for two lists of strings, element by element
// (one missing from a list reads as ""): each quoted, a long one cut.
func listsApart(a, b []string) (string, string) {
	qa, qb := make([]string, len(a)), make([]string, len(b))
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		x, y = model.Apart(x, y)
		if i < len(a) {
			qa[i] = x
		}
		if i < len(b) {
			qb[i] = y
		}
	}
	return "[" + strings.Join(qa, " ") + "]", "[" + strings.Join(qb, " ") + "]"
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

// undoAndApproval checks that effect e has the undo entry u and approval
// request a its tier calls for. (What they say is checked against the
// effect by effectProblems; the engine checks the request's index entry.)
func undoAndApproval(e *model.Effect, u *model.UndoEntry, a *model.Approval) []model.Problem {
	if e.ReplayOf != nil {
		return nil
	}
	var out []model.Problem
	if (e.Tier == sm.Compensable) != (u != nil) {
		out = append(out, model.Problem{Kind: "undo", Effect: e.ID, Detail: fmt.Sprintf("a %s effect with undo entry=%v", e.Tier, u != nil)})
	}
	if (e.Tier == sm.Irreversible) != (a != nil) {
		out = append(out, model.Problem{Kind: "approval", Effect: e.ID, Detail: fmt.Sprintf("a %s effect with approval request=%v", e.Tier, a != nil)})
	}
	return out
}
