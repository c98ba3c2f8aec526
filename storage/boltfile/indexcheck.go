package boltfile

import (
	"bytes"
	"fmt"

	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage"
	"github.com/undolog/undolog/storage/internal/record"
)

// Verify's engine half: the records as stored, and the file's indexes
// against them. bbolt's own tx.Check is not used: it walks pages in a
// goroutine of its own, where a damaged page panics beyond any recover. The
// walks below reach every page that holds a record, under the store's guard.

// Records calls session and effect with every record the log holds, and bad
// with every record it cannot read.
func (r txReader) Records(session func(model.Session), effect func(model.Effect), bad func(model.Problem)) error {
	if session == nil {
		session = func(model.Session) {}
	}
	err := r.tx.Bucket(bSessions).ForEach(func(k, val []byte) error {
		var sess model.Session
		if err := record.Decode(val, &sess); err != nil {
			bad(model.Problem{Kind: "record", Session: string(k), Detail: fmt.Sprintf("unreadable session record: %v", err)})
			return nil
		}
		session(sess)
		return nil
	})
	if err != nil || effect == nil {
		return err
	}
	return r.tx.Bucket(bEffects).ForEach(func(k, val []byte) error {
		var e model.Effect
		if err := record.Decode(val, &e); err != nil || len(k) != 8 || btoi(k) != e.ID {
			bad(model.Problem{Kind: "record", Detail: fmt.Sprintf("unreadable effect record %x", k)})
			return nil
		}
		effect(e)
		return nil
	})
}

// CheckIndexes checks every index entry against its record and every
// record against its index entries, and finds what belongs to no record.
func (r txReader) CheckIndexes(sessions map[string]*model.Session, effects map[uint64]*model.Effect, add func(model.Problem)) error {
	c := indexChecker{tx: r.tx, sessions: sessions, effects: effects, add: add}
	c.sessionOrder()
	c.orphanHistory()
	c.signatures()
	c.fields()
	c.undoAndApprovals()
	c.schema6()
	return nil
}

type indexChecker struct {
	tx       *readTx
	sessions map[string]*model.Session
	effects  map[uint64]*model.Effect
	add      func(model.Problem)
}

func (c *indexChecker) report(kind string, effect uint64, session, format string, args ...any) {
	c.add(model.Problem{Kind: kind, Effect: effect, Session: session, Detail: fmt.Sprintf(format, args...)})
}

func (c *indexChecker) sessionOrder() {
	b := c.tx.Bucket(bSessionsByTime)
	for _, sess := range c.sessions {
		if got := b.Get(itob(sess.Seq)); string(got) != sess.ID {
			c.report("index", 0, sess.ID, "sessions_by_time entry %d is missing or names %q", sess.Seq, got)
		}
	}
	b.ForEach(func(k, val []byte) error {
		if c.sessions[string(val)] == nil {
			c.report("index", 0, string(val), "sessions_by_time entry %x names a missing session", k)
		}
		return nil
	})
}

func (c *indexChecker) orphanHistory() {
	c.tx.Bucket(bHistory).ForEach(func(k, _ []byte) error {
		if len(k) != 12 || c.effects[btoi(k[:8])] == nil {
			c.report("history", 0, "", "history record %x belongs to no effect", k)
		}
		return nil
	})
	c.tx.Bucket(bSessionHistory).ForEach(func(k, _ []byte) error {
		i := bytes.IndexByte(k, 0)
		if i < 0 || c.sessions[string(k[:i])] == nil {
			c.report("history", 0, "", "session history record %q belongs to no session", k)
		}
		return nil
	})
}

func (c *indexChecker) signatures() {
	for id, e := range c.effects {
		if e.ReplayOf != nil {
			continue
		}
		// A call run again after its answer reached the client has a later
		// effect, which owns the signature (effectlog checks the earlier
		// one was answered).
		got := signatureOwner(c.tx, e.CallSignature)
		if got == nil || len(got) != 8 || btoi(got) != id && !storage.LaterOwner(c.effects[btoi(got)], e) {
			c.report("index", id, "", "signature index does not point at the effect")
		}
	}
	c.tx.Bucket(bSignatures).ForEach(func(k, val []byte) error {
		if len(val) != 8 {
			c.report("index", 0, "", "signature index entry %.16s is malformed", signatureOfKey(k))
			return nil
		}
		if e := c.effects[btoi(val)]; e == nil || e.CallSignature != signatureOfKey(k) || e.ReplayOf != nil {
			c.report("index", btoi(val), "", "signature index entry %.16s is dangling", signatureOfKey(k))
		}
		return nil
	})
}

func (c *indexChecker) fields() {
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
		b := c.tx.Bucket(f.bucket)
		for id, e := range c.effects {
			if b.Get(nameKey(f.of(e), id)) == nil {
				c.report("index", id, "", "%s index lacks the effect", f.name)
			}
		}
		b.ForEach(func(k, _ []byte) error {
			if len(k) < 9 {
				c.report("index", 0, "", "%s index key %x is malformed", f.name, k)
				return nil
			}
			id := btoi(k[len(k)-8:])
			if e := c.effects[id]; e == nil || f.of(e) != string(k[:len(k)-9]) {
				c.report("index", id, "", "%s index entry %q is dangling", f.name, k[:len(k)-9])
			}
			return nil
		})
	}
}

// undoAndApprovals checks the undo entries' keys, and the index of open
// requests against the requests.
func (c *indexChecker) undoAndApprovals() {
	open := c.tx.Bucket(bApprovalsOpen)
	for id, e := range c.effects {
		if e.ReplayOf != nil {
			continue
		}
		a, err := getApproval(c.tx, id)
		if err != nil || a == nil {
			continue // the rules report a missing or unreadable request
		}
		openValue := open.Get(itob(id))
		isOpen := openValue != nil
		if (a.Outcome == model.ApprovalPending) != isOpen {
			c.report("index", id, "", "approval is %s but pending index entry=%v", a.Outcome, isOpen)
		}
		if isOpen {
			var want int64
			if a.ExpiresAt != nil {
				want = a.ExpiresAt.UnixNano()
			}
			if _, expires, known := parsePending(openValue); known && expires != want {
				c.report("index", id, "", "pending index entry expires at %d, the request at %d", expires, want)
			}
		}
	}
	c.tx.Bucket(bUndo).ForEach(func(k, _ []byte) error {
		if len(k) < 9 {
			c.report("undo", 0, "", "undo key %x is malformed", k)
			return nil
		}
		id := btoi(k[len(k)-8:])
		if e := c.effects[id]; e == nil || e.Session != string(k[:len(k)-9]) {
			c.report("undo", id, "", "undo entry belongs to no effect of session %q", k[:len(k)-9])
		}
		return nil
	})
	open.ForEach(func(k, val []byte) error {
		if e := c.effects[btoi(k)]; len(k) != 8 || e == nil || !openFor(val, e.Session) {
			c.report("index", btoi(k), "", "pending approval entry is dangling")
		}
		return nil
	})
}
