package effectlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// InterceptRequest registers one tool call.
type InterceptRequest struct {
	Session string
	Tool    string
	Tier    sm.Tier
	Args    json.RawMessage
	Key     string
	// Compensation is stored with a compensable effect before anything runs;
	// nil means a manual compensation.
	Compensation *model.Compensation
	// ApprovalTimeout bounds an irreversible call's wait; zero: no expiry.
	ApprovalTimeout time.Duration
	// CreateSession creates the session if it does not exist yet.
	CreateSession bool
	// NoNewEffect resolves a repeated call as usual, but where the call
	// would make a new effect it writes nothing and says
	// model.OutcomeUnregistered: a caller whose compensation costs work
	// (a capture call) looks the call up first and does that work only
	// for a call that is to run anew, then intercepts it again. (Intercept
	// only: in InterceptMany such a call refuses the batch.)
	NoNewEffect bool
	// Start moves a call that may run now (new or retried, and approved if
	// irreversible) to executing in the same transaction, owned by Owner: a
	// whole lifecycle is then two write transactions. Check the returned
	// effect's state to see whether it started.
	Start bool
	Owner *model.Owner
	// Redact lists globs over dotted field paths (*.password, *token*) whose
	// values are replaced before the args, and later the result, reach the
	// log. The signature is computed first, so a repeat is still replayed.
	Redact []string
	Actor  string
	Reason string
	// RunAgainAnswered is the proxy's replay rule: a repeat of a committed
	// call whose answer reached its client (see Answered) is a new call,
	// a new effect that runs; only a retry (the answer never reached the
	// client) is answered from the log. False (exec, intercept, a policy's
	// replay: always): a repeat is the same call for good.
	RunAgainAnswered bool
}

// InterceptResult says what happened to the call.
type InterceptResult struct {
	Outcome   model.Outcome `json:"outcome"`
	Signature string        `json:"call_signature"`
	// Effect is the new effect, the replay record (with the cached result), or
	// the owner effect for retry, in_progress and rejected. Zero for safe calls.
	Effect model.Effect `json:"effect"`
}

// prepared is a validated request with its canonical args and signature.
type prepared struct {
	req  InterceptRequest
	args []byte
	sig  string
}

func prepare(req InterceptRequest) (prepared, error) {
	if !req.Tier.Valid() {
		_, err := sm.ParseTier(string(req.Tier))
		return prepared{}, fmt.Errorf("%w: %v", model.ErrInvalidInput, err)
	}
	if err := model.ValidSessionID(req.Session); err != nil {
		return prepared{}, err
	}
	if err := model.ValidToolName(req.Tool); err != nil {
		return prepared{}, err
	}
	if err := model.ValidText("key", req.Key); err != nil {
		return prepared{}, err
	}
	if err := model.ValidChange(model.Change{Actor: req.Actor, Reason: req.Reason}); err != nil {
		return prepared{}, err
	}
	if err := model.ValidCompensation(req.Compensation, req.Tier); err != nil {
		return prepared{}, err
	}
	args, err := model.CanonicalArgs(req.Args)
	if err != nil {
		return prepared{}, err
	}
	p := prepared{req: req, args: args, sig: model.Signature(req.Session, req.Tool, args, req.Key)}
	if req.Tier == sm.Safe {
		return p, nil
	}
	if err := model.ValidRedactions(req.Redact); err != nil {
		return prepared{}, err
	}
	if p.args, err = model.Redact(args, req.Redact); err != nil {
		return prepared{}, err
	}
	if req.ApprovalTimeout < 0 {
		return prepared{}, fmt.Errorf("%w: approval timeout must not be negative", model.ErrInvalidInput)
	}
	return p, nil
}

// Intercept registers a call before it runs. In one transaction it either
// writes a new pending effect with its history record, signature index entry,
// undo-stack entry (compensable) or approval request (irreversible) and the
// session update; or resolves a repeated call against the owner of its
// signature (replay, retry, in progress, rejected). Safe calls write nothing.
func (s *Service) Intercept(ctx context.Context, req InterceptRequest) (InterceptResult, error) {
	p, err := prepare(req)
	if err != nil {
		return InterceptResult{}, err
	}
	if req.Tier == sm.Safe {
		return InterceptResult{Outcome: model.OutcomeSafe, Signature: p.sig}, nil
	}
	var res InterceptResult
	err = s.update(ctx, func(tx storage.WriteTx) error {
		var err error
		res, err = s.interceptTx(tx, p)
		return err
	})
	if errors.Is(err, errUnregistered) {
		// Undone whole, an expiry found on the way too: the intercept that
		// follows records it.
		return InterceptResult{Outcome: model.OutcomeUnregistered, Signature: p.sig}, nil
	}
	return res, err
}

// errUnregistered ends the transaction of a NoNewEffect intercept whose
// call would make a new effect: nothing is written.
var errUnregistered = errors.New("a new effect, not made (NoNewEffect)")

// InterceptMany registers many calls in one transaction, in order, as
// Intercept would one by one: one fsync for the lot. It is all or nothing: a
// refused call refuses the batch, and nothing is written.
func (s *Service) InterceptMany(ctx context.Context, reqs []InterceptRequest) ([]InterceptResult, error) {
	ps := make([]prepared, len(reqs))
	for i, req := range reqs {
		p, err := prepare(req)
		if err != nil {
			return nil, fmt.Errorf("call %d: %w", i+1, err)
		}
		ps[i] = p
	}
	out := make([]InterceptResult, len(reqs))
	err := s.update(ctx, func(tx storage.WriteTx) error {
		for i, p := range ps {
			if p.req.Tier == sm.Safe {
				out[i] = InterceptResult{Outcome: model.OutcomeSafe, Signature: p.sig}
				continue
			}
			res, err := s.interceptTx(tx, p)
			if kept, ok := storage.Kept(err); ok {
				return fmt.Errorf("call %d: %w", i+1, kept)
			}
			switch {
			case err != nil && err != storage.ErrNothingToWrite:
				return fmt.Errorf("call %d: %w", i+1, err)
			}
			out[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// interceptTx is Intercept's transaction.
func (s *Service) interceptTx(tx storage.WriteTx, p prepared) (InterceptResult, error) {
	req, args, sig := p.req, p.args, p.sig
	res := InterceptResult{Signature: sig}
	now := s.now()
	if l, ok := tx.(storage.SignatureLookahead); ok {
		l.LookAhead(sig)
	}
	sess, err := tx.Session(req.Session)
	if err != nil {
		if req.NoNewEffect && errors.Is(err, model.ErrNotFound) {
			res.Outcome = model.OutcomeUnregistered
			return res, storage.ErrNothingToWrite
		}
		// Only a session that is not there is made: one that cannot be
		// read (damaged, or the engine failed) is the error it is.
		if !req.CreateSession || !errors.Is(err, model.ErrNotFound) {
			return res, err
		}
		if sess, err = createSession(tx, NewSession{ID: req.Session, Actor: req.Actor}, now); err != nil {
			return res, err
		}
	}
	r := newRequests(tx)
	expired, err := expireApprovals(r, &sess, 0, now)
	if err != nil {
		return res, err
	}
	// A refusal writes nothing, unless an expiry was found on the way.
	refuse := func(err error) error {
		if !expired {
			return err
		}
		return refuseKeepingSession(tx, &sess, err)
	}
	if owner, ok, err := tx.SignatureOwner(sig); err != nil {
		return res, err
	} else if ok {
		if sess.PendingApprovals > 0 {
			// The call's own request, if its record says its time is up:
			// the index the sweep goes by can be moved (an agent's SQL), and
			// the same call must then ask again, not wait for good.
			n, err := closeExpired(r, &sess, []uint64{owner}, now)
			if err != nil {
				return res, err
			}
			expired = expired || n > 0
		}
		err := s.repeat(r, &sess, owner, req, args, &res, now, refuse)
		if err == storage.ErrNothingToWrite && expired {
			return res, tx.PutSession(&sess)
		}
		return res, err
	}
	err = newCall(r, &sess, req, args, &res, 0, now, refuse)
	return res, err
}

// newCall writes the new effect of a call: the signature's first, or
// (previous not 0) the one that runs again after effect previous was
// answered, which then owns the signature.
func newCall(r *requests, sess *model.Session, req InterceptRequest, args []byte, res *InterceptResult, previous uint64,
	now time.Time, refuse func(error) error) error {
	tx := r.tx
	sig := res.Signature
	if !sess.State.AcceptsEffects() {
		return refuse(notAccepting(sess))
	}
	if req.Tier == sm.Compensable {
		// The effect holds its compensation from its first record on, which
		// covers it.
		comp := model.Compensation{Kind: model.CompensationManual}
		if req.Compensation != nil {
			comp = *req.Compensation
		}
		req.Compensation = &comp
	}
	e, err := newEffect(tx, sess, req, args, sig, nil, now)
	if err != nil {
		return err
	}
	if previous == 0 {
		err = tx.SetSignatureOwner(sig, e.ID)
	} else {
		err = tx.MoveSignatureOwner(sig, previous, e.ID)
	}
	if err != nil {
		return err
	}
	switch req.Tier {
	case sm.Compensable:
		u := model.UndoEntry{EffectID: e.ID, Session: sess.ID, Tool: e.Tool, State: sm.EntryPending,
			Compensation: *e.Compensation, CreatedAt: now, UpdatedAt: now}
		if err := tx.PutUndo(&u); err != nil {
			return err
		}
	case sm.Irreversible:
		a := model.Approval{EffectID: e.ID, Session: sess.ID, Tool: e.Tool, Args: e.Args, Reason: req.Reason,
			ApprovalRound: model.ApprovalRound{RequestedAt: now, Outcome: model.ApprovalPending}}
		if req.ApprovalTimeout > 0 {
			exp := now.Add(req.ApprovalTimeout)
			if exp.After(lastTime) {
				return fmt.Errorf("%w: an approval timeout of %s expires after %s, the last time a log holds",
					model.ErrInvalidInput, req.ApprovalTimeout, lastTime.Format(time.DateOnly))
			}
			a.ExpiresAt = &exp
		}
		if err := tx.PutApproval(&a); err != nil {
			return err
		}
		if err := tx.OpenRequest(e.ID, sess.ID, a.ExpiresAt); err != nil {
			return err
		}
		sess.PendingApprovals++
		if sess.State == sm.SessionActive {
			if err := setSessionState(r, sess, sm.SessionAwaitingApproval, model.Change{Actor: req.Actor}, now); err != nil {
				return err
			}
		}
	}
	if req.Start && e.Tier == sm.Compensable {
		// The effect and its state index are written once, as executing; its
		// history holds both records, pending and then executing.
		if err := makeMove(r, sess, &e, true, sm.Executing, model.Change{Actor: req.Actor, Owner: req.Owner}, now); err != nil {
			return err
		}
	} else if err := tx.PutEffect(&e, ""); err != nil {
		return err
	}
	res.Outcome, res.Effect = model.OutcomeNew, e
	return tx.PutSession(sess)
}

// lastTime is the latest time a log holds: times are kept as nanoseconds
// since 1970 in 64 bits (in 2262).
var lastTime = time.Unix(0, math.MaxInt64).UTC()

func notAccepting(sess *model.Session) error {
	next := ""
	switch sess.State {
	case sm.SessionHalted:
		next = ": a person resumes it (session resume) or undoes it"
	case sm.SessionCompensated:
		next = ": it was undone; go on in a new session, under another name"
	}
	return fmt.Errorf("%w: session %q is %s and accepts no new effects%s", model.ErrSessionNotActive, sess.ID, sess.State, next)
}

// refuseKeepingSession saves the session (expired approvals may have
// changed it) and then refuses with err, keeping what was written: an error
// alone would undo it.
func refuseKeepingSession(tx storage.WriteTx, sess *model.Session, err error) error {
	if perr := tx.PutSession(sess); perr != nil {
		return perr
	}
	return storage.KeepWrites(err)
}

// newEffect writes a pending effect (a replay of effect replayOf, if not
// nil) with its first history record and the session, tool and tier index
// entries; the caller adds the rest and puts it.
func newEffect(tx storage.WriteTx, sess *model.Session, req InterceptRequest, args []byte, sig string, replayOf *uint64, now time.Time) (model.Effect, error) {
	if req.NoNewEffect && replayOf == nil {
		return model.Effect{}, errUnregistered
	}
	id, err := tx.NextEffectID()
	if err != nil {
		return model.Effect{}, err
	}
	if id == 0 || id > model.MaxID {
		return model.Effect{}, errIDsRanOut("effect ids", id)
	}
	e := model.Effect{ID: id, Session: sess.ID, Tool: req.Tool, Tier: req.Tier, State: sm.Pending,
		CallSignature: sig, Args: args, Key: req.Key, Redact: req.Redact, ReplayOf: replayOf,
		Compensation: req.Compensation, CreatedAt: now, UpdatedAt: now}
	if err := appendEffectHistory(tx, &e, model.HistoryRecord{Kind: model.KindEffect, To: string(sm.Pending),
		Trigger: "Intercept", Actor: actorOr(req.Actor), Reason: req.Reason, At: now}); err != nil {
		return model.Effect{}, err
	}
	countMove(sess, "", sm.Pending)
	sess.Effects++
	sess.UpdatedAt = now
	return e, nil
}

// undoesAlike tells whether two compensations undo a call alike: the
// capture (the call's pre-image, taken anew each time) left out.
func undoesAlike(a, b model.Compensation) bool {
	a.Capture, b.Capture = nil, nil
	return sameCompensation(&a, &b)
}

func describeCompensation(c model.Compensation) string {
	switch {
	case c.Kind == model.CompensationCommand:
		return fmt.Sprintf("command %q", c.Argv)
	case c.Kind == model.CompensationMCP:
		return "mcp tool " + c.Tool
	}
	return c.Kind
}

// everStarted reports whether effect e was ever executing: its history
// holds a move to executing (a record of its undo entry does not count).
func everStarted(tx storage.ReadTx, e *model.Effect) (bool, error) {
	if e.HistoryLen <= 1 {
		return false, nil
	}
	hist, err := tx.EffectHistory(e.ID, e.Session)
	if err != nil {
		return false, err
	}
	for _, r := range hist {
		if r.Kind == model.KindEffect && r.To == string(sm.Executing) {
			return true, nil
		}
	}
	return false, nil
}

// repeat resolves a call whose signature already has an owner effect.
func (s *Service) repeat(r *requests, sess *model.Session, ownerID uint64, req InterceptRequest, args []byte, res *InterceptResult,
	now time.Time, refuse func(error) error) error {
	tx := r.tx
	owner, err := tx.Effect(ownerID)
	if err != nil {
		return err
	}
	if owner.CallSignature != res.Signature || owner.Session != sess.ID {
		// The index names an effect of another call: replaying its result,
		// or going by its tier, would answer this call with another's.
		return fmt.Errorf("%w: the signature index names effect %d for this call, which is another call; run undolog verify",
			model.ErrCorrupt, owner.ID)
	}
	if req.RunAgainAnswered && owner.State == sm.Committed {
		// The client got the answer: this is no retry but the call made
		// again (write A, write B, write A), which runs as a new effect.
		if answered, err := answeredTx(tx, &owner); err != nil {
			return err
		} else if answered {
			req.Reason = againReason(fmt.Sprintf("run again: the answer of effect %d reached the client", owner.ID), req.Reason)
			return newCall(r, sess, req, args, res, owner.ID, now, refuse)
		}
	}
	if owner.Tier != req.Tier {
		return refuse(fmt.Errorf("%w: the same call was registered %s (effect %d); as %s it would be another call: give it a --key, or the same tier",
			model.ErrConflict, owner.Tier, owner.ID, req.Tier))
	}
	if req.Compensation != nil && owner.Compensation != nil && !undoesAlike(*req.Compensation, *owner.Compensation) {
		// Whoever registered the call first chose how it is undone: a
		// caller that says otherwise would have its call undone by another's
		// compensation (or replayed from another's run) without a word.
		return refuse(fmt.Errorf("%w: the same call was registered with another compensation (effect %d: %s); give it the same one, or a --key",
			model.ErrConflict, owner.ID, describeCompensation(*owner.Compensation)))
	}
	res.Effect = owner
	if owner.State == sm.Rejected {
		if !sess.State.AcceptsEffects() {
			res.Outcome = model.OutcomeRejected // the answer stands while the rejection holds the session
			return storage.ErrNothingToWrite
		}
		// A rejection halts its session (or finds it ended), so a session
		// that takes calls again was resumed by a person who settled what
		// the rejection was about: the call made again is a new call that
		// asks again. The rejected effect stays rejected (terminal).
		req.Reason = againReason(fmt.Sprintf("asked again: effect %d was rejected and the session resumed", owner.ID), req.Reason)
		return newCall(r, sess, req, args, res, owner.ID, now, refuse)
	}
	if !sess.State.AcceptsEffects() {
		return refuse(notAccepting(sess))
	}
	switch owner.State {
	case sm.Committed:
		// A cached result is served only from an effect that passes its check.
		if err := checkEffectTx(r, &owner); err != nil {
			return err
		}
		ownerID := owner.ID
		rep, err := newEffect(tx, sess, InterceptRequest{Tool: owner.Tool, Tier: owner.Tier, Key: req.Key,
			Actor: req.Actor, Reason: req.Reason}, args, owner.CallSignature, &ownerID, now)
		if err != nil {
			return err
		}
		rep.Result = owner.Result
		if err := moveEffect(r, sess, &rep, true, sm.Replayed, model.HistoryRecord{Actor: actorOr(req.Actor),
			Reason: fmt.Sprintf("replay of effect %d", owner.ID), At: now}, nil); err != nil {
			return err
		}
		owner.ReplayCount++
		owner.LastReplayedAt = &now
		if err := tx.PutEffect(&owner, owner.State); err != nil {
			return err
		}
		res.Outcome, res.Effect = model.OutcomeReplayed, rep
	case sm.Pending:
		res.Outcome = model.OutcomeRetry
		if started, err := everStarted(tx, &owner); err != nil {
			return err
		} else if !started {
			// Registered and never started: nothing ran, so it is not a retry.
			res.Outcome = model.OutcomePending
		}
		if owner.Tier == sm.Irreversible {
			// It awaits a decision: each execution needs its own. A log
			// written before kept the approval of a failed run: ask again.
			res.Outcome = model.OutcomeInProgress
			a, err := r.of(owner.ID)
			if err != nil {
				return err
			}
			// A request closed when the session stopped accepting calls
			// (it was halted, then resumed) is asked again as well.
			if a == nil || a.Outcome == model.ApprovalPending {
				return storage.ErrNothingToWrite
			}
			if err := reopenApproval(r, sess, owner.ID, model.Change{Actor: req.Actor}, req.ApprovalTimeout, now); err != nil {
				return err
			}
			return tx.PutSession(sess)
		}
		if req.Start {
			if err := makeMove(r, sess, &owner, false, sm.Executing, model.Change{Actor: req.Actor, Owner: req.Owner}, now); err != nil {
				return err
			}
			res.Effect = owner
			return tx.PutSession(sess)
		}
	case sm.Executing, sm.Approved:
		res.Outcome = model.OutcomeInProgress
	default:
		return refuse(fmt.Errorf("%w: effect %d for this call is %s; give the call a new --key to run it again",
			model.ErrConflict, owner.ID, owner.State))
	}
	if res.Outcome == model.OutcomeReplayed {
		return tx.PutSession(sess)
	}
	return storage.ErrNothingToWrite // retry and in progress only read
}
