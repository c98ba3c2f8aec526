package effectlog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// NewSession describes a session to create.
type NewSession struct {
	ID       string // empty: generated
	Meta     map[string]string
	Upstream []string
	// UpstreamDir is the directory the upstream runs in.
	UpstreamDir string
	// UpstreamEnv is what locates the upstream's state (model.StateEnv).
	UpstreamEnv model.StateEnv
	Actor       string
}

// CreateSession creates an active session. A taken id is ErrConflict.
func (s *Service) CreateSession(ctx context.Context, req NewSession) (model.Session, error) {
	if req.ID == "" {
		req.ID = model.NewSessionID(s.now())
	}
	if err := model.ValidSessionID(req.ID); err != nil {
		return model.Session{}, err
	}
	for k, v := range req.Meta {
		if err := model.ValidText("meta", k, v); err != nil {
			return model.Session{}, err
		}
	}
	if err := model.ValidActor(req.Actor); err != nil {
		return model.Session{}, err
	}
	if err := validStateEnv(req.UpstreamEnv); err != nil {
		return model.Session{}, err
	}
	var out model.Session
	err := s.update(ctx, func(tx storage.WriteTx) error {
		if _, err := tx.Session(req.ID); err == nil {
			return fmt.Errorf("%w: session %q already exists", model.ErrConflict, req.ID)
		} else if !errors.Is(err, model.ErrNotFound) {
			return err
		}
		var err error
		out, err = createSession(tx, req, s.now())
		return err
	})
	return out, err
}

func createSession(tx storage.WriteTx, req NewSession, now time.Time) (model.Session, error) {
	seq, err := tx.NextSessionSeq()
	if err != nil {
		return model.Session{}, err
	}
	if seq == 0 || seq > model.MaxID {
		return model.Session{}, errIDsRanOut("session sequence numbers", seq)
	}
	sess := model.Session{ID: req.ID, State: sm.SessionActive, Meta: req.Meta,
		CreatedAt: now, UpdatedAt: now, Counts: map[sm.State]int{}, Seq: seq}
	if sess.Meta == nil {
		sess.Meta = map[string]string{}
	}
	if err := appendSessionHistory(tx, &sess, model.HistoryRecord{To: string(sm.SessionActive),
		Trigger: "Session created", Actor: actorOr(req.Actor), At: now}); err != nil {
		return model.Session{}, err
	}
	if len(req.Upstream) > 0 {
		if err := recordUpstream(tx, &sess, req.Upstream, req.UpstreamDir, req.UpstreamEnv, req.Actor, now); err != nil {
			return model.Session{}, err
		}
	}
	return sess, tx.InsertSession(&sess)
}

// GetSession returns one session.
func (s *Service) GetSession(ctx context.Context, id string) (model.Session, error) {
	// A name no session can have is a mistake in the asking (exit 2), not
	// a session that is not there.
	if err := model.ValidSessionID(id); err != nil {
		return model.Session{}, err
	}
	var out model.Session
	err := s.view(ctx, func(tx storage.ReadTx) error {
		var err error
		out, err = tx.Session(id)
		return err
	})
	if err == nil && out.ID == "" {
		err = fmt.Errorf("%w: no session %q", model.ErrNotFound, id)
	}
	return out, err
}

// SessionFilter selects sessions, newest first.
type SessionFilter struct {
	State  sm.SessionState
	Since  time.Time
	Limit  int
	Cursor uint64 // Seq of the last session of the previous page
}

// ListSessions returns sessions newest first and the cursor of the next page
// (0 when there is none).
func (s *Service) ListSessions(ctx context.Context, f SessionFilter) ([]model.Session, uint64, error) {
	var out []model.Session
	var next uint64
	err := s.view(ctx, func(tx storage.ReadTx) error {
		return tx.Sessions(false, f.Cursor, func(seq uint64, id string) (bool, error) {
			sess, err := tx.Session(id)
			if errors.Is(err, model.ErrNotFound) {
				// Within one transaction only a damaged order of sessions
				// names a session the log does not hold.
				err = fmt.Errorf("%w: the order of sessions names session %q, which the log does not hold", model.ErrCorrupt, id)
			}
			if errors.Is(err, model.ErrCorrupt) {
				// Listed by its id, unless a state is asked for: its own
				// cannot be read.
				sess = model.Session{ID: id, Seq: seq, State: model.SessionDamaged, Damage: damageText(err)}
				if f.State != "" {
					return true, nil
				}
			} else if err != nil {
				return false, err
			}
			if !f.Since.IsZero() && sess.Damage == "" && sess.CreatedAt.Before(f.Since) {
				return false, nil
			}
			if f.State != "" && sess.State != f.State {
				return true, nil
			}
			if f.Limit > 0 && len(out) == f.Limit {
				next = out[len(out)-1].Seq
				return false, nil
			}
			out = append(out, sess)
			return true, nil
		})
	})
	return out, next, err
}

// SetSessionState moves a session through the session table (complete, fail,
// halt, compensating, compensated) and records who and why.
func (s *Service) SetSessionState(ctx context.Context, id string, to sm.SessionState, c model.Change) (model.Session, error) {
	if err := model.ValidSessionID(id); err != nil {
		return model.Session{}, err
	}
	if err := model.ValidChange(c); err != nil {
		return model.Session{}, err
	}
	var out model.Session
	err := s.update(ctx, func(tx storage.WriteTx) error {
		sess, err := tx.Session(id)
		if err != nil {
			return err
		}
		if sess.State == sm.SessionHalted && to == sm.SessionActive {
			if err := resumable(tx, &sess, c); err != nil {
				return err
			}
		}
		if err := awaitsAsItSays(sess, to); err != nil {
			return err
		}
		if _, verr := sm.ValidateSession(sess.State, to); verr == nil && to == sm.SessionCompleted {
			if err := noApprovedLeft(tx, sess); err != nil {
				return err
			}
		}
		if to == sm.SessionCompensating {
			if err := noCallRuns(tx, id, s.now()); err != nil {
				return err
			}
		}
		if err := setSessionState(newRequests(tx), &sess, to, c, s.now()); err != nil {
			return err
		}
		out = sess
		return tx.PutSession(&sess)
	})
	return out, err
}

// noCallRuns refuses an undo's start while a call of the session runs in a
// live process, in the transaction that starts it: a call that started
// after undo made its plan is not undone under (what it does may rest on
// the calls before it), and none starts in a session being undone.
func noCallRuns(tx storage.ReadTx, session string, now time.Time) error {
	var running error
	err := walkEffects(tx, EffectFilter{Session: session, State: sm.Executing}, func(e model.Effect) (bool, error) {
		running = model.CallStillRunning(e, now)
		return running == nil, nil
	})
	if err != nil {
		return err
	}
	return running
}

// noApprovedLeft refuses to complete a session with a call a person
// approved that has not run: completed, it would take no call, and the
// approval would stand for good with nothing done. The caller runs it, or
// fails the session.
func noApprovedLeft(tx storage.ReadTx, sess model.Session) error {
	if sess.Counts[sm.Approved] == 0 {
		return nil
	}
	var calls []string
	err := walkEffects(tx, EffectFilter{Session: sess.ID, State: sm.Approved}, func(e model.Effect) (bool, error) {
		calls = append(calls, fmt.Sprintf("%d (%s)", e.ID, e.Tool))
		return len(calls) < 3, nil
	})
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: session %s has %s approved and not run (effect %s): whoever made the call runs it (exec: the same step again; intercept: undolog start ID, the call, then commit or fail), or end the session with session fail",
		model.ErrConflict, sess.ID, textfmt.Count(sess.Counts[sm.Approved], "call"), strings.Join(calls, ", "))
}

// awaitsAsItSays refuses a move between active and awaiting_approval that
// its trigger would misstate: a session awaits approval while, and only
// while, a call of it waits for a person. Its history would otherwise say
// no call waits while one does, and the session's state would hide it.
func awaitsAsItSays(sess model.Session, to sm.SessionState) error {
	switch {
	case sess.State == sm.SessionAwaitingApproval && to == sm.SessionActive && sess.PendingApprovals > 0:
		return fmt.Errorf("%w: session %s has %s waiting for approval: it is active again by itself once they are decided (undolog approvals --session %s)",
			model.ErrConflict, sess.ID, textfmt.Count(sess.PendingApprovals, "call"), sess.ID)
	case sess.State == sm.SessionActive && to == sm.SessionAwaitingApproval && sess.PendingApprovals == 0:
		return fmt.Errorf("%w: session %s has no call waiting for approval: it awaits approval by itself when an irreversible call of it is intercepted",
			model.ErrConflict, sess.ID)
	}
	return nil
}

// SetUpstream records the MCP server command a proxy session runs behind, so
// that undo can start it again. The session's history states it (undo starts
// only the command its history covers); an upstream it states already
// writes nothing.
func (s *Service) SetUpstream(ctx context.Context, id string, upstream []string) (model.Session, error) {
	return s.SetUpstreamAt(ctx, id, upstream, "", nil)
}

// SetUpstreamAt is SetUpstream with the directory the upstream runs in
// (absolute; "" for none), which undo starts it in, and what locates its
// state (nil: nothing), which undo holds its own environment to.
func (s *Service) SetUpstreamAt(ctx context.Context, id string, upstream []string, dir string, env model.StateEnv) (model.Session, error) {
	if err := model.ValidText("upstream directory", dir); err != nil {
		return model.Session{}, err
	}
	if err := validStateEnv(env); err != nil {
		return model.Session{}, err
	}
	var out model.Session
	err := s.update(ctx, func(tx storage.WriteTx) error {
		sess, err := tx.Session(id)
		if err != nil {
			return err
		}
		out = sess
		hist, err := tx.SessionHistory(id)
		if err != nil {
			return err
		}
		if up, err := statedUpstream(hist); err == nil && up.stated && slices.Equal(up.command, upstream) && slices.Equal(sess.Upstream, upstream) &&
			up.dir == dir && sess.UpstreamDir == dir && sameStateEnv(up.env, env) {
			return storage.ErrNothingToWrite
		}
		if err := recordUpstream(tx, &sess, upstream, dir, env, "", s.now()); err != nil {
			return err
		}
		out = sess
		return tx.PutSession(&sess)
	})
	return out, err
}

// VerifySession reads a session and checks it against its history, in one
// transaction (see CheckSession): undo starts the upstream and moves the
// session only of one that passes.
func (s *Service) VerifySession(ctx context.Context, id string) (model.Session, error) {
	if err := model.ValidSessionID(id); err != nil {
		return model.Session{}, err
	}
	var out model.Session
	err := s.view(ctx, func(tx storage.ReadTx) error {
		sess, err := tx.Session(id)
		if err != nil {
			return err
		}
		hist, err := tx.SessionHistory(id)
		if err != nil {
			return err
		}
		out = sess
		if err := CheckSession(sess, hist); err != nil {
			return err
		}
		up, _ := statedUpstream(hist) // its error failed the check above
		out.UpstreamEnv = up.env
		out.UpstreamEnvMoved = stateEnvMoved(hist)
		return nil
	})
	return out, err
}

// validStateEnv refuses a state's environment that a record could not
// state as it is: a name that is no variable's, or text that is not UTF-8
// (JSON would change it).
func validStateEnv(env model.StateEnv) error {
	for name, value := range env {
		if err := model.ValidEnvName(name); err != nil {
			return err
		}
		if value != nil {
			if err := model.ValidText(name, *value); err != nil {
				return err
			}
		}
	}
	return nil
}

// sameStateEnv says whether a and b record the same variables, each set to
// the same value or unset in both (nil and empty alike: nothing recorded).
func sameStateEnv(a, b model.StateEnv) bool {
	return maps.EqualFunc(a, b, sameValue)
}

// resumable says whether halted session sess may be resumed (halted ->
// active) with change c: a person says why, and only a halt by a rejection
// is lifted. A session an undo halted (a compensation failed for good) is
// half undone: its undo is finished (undolog undo) or its entry resolved,
// not new calls made on top of it.
func resumable(tx storage.ReadTx, sess *model.Session, c model.Change) error {
	if strings.TrimSpace(c.Reason) == "" {
		return fmt.Errorf("%w: resuming halted session %q needs a reason", model.ErrInvalidInput, sess.ID)
	}
	hist, err := tx.SessionHistory(sess.ID)
	if err != nil {
		return err
	}
	for i := len(hist) - 1; i >= 0; i-- {
		r := hist[i]
		if r.To != string(sm.SessionHalted) || r.From == r.To {
			continue // a record that moved nothing (its upstream)
		}
		if r.Trigger == "Effect rejected" {
			return nil
		}
		return fmt.Errorf("%w: session %q was halted by %q, not by a rejection: finish its undo (undolog undo %s) or resolve what failed",
			model.ErrConflict, sess.ID, r.Trigger, sess.ID)
	}
	return nil
}

// errIDsRanOut is a log whose next id is past model.MaxID, which only an
// engine's counter set by hand makes: refused, so that nothing wraps around
// onto another effect's or session's number.
func errIDsRanOut(what string, next uint64) error {
	return fmt.Errorf("%w: the log's %s ran out (the next would be %d, past 2^53): its counter was set by hand", model.ErrCorrupt, what, next)
}
