package effectlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// GCReport says what GC dropped.
type GCReport struct {
	Sessions []string `json:"sessions"`
	Effects  int      `json:"effects"`
}

// GC drops the sessions in one of the given states whose last change is
// older than `before`, with everything recorded about them: effects, history,
// indexes, undo entries and approvals. Each session goes whole in one
// transaction (with a few others), so the log stays consistent (verify stays
// clean) whatever happens; a session that moved since GC chose it is kept
// and not reported.
func (s *Service) GC(ctx context.Context, before time.Time, states []sm.SessionState) (GCReport, error) {
	rep := GCReport{Sessions: []string{}}
	want := map[sm.SessionState]bool{}
	for _, st := range states {
		want[st] = true
	}
	var victims []string
	var sizes []int
	err := s.view(ctx, func(tx storage.ReadTx) error {
		victims, sizes = victims[:0], sizes[:0]
		var bad error
		err := tx.Records(func(sess model.Session) {
			if collectable(sess, want, before) {
				victims, sizes = append(victims, sess.ID), append(sizes, sess.Effects)
			}
		}, nil, func(p model.Problem) {
			if bad == nil {
				bad = fmt.Errorf("%w: %s", model.ErrCorrupt, p)
			}
		})
		return cmp.Or(err, bad)
	})
	if err != nil {
		return rep, err
	}
	// Sessions are dropped a few at a time, up to gcBatchEffects effects a
	// transaction (one session at least): each sync and each rewrite of an
	// index's pages serves several sessions, and no transaction grows
	// without bound.
	for len(victims) > 0 {
		n, total := 0, 0
		for n < len(victims) && (n == 0 || total+sizes[n] <= gcBatchEffects) {
			total += sizes[n]
			n++
		}
		batch := victims[:n]
		victims, sizes = victims[n:], sizes[n:]
		if gcBeforeDrop != nil {
			for _, id := range batch {
				gcBeforeDrop(id)
			}
		}
		var dropped []string
		effects := 0
		err := s.update(ctx, func(tx storage.WriteTx) error {
			dropped, effects = dropped[:0], 0
			for _, id := range batch {
				n, ok, err := dropSession(tx, id, func(sess model.Session) bool { return collectable(sess, want, before) })
				if err != nil {
					return err
				}
				if ok {
					dropped, effects = append(dropped, id), effects+n
				}
			}
			if len(dropped) == 0 {
				return storage.ErrNothingToWrite
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
		rep.Sessions = append(rep.Sessions, dropped...)
		rep.Effects += effects
	}
	return rep, nil
}

// gcBatchEffects is how many effects GC drops in one transaction at most
// (but a whole session, however large).
const gcBatchEffects = 10000

// gcBeforeDrop, set by tests, runs between GC's read and each drop.
var gcBeforeDrop func(session string)

// collectable says whether GC may drop sess: in a wanted state, unchanged
// since before, and with no effect executing or compensating (a call in
// flight or in doubt, whose record a person still needs).
func collectable(sess model.Session, want map[sm.SessionState]bool, before time.Time) bool {
	return want[sess.State] && sess.UpdatedAt.Before(before) &&
		sess.Counts[sm.Executing] == 0 && sess.Counts[sm.Compensating] == 0
}

// dropSession drops session id if it still is a victim. GC chose it in an
// earlier read; since then undo may have started on it (or another gc dropped
// it), so it is judged again in the transaction that drops it.
func dropSession(tx storage.WriteTx, id string, victim func(model.Session) bool) (n int, dropped bool, err error) {
	sess, err := tx.Session(id)
	if errors.Is(err, model.ErrNotFound) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, err
	}
	if !victim(sess) {
		return 0, false, nil
	}
	var ids []uint64
	if err := tx.Effects(storage.BySession, id, true, 0, func(eid uint64) (bool, error) {
		ids = append(ids, eid)
		return true, nil
	}); err != nil {
		return 0, false, err
	}
	for _, eid := range ids {
		e, err := tx.Effect(eid)
		if err != nil {
			return 0, false, err
		}
		if err := tx.DeleteEffect(&e); err != nil {
			return 0, false, err
		}
	}
	return len(ids), true, tx.DeleteSession(&sess)
}
