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
		r.tx.walk()
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
// Each index is walked once, in its own order, against the effects' keys
// (no lookup of an index entry per effect).
func (r txReader) CheckIndexes(sessions map[string]*model.Session, effects *storage.EffectSet, add func(model.Problem)) error {
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
	effects  *storage.EffectSet
	add      func(model.Problem)
}

func (c *indexChecker) report(kind string, effect uint64, session, format string, args ...any) {
	c.add(model.Problem{Kind: kind, Effect: effect, Session: session, Detail: fmt.Sprintf(format, args...)})
}

// inSession says whether the set holds effect id, of session.
func (c *indexChecker) inSession(id uint64, session string) bool {
	pos, ok := c.effects.Pos(id)
	return ok && c.effects.Field(pos, "session") == session
}

// session is effect id's session ("" if the set lacks it).
func (c *indexChecker) session(id uint64) string {
	if pos, ok := c.effects.Pos(id); ok {
		return c.effects.Field(pos, "session")
	}
	return ""
}

func (c *indexChecker) has(id uint64) bool {
	_, ok := c.effects.Pos(id)
	return ok
}

func (c *indexChecker) sessionOrder() {
	b := c.tx.Bucket(bSessionsByTime)
	for _, sess := range c.sessions {
		switch got := b.Get(itob(sess.Seq)); {
		case got == nil:
			c.report("index", 0, sess.ID, "sessions_by_time entry %d is missing", sess.Seq)
		case string(got) != sess.ID:
			names, want := model.Apart(string(got), sess.ID)
			c.report("index", 0, sess.ID, "sessions_by_time entry %d names %s, not %s", sess.Seq, names, want)
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
	// History keys are by effect id, as the set is: one id's records are
	// looked up once.
	last, lastOK, looked := uint64(0), false, false
	c.tx.Bucket(bHistory).ForEach(func(k, _ []byte) error {
		c.tx.walk()
		if len(k) != 12 {
			c.report("history", 0, "", "history record %x belongs to no effect", k)
			return nil
		}
		if id := btoi(k[:8]); !looked || id != last {
			last, lastOK, looked = id, c.has(id), true
		}
		if !lastOK {
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
	// One walk of the index: each entry keyed by its effect's signature
	// (as 32 bytes, as signatureOwner finds it first) marks the effect as
	// its owner. Only an effect left unmarked is looked up, as
	// signatureOwner would: a call run again, or a damaged index.
	owns := make([]uint64, (c.effects.Len()+63)/64)
	c.tx.Bucket(bSignatures).ForEach(func(k, val []byte) error {
		c.tx.walk()
		if len(val) != 8 {
			c.report("index", 0, "", "signature index entry %.16s is malformed", signatureOfKey(k))
			return nil
		}
		pos, ok := c.effects.Pos(btoi(val))
		if !ok || !c.effects.SignatureIs(pos, k) || c.effects.Replay(pos) {
			c.report("index", btoi(val), "", "signature index entry %.16s is dangling", signatureOfKey(k))
		} else if len(k) == 32 { // its raw key (a hex one is looked up below)
			owns[pos/64] |= 1 << (pos % 64)
		}
		return nil
	})
	for pos := 0; pos < c.effects.Len(); pos++ {
		if c.effects.Replay(pos) || owns[pos/64]&(1<<(pos%64)) != 0 {
			continue
		}
		e := c.effects.Keys(pos)
		got := signatureOwnerKey(c.tx, c.effects.SignatureKey(pos), func() string { return e.CallSignature })
		if len(got) == 8 && btoi(got) == e.ID {
			continue
		}
		// A call run again after its answer reached the client has a later
		// effect, which owns the signature (effectlog checks the earlier
		// one was answered).
		var owner storage.EffectKeys
		found := false
		if len(got) == 8 {
			owner, found = c.effects.Get(btoi(got))
		}
		if !storage.LaterOwner(owner, found, e) {
			c.report("index", e.ID, "", "signature index does not point at the effect")
		}
	}
}

func (c *indexChecker) fields() {
	for _, f := range []struct {
		bucket []byte
		name   string
	}{{bBySession, "session"}, {bByState, "state"}, {bByTool, "tool"}, {bByTier, "tier"}} {
		// One walk of the index: each entry that names its effect's value
		// marks it; an effect left unmarked is one the index lacks.
		seen := make([]uint64, (c.effects.Len()+63)/64)
		var dangling []model.Problem
		c.tx.Bucket(f.bucket).ForEach(func(k, _ []byte) error {
			c.tx.walk()
			if len(k) < 9 {
				dangling = append(dangling, model.Problem{Kind: "index", Detail: fmt.Sprintf("%s index key %x is malformed", f.name, k)})
				return nil
			}
			id := btoi(k[len(k)-8:])
			if pos, ok := c.effects.Pos(id); ok && c.effects.Field(pos, f.name) == string(k[:len(k)-9]) {
				seen[pos/64] |= 1 << (pos % 64)
			} else {
				dangling = append(dangling, model.Problem{Kind: "index", Effect: id, Detail: fmt.Sprintf("%s index entry %q is dangling", f.name, k[:len(k)-9])})
			}
			return nil
		})
		c.effects.Each(func(pos int, e storage.EffectKeys) {
			if seen[pos/64]&(1<<(pos%64)) == 0 {
				c.report("index", e.ID, "", "%s index lacks the effect", f.name)
			}
		})
		for _, p := range dangling {
			c.add(p)
		}
	}
}

// undoAndApprovals checks the undo entries' keys, and the index of open
// requests against the requests.
func (c *indexChecker) undoAndApprovals() {
	open := c.tx.Bucket(bApprovalsOpen)
	// The requests there are, rather than a lookup per effect: most
	// effects have none.
	c.tx.Bucket(bApprovals).ForEach(func(k, _ []byte) error {
		if len(k) != 8 {
			return nil
		}
		id := btoi(k)
		if e, ok := c.effects.Get(id); !ok || e.Replay {
			return nil // an effect with no record: the rules report its request
		}
		a, err := getApproval(c.tx, id)
		if err != nil || a == nil {
			return nil // the rules report a missing or unreadable request
		}
		openValue := open.Get(itob(id))
		isOpen := openValue != nil
		if (a.Outcome == model.ApprovalPending) != isOpen {
			outcome, _ := model.Apart(a.Outcome, model.ApprovalPending) // a lookalike of pending reads apart
			c.report("index", id, "", "approval is %s but pending index entry=%v", outcome, isOpen)
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
		return nil
	})
	c.tx.Bucket(bUndo).ForEach(func(k, _ []byte) error {
		c.tx.walk()
		if len(k) < 9 {
			c.report("undo", 0, "", "undo key %x is malformed", k)
			return nil
		}
		id := btoi(k[len(k)-8:])
		if !c.inSession(id, string(k[:len(k)-9])) {
			c.report("undo", id, "", "undo entry belongs to no effect of session %q", k[:len(k)-9])
		}
		return nil
	})
	requests := c.tx.Bucket(bApprovals)
	open.ForEach(func(k, val []byte) error {
		switch {
		case len(k) != 8 || !c.has(btoi(k)) || !openFor(val, c.session(btoi(k))):
			c.report("index", btoi(k), "", "pending approval entry is dangling")
		case requests.Get(k) == nil:
			// It would count a request as waiting that was never made.
			c.report("index", btoi(k), "", "pending approval entry names no request")
		}
		return nil
	})
}
