package logstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// Compact rewrites the log into a new file without its free pages and renames
// it into place atomically. It holds the log's lock throughout, so it is
// refused (ErrBusy) while another process holds the log, and no write can be
// lost in between. It returns the file's size before and after.
func (s *Store) Compact() (before, after int64, err error) {
	defer s.pause()() // no writer of this process runs meanwhile
	if err := s.checkFile(); err != nil {
		return 0, 0, err
	}
	src, err := s.open(false, s.opts.LockTimeout)
	if err != nil {
		return 0, 0, err
	}
	var srcErr error
	defer func() { closeDB(src, srcErr) }()
	var j *journal
	if srcErr = s.guard(func() error {
		// The journal's records go into the copy: commit them first.
		return src.Update(func(tx *bolt.Tx) error {
			var err error
			if j, err = readJournal(s.journalPath(), baseOf(tx)); err != nil {
				return err
			}
			if _, err := j.replay(tx); err != nil {
				return err
			}
			_, err = checkSchema(tx, s.path)
			return err
		})
	}); srcErr != nil {
		return 0, 0, srcErr
	}
	// The compacted file numbers its transactions anew, so the journal's old
	// records must be gone for good before it takes the log's place.
	if srcErr = j.empty(true); srcErr != nil {
		return 0, 0, srcErr
	}
	info, err := os.Stat(s.path)
	if err != nil {
		return 0, 0, err
	}
	before = info.Size()
	// A copy left by a compaction killed on the way is of no use to anyone:
	// whoever made it no longer holds the log's lock, which this one does.
	s.removeCompactCopies()
	tmp := s.compactCopy(os.Getpid())
	mode := info.Mode().Perm()
	dst, err := bolt.Open(tmp, mode, &bolt.Options{Timeout: s.opts.LockTimeout})
	if err != nil {
		return 0, 0, fmt.Errorf("compact %s: %w", s.path, err)
	}
	os.Chmod(tmp, mode) // the umask may have taken bits away
	dst.AllocSize = 0   // grow the new file to exactly what it holds, not in 16 MiB steps
	err = s.guard(func() error { return compactInto(dst, src) })
	srcErr = err
	if err == nil {
		err = dst.Sync()
	}
	if compactBeforeRename != nil {
		compactBeforeRename()
	}
	if errors.As(err, new(damagedPage)) {
		closeDB(dst, err)
	} else if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return 0, 0, fmt.Errorf("compact %s: %w", s.path, err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		os.Remove(tmp)
		return 0, 0, fmt.Errorf("compact %s: %w", s.path, err)
	}
	if d, err := os.Open(filepath.Dir(s.path)); err == nil {
		d.Sync()
		d.Close()
	}
	info, err = os.Stat(s.path)
	if err != nil {
		return 0, 0, err
	}
	return before, info.Size(), nil
}

// compactBeforeRename, when set by a test, runs while Compact holds the log
// with its copy made, just before the copy takes the log's place.
var compactBeforeRename func()

// compactCopy is the path of the copy a compaction by process pid makes.
func (s *Store) compactCopy(pid int) string {
	return filepath.Join(filepath.Dir(s.path), fmt.Sprintf(".%s.compact-%d", filepath.Base(s.path), pid))
}

// removeCompactCopies removes the copies that compactions of this log left.
func (s *Store) removeCompactCopies() {
	dir := filepath.Dir(s.path)
	entries, _ := os.ReadDir(dir)
	prefix := "." + filepath.Base(s.path) + ".compact-"
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// compactInto copies every bucket of src into dst in key order, filling pages
// (bolt.Compact leaves them half full: keys put in order split at the
// default fill), and commits every 32 MiB so that memory stays bounded.
func compactInto(dst, src *bolt.DB) error {
	tx, err := dst.Begin(true)
	if err != nil {
		return err
	}
	defer func() { tx.Rollback() }() // after a commit, a no-op
	size := 0
	err = src.View(func(stx *bolt.Tx) error {
		return stx.ForEach(func(name []byte, sb *bolt.Bucket) error {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
			c := sb.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if v == nil {
					return fmt.Errorf("%w: bucket %s holds a nested bucket %x", model.ErrCorrupt, name, k)
				}
				b := tx.Bucket(name)
				b.FillPercent = 1.0
				if bytes.Equal(name, bMeta) && bytes.Equal(k, keyLogID) {
					// The copy numbers its transactions anew: under a new log
					// id, so that no journal record written on the old file (a
					// backup restored beside the journal, say) names one of its
					// states.
					v = newLogID()
				}
				if err := b.Put(k, v); err != nil {
					return err
				}
				if size += len(k) + len(v); size >= 32<<20 {
					if err := tx.Commit(); err != nil {
						return err
					}
					if tx, err = dst.Begin(true); err != nil {
						return err
					}
					size = 0
				}
			}
			return tx.Bucket(name).SetSequence(sb.Sequence())
		})
	})
	if err != nil {
		return err
	}
	return tx.Commit()
}

// GCReport says what GC dropped.
type GCReport struct {
	Sessions []string `json:"sessions"`
	Effects  int      `json:"effects"`
}

// GC drops the sessions in one of the given states whose last change is
// older than `before`, with everything recorded about them: effects, history,
// indexes, undo entries and approvals. Each session goes in one transaction,
// so the log stays consistent (verify stays clean) whatever happens; a
// session that moved since GC chose it is kept and not reported.
func (s *Store) GC(ctx context.Context, before time.Time, states []sm.SessionState) (GCReport, error) {
	rep := GCReport{Sessions: []string{}}
	want := map[sm.SessionState]bool{}
	for _, st := range states {
		want[st] = true
	}
	var victims []string
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bSessions).ForEach(func(k, v []byte) error {
			var sess model.Session
			if ok, err := getRecord(tx.Bucket(bSessions), k, &sess); err != nil || !ok {
				return err
			}
			if collectable(sess, want, before) {
				victims = append(victims, sess.ID)
			}
			return nil
		})
	})
	if err != nil {
		return rep, err
	}
	for _, id := range victims {
		if gcBeforeDrop != nil {
			gcBeforeDrop(id)
		}
		n, dropped := 0, false
		err := s.update(func(tx *writeTx) error {
			var err error
			n, dropped, err = dropSession(tx, id, func(sess model.Session) bool { return collectable(sess, want, before) })
			if err == nil && !dropped {
				return errNothingToWrite
			}
			return err
		})
		if err != nil {
			return rep, err
		}
		if !dropped {
			continue
		}
		rep.Sessions = append(rep.Sessions, id)
		rep.Effects += n
	}
	return rep, nil
}

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
func dropSession(tx *writeTx, id string, victim func(model.Session) bool) (n int, dropped bool, err error) {
	sess, err := getSession(tx.Tx, id)
	if errors.Is(err, model.ErrNotFound) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, err
	}
	if !victim(sess) {
		return 0, false, nil
	}
	var ids []uint64
	if err := scan(tx.Bucket(bBySession), namePrefix(id), true, 0, func(eid uint64) (bool, error) {
		ids = append(ids, eid)
		return true, nil
	}); err != nil {
		return 0, false, err
	}
	for _, eid := range ids {
		e, err := getEffect(tx.Tx, eid)
		if err != nil {
			return 0, false, err
		}
		for seq := uint32(1); seq <= e.HistoryLen; seq++ {
			if err := tx.delete(bHistory, historyKey(eid, seq)); err != nil {
				return 0, false, err
			}
		}
		if e.ReplayOf == nil {
			for _, k := range [][]byte{signatureKey(e.CallSignature), []byte(e.CallSignature)} {
				if err := tx.delete(bSignatures, k); err != nil {
					return 0, false, err
				}
			}
		}
		for _, k := range []struct {
			b   []byte
			key []byte
		}{
			{bBySession, nameKey(id, eid)}, {bByState, nameKey(string(e.State), eid)}, {bByTool, nameKey(e.Tool, eid)},
			{bByTier, nameKey(string(e.Tier), eid)}, {bUndo, nameKey(id, eid)}, {bApprovals, itob(eid)},
			{bApprovalsOpen, itob(eid)}, {bEffects, itob(eid)},
		} {
			if err := tx.delete(k.b, k.key); err != nil {
				return 0, false, err
			}
		}
	}
	for seq := uint32(1); seq <= sess.HistoryLen; seq++ {
		if err := tx.delete(bSessionHistory, sessionHistoryKey(id, seq)); err != nil {
			return 0, false, err
		}
	}
	if err := tx.delete(bSessionsByTime, itob(sess.Seq)); err != nil {
		return 0, false, err
	}
	return len(ids), true, tx.delete(bSessions, []byte(id))
}
