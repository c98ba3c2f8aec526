package boltfile

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage"
	"github.com/undolog/undolog/storage/internal/record"
)

// Indexes of schema 6, which a log written before lacks until its first
// write builds them (upgradeSchema); reads of such a log walk as before.
var (
	// bUndoByState: the undo entries by state, nameKey(state, effect id),
	// for list --undo without a session.
	bUndoByState = []byte("idx_undo_state")
	// bOpenBySession: the open approval requests by session,
	// nameKey(session, effect id) with bApprovalsOpen's value, so that a
	// session's expiry and approvals --session read only its own.
	bOpenBySession = []byte("approvals_pending_session")

	schema6Buckets = [][]byte{bUndoByState, bOpenBySession}
)

// buildSchema6 creates the indexes of schema 6 and fills them from the
// records. It writes bbolt directly: the upgrade that calls it is committed
// at once, not journaled.
func buildSchema6(tx *bolt.Tx) error {
	for _, name := range schema6Buckets {
		if tx.Bucket(name) != nil {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
	}
	byState, err := tx.CreateBucket(bUndoByState)
	if err != nil {
		return err
	}
	bySession, err := tx.CreateBucket(bOpenBySession)
	if err != nil {
		return err
	}
	byState.FillPercent = 0.95
	err = tx.Bucket(bUndo).ForEach(func(k, v []byte) error {
		if len(k) < 9 {
			return nil // verify reports it
		}
		var u model.UndoEntry
		if err := decodeRecord(v, &u, bUndo, k); err != nil {
			return err
		}
		return byState.Put(nameKey(string(u.State), btoi(k[len(k)-8:])), nil)
	})
	if err != nil {
		return err
	}
	return tx.Bucket(bApprovalsOpen).ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return nil
		}
		session, _, _ := parsePending(v)
		if session == "" {
			// An entry of a log written before says no session: its request does.
			a, err := getApproval(plainTx(tx), btoi(k))
			if err != nil || a == nil {
				return err
			}
			session = a.Session
		}
		return bySession.Put(nameKey(session, btoi(k)), v)
	})
}

func decodeRecord(data []byte, v any, bucket, key []byte) error {
	if err := record.Decode(data, v); err != nil {
		return fmt.Errorf("%w: record %s/%x: %v", model.ErrCorrupt, bucket, key, err)
	}
	return nil
}

// storedUndoState is the state of the undo entry stored under key in bUndo
// ("" when there is none).
func storedUndoState(tx *readTx, key []byte) (string, error) {
	v := tx.Bucket(bUndo).Get(key)
	if v == nil {
		return "", nil
	}
	var u model.UndoEntry
	if err := decodeRecord(v, &u, bUndo, key); err != nil {
		return "", err
	}
	return string(u.State), nil
}

// putUndoState moves effect id's entry in bUndoByState from the state it
// was stored in (was, "" for none) to state.
func putUndoState(w *writeTx, id uint64, was, state string) error {
	if w.Bucket(bUndoByState) == nil || was == state {
		return nil
	}
	if was != "" {
		if err := w.delete(bUndoByState, nameKey(was, id)); err != nil {
			return err
		}
	}
	return w.put(bUndoByState, nameKey(state, id), nil)
}

// openSession is the session an open request stored under id is indexed
// by in bOpenBySession ("" for none).
func openSession(tx *readTx, id uint64) (string, error) {
	v := tx.Bucket(bApprovalsOpen).Get(itob(id))
	if v == nil {
		return "", nil
	}
	session, _, _ := parsePending(v)
	if session == "" {
		a, err := getApproval(tx, id)
		if err != nil || a == nil {
			return "", err
		}
		session = a.Session
	}
	return session, nil
}

// schema6 checks the indexes of schema 6 against what they mirror: each
// undo entry has one entry by state (its state is not decoded here: the
// entries are many, and the rules read the entry a listing finds), and
// each open request one entry under its session, with the same value.
func (c *indexChecker) schema6() {
	byState, bySession := c.tx.Bucket(bUndoByState), c.tx.Bucket(bOpenBySession)
	if byState == nil || bySession == nil {
		return // a log written before schema 6
	}
	undo := c.tx.Bucket(bUndo)
	// How many times each effect is in the index, by its place in the set
	// of effects read: a byte each, where a map of a million entries would
	// cost verify tens of MiB. (Not by id up to the bucket's sequence: a
	// damaged file's may be anything, an allocation of 700 GB.)
	entries := make([]uint8, c.effects.Len())
	byState.ForEach(func(k, _ []byte) error {
		c.tx.walk()
		if len(k) < 9 {
			c.report("index", 0, "", "undo state index key %x is malformed", k)
			return nil
		}
		id := btoi(k[len(k)-8:])
		if !c.has(id) || undo.Get(nameKey(c.session(id), id)) == nil {
			c.report("index", id, "", "undo state index entry %q is dangling", k[:len(k)-9])
		}
		if pos, ok := c.effects.Pos(id); ok && entries[pos] < 255 {
			entries[pos]++
		}
		return nil
	})
	undo.ForEach(func(k, _ []byte) error {
		c.tx.walk()
		if len(k) < 9 {
			return nil // undoAndApprovals reports it
		}
		id := btoi(k[len(k)-8:])
		if n := entryCount(c.effects, entries, id); n != 1 {
			c.report("index", id, "", "undo state index holds the entry %d times", n)
		}
		return nil
	})
	open := c.tx.Bucket(bApprovalsOpen)
	n := 0
	bySession.ForEach(func(k, v []byte) error {
		n++
		if len(k) < 9 {
			c.report("index", 0, "", "open requests index key %x is malformed", k)
			return nil
		}
		id := btoi(k[len(k)-8:])
		if w := open.Get(itob(id)); w == nil || string(w) != string(v) {
			c.report("index", id, "", "open requests index entry of session %q is dangling", k[:len(k)-9])
		} else if !c.inSession(id, string(k[:len(k)-9])) {
			entry, effect := model.Apart(string(k[:len(k)-9]), c.session(id))
			c.report("index", id, "", "open requests index entry is under session %s, the effect's %s", entry, effect)
		}
		return nil
	})
	total := 0
	open.ForEach(func(_, _ []byte) error { total++; return nil })
	if total != n {
		c.report("index", 0, "", "%d open requests, %d in the index by session", total, n)
	}
}

func entryCount(effects *storage.EffectSet, counts []uint8, id uint64) uint8 {
	if pos, ok := effects.Pos(id); ok {
		return counts[pos]
	}
	return 0
}
