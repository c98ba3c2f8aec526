package boltfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/model"
)

// Compact rewrites the log into a new file without its free pages and renames
// it into place atomically. It holds the log's lock throughout, so it is
// refused (ErrBusy) while another process holds the log, and no write can be
// lost in between. It returns the file's size before and after.
func (s *Engine) Compact() (before, after int64, err error) {
	defer s.pause()() // no writer of this process runs meanwhile
	s.group.users.RLock()
	defer s.group.users.RUnlock()
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
			if j, err = s.heldJournal(tx, needOf(tx)); err != nil {
				return err
			}
			if _, err := j.replay(tx); err != nil {
				return err
			}
			if _, err = checkSchema(plainTx(tx), s.path); err != nil {
				return err
			}
			// The file holds every write now, and the journal is emptied
			// next: the log needs it no more (nor does the compacted copy).
			return tx.Bucket(bMeta).Delete(keyJournal)
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
	// The copy is a new file of this user's: one at its path that another
	// user made, and this one could not remove, would get every record.
	newFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		return os.OpenFile(name, flag|os.O_CREATE|os.O_EXCL, perm)
	}
	dst, err := bolt.Open(tmp, mode, &bolt.Options{Timeout: s.opts.LockTimeout, OpenFile: newFile})
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

// AcceptJournalLoss lets the log open without the journal it needs: one
// that is missing, or not the one of its last checkpoint, is set aside
// (renamed to <journal>.rejected-<Unix seconds>, never removed), and the
// file alone is the log from then on, as after a compaction. The writes
// made since the last checkpoint, which only that journal held, are lost:
// a person accepts that. Refused, with nothing done, when the journal is the
// log's. It returns where the journal was set aside ("" when it was missing).
// A kill at any point leaves the journal missing or set aside, which this
// accepts again.
func (s *Engine) AcceptJournalLoss() (aside string, err error) {
	defer s.pause()() // no writer of this process runs meanwhile
	s.group.users.RLock()
	defer s.group.users.RUnlock()
	if err := s.checkFile(); err != nil {
		return "", err
	}
	db, err := s.open(false, s.opts.LockTimeout)
	if err != nil {
		return "", err
	}
	err = s.guard(func() error {
		return db.Update(func(tx *bolt.Tx) error {
			path, _ := journalPath(s.path, tx)
			_, err := readJournal(path, baseOf(tx), needOf(tx), s.path)
			if err == nil {
				return fmt.Errorf("%w: the journal of %s is the log's own: there is no loss to accept", model.ErrInvalidInput, s.path)
			} else if !errors.As(err, new(journalNotTheLogs)) {
				return err
			}
			if fileExists(path) {
				aside = fmt.Sprintf("%s.rejected-%d", path, time.Now().Unix())
				if err := os.Rename(path, aside); err != nil {
					return fmt.Errorf("set journal %s aside: %w", path, bare(err))
				}
				syncDir(path)
			}
			return tx.Bucket(bMeta).Delete(keyJournal)
		})
	})
	closeDB(db, err)
	if err != nil {
		return "", err
	}
	return aside, nil
}

// compactBeforeRename, when set by a test, runs while Compact holds the log
// with its copy made, just before the copy takes the log's place.
var compactBeforeRename func()

// compactCopy is the path of the copy a compaction by process pid makes.
func (s *Engine) compactCopy(pid int) string {
	return filepath.Join(filepath.Dir(s.path), fmt.Sprintf(".%s.compact-%d", filepath.Base(s.path), pid))
}

// removeCompactCopies removes the copies that compactions of this log left.
func (s *Engine) removeCompactCopies() {
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
