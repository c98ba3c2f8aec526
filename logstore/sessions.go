package logstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// NewSession describes a session to create.
type NewSession struct {
	ID       string // empty: generated
	Meta     map[string]string
	Upstream []string
	Actor    string
}

// CreateSession creates an active session. A taken id is ErrConflict.
func (s *Store) CreateSession(ctx context.Context, req NewSession) (model.Session, error) {
	if req.ID == "" {
		req.ID = model.NewSessionID(s.now())
	}
	if err := model.ValidSessionID(req.ID); err != nil {
		return model.Session{}, err
	}
	var out model.Session
	err := s.update(func(tx *writeTx) error {
		if tx.Bucket(bSessions).Get([]byte(req.ID)) != nil {
			return fmt.Errorf("%w: session %q already exists", model.ErrConflict, req.ID)
		}
		var err error
		out, err = createSession(tx, req, s.now())
		return err
	})
	return out, err
}

func createSession(tx *writeTx, req NewSession, now time.Time) (model.Session, error) {
	seq, err := tx.nextSequence(bSessionsByTime)
	if err != nil {
		return model.Session{}, err
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
		if err := recordUpstream(tx, &sess, req.Upstream, req.Actor, now); err != nil {
			return model.Session{}, err
		}
	}
	if err := tx.put(bSessionsByTime, itob(seq), []byte(sess.ID)); err != nil {
		return model.Session{}, err
	}
	return sess, putSession(tx, &sess)
}

// GetSession returns one session.
func (s *Store) GetSession(ctx context.Context, id string) (model.Session, error) {
	var out model.Session
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		out, err = getSession(tx, id)
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
func (s *Store) ListSessions(ctx context.Context, f SessionFilter) ([]model.Session, uint64, error) {
	var out []model.Session
	var next uint64
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bSessionsByTime).Cursor()
		var k, v []byte
		if f.Cursor == 0 {
			k, v = c.Last()
		} else {
			c.Seek(itob(f.Cursor))
			k, v = c.Prev()
		}
		for ; k != nil; k, v = c.Prev() {
			sess, err := getSession(tx, string(v))
			if err != nil {
				return err
			}
			if !f.Since.IsZero() && sess.CreatedAt.Before(f.Since) {
				break
			}
			if f.State != "" && sess.State != f.State {
				continue
			}
			if f.Limit > 0 && len(out) == f.Limit {
				next = out[len(out)-1].Seq
				break
			}
			out = append(out, sess)
		}
		return nil
	})
	return out, next, err
}

// SetSessionState moves a session through the session table (complete, fail,
// halt, compensating, compensated) and records who and why.
func (s *Store) SetSessionState(ctx context.Context, id string, to sm.SessionState, c model.Change) (model.Session, error) {
	var out model.Session
	err := s.update(func(tx *writeTx) error {
		sess, err := getSession(tx.Tx, id)
		if err != nil {
			return err
		}
		if err := setSessionState(tx, &sess, to, c, s.now()); err != nil {
			return err
		}
		out = sess
		return putSession(tx, &sess)
	})
	return out, err
}

// SetUpstream records the MCP server command a proxy session runs behind, so
// that undo can start it again. The session's history states it (undo starts
// only the command its history covers); an upstream it states already
// writes nothing.
func (s *Store) SetUpstream(ctx context.Context, id string, upstream []string) (model.Session, error) {
	var out model.Session
	err := s.update(func(tx *writeTx) error {
		sess, err := getSession(tx.Tx, id)
		if err != nil {
			return err
		}
		out = sess
		hist, err := sessionHistory(tx.Tx, id)
		if err != nil {
			return err
		}
		if stated, ok, err := statedUpstream(hist); err == nil && ok && slices.Equal(stated, upstream) && slices.Equal(sess.Upstream, upstream) {
			return errNothingToWrite
		}
		if err := recordUpstream(tx, &sess, upstream, "", s.now()); err != nil {
			return err
		}
		out = sess
		return putSession(tx, &sess)
	})
	return out, err
}

// VerifySession reads a session and checks it against its history, in one
// transaction (see CheckSession): undo starts the upstream and moves the
// session only of one that passes.
func (s *Store) VerifySession(ctx context.Context, id string) (model.Session, error) {
	var out model.Session
	err := s.view(func(tx *bolt.Tx) error {
		sess, err := getSession(tx, id)
		if err != nil {
			return err
		}
		hist, err := sessionHistory(tx, id)
		if err != nil {
			return err
		}
		out = sess
		return CheckSession(sess, hist)
	})
	return out, err
}
