package effectlog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// GetEffect returns an effect with its full history, undo entry and approval.
// An effect of which a record does not read is model.ErrCorrupt, with what
// was read of it: its Damage says what failed (see damaged).
func (s *Service) GetEffect(ctx context.Context, id uint64) (model.EffectDetail, error) {
	d, _, err := s.getEffect(ctx, id, false)
	return d, err
}

// GetEffectAndPosition is GetEffect with the change feed's newest position,
// read in the same snapshot: a change the read did not see comes after it.
// A wait for the effect's decision looks with it, and then waits for a
// change after the position, in one read where it took two.
func (s *Service) GetEffectAndPosition(ctx context.Context, id uint64) (model.EffectDetail, uint64, error) {
	return s.getEffect(ctx, id, true)
}

func (s *Service) getEffect(ctx context.Context, id uint64, withPosition bool) (model.EffectDetail, uint64, error) {
	var out model.EffectDetail
	var position uint64
	found := false
	err := s.view(ctx, func(tx storage.ReadTx) error {
		if withPosition {
			var err error
			if position, err = tx.LastChange(); err != nil {
				return err
			}
		}
		d, err := effectDetail(tx, id)
		out, found = d, err == nil
		return err
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: no effect %d", model.ErrNotFound, id)
	}
	if errors.Is(err, model.ErrCorrupt) {
		if out.Effect.ID != id {
			out = model.EffectDetail{Effect: damaged(id, err)}
		}
		out.Effect.Damage = damageText(err)
	}
	return out, position, err
}

// damaged is what a read shows of effect id, whose record could not be read
// (err): the one damaged row is shown by its id, and harms no other.
func damaged(id uint64, err error) model.Effect {
	return model.Effect{ID: id, State: model.StateDamaged, Damage: damageText(err)}
}

// damageText is what a damaged record says of err: its message with every
// line of it joined on one, without the sentinel's words for a damaged log
// (a damage says it is one).
func damageText(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	return strings.TrimPrefix(msg, model.ErrCorrupt.Error()+": ")
}

// effectDetail reads effect id with its history, undo entry and approval.
func effectDetail(tx storage.ReadTx, id uint64) (model.EffectDetail, error) {
	e, err := tx.Effect(id)
	if err != nil {
		return model.EffectDetail{}, err
	}
	return detailOf(tx, e, tx.Approval)
}

// detailOf reads what belongs to effect e, as read in tx, its approval
// request with approval.
func detailOf(tx storage.ReadTx, e model.Effect, approval func(id uint64) (*model.Approval, error)) (model.EffectDetail, error) {
	d := model.EffectDetail{Effect: e}
	var err error
	if d.History, err = tx.EffectHistory(e.ID, e.Session); err != nil {
		return d, err
	}
	if d.Undo, err = tx.Undo(e.Session, e.ID, &e); err != nil {
		return d, err
	}
	d.Approval, err = approval(e.ID)
	return d, err
}

// SessionHistory returns the session's own transitions.
func (s *Service) SessionHistory(ctx context.Context, id string) ([]model.HistoryRecord, error) {
	var out []model.HistoryRecord
	err := s.view(ctx, func(tx storage.ReadTx) error {
		var err error
		out, err = tx.SessionHistory(id)
		return err
	})
	return out, err
}

// EffectFilter selects effects. The engine joins the indexes of the
// filters given (session, tool, state, tier; with Undo, the session's undo
// entries); Since bounds the ids walked; no filter walks the effects
// themselves. Results are newest first unless Ascending.
type EffectFilter struct {
	Session string
	State   sm.State
	Tier    sm.Tier
	Tool    string
	Undo    sm.EntryState // only effects whose undo entry is in this state
	// Failed keeps only pending effects a run of which failed (their
	// error says why): with State pending, the calls that may run again.
	Failed    bool
	Since     time.Time
	Limit     int
	Cursor    uint64 // id of the last effect of the previous page
	Ascending bool
}

// matches are the index conditions of f, for the engine to join.
func (f EffectFilter) matches() []storage.Match {
	var m []storage.Match
	switch {
	case f.Session != "" && f.Undo != "":
		// A session's undo entries are of its effects: the one index says both.
		m = append(m, storage.Match{Index: storage.WithUndo, Name: f.Session})
	case f.Session != "":
		m = append(m, storage.Match{Index: storage.BySession, Name: f.Session})
	}
	if f.Tool != "" {
		m = append(m, storage.Match{Index: storage.ByTool, Name: f.Tool})
	}
	if f.State != "" {
		m = append(m, storage.Match{Index: storage.ByState, Name: string(f.State)})
	}
	if f.Tier != "" {
		m = append(m, storage.Match{Index: storage.ByTier, Name: string(f.Tier)})
	}
	if f.Undo != "" {
		// It may give more: walkEffects reads each entry.
		m = append(m, storage.Match{Index: storage.ByUndoState, Name: string(f.Undo)})
	}
	return m
}

// ListEffects returns the effects matching f and the cursor of the next page
// (0 when there is none).
func (s *Service) ListEffects(ctx context.Context, f EffectFilter) ([]model.Effect, uint64, error) {
	var out []model.Effect
	var next uint64
	err := s.view(ctx, func(tx storage.ReadTx) error {
		out, next = out[:0], 0
		return walkEffects(tx, f, func(e model.Effect) (bool, error) {
			if f.Limit > 0 && len(out) == f.Limit {
				next = out[len(out)-1].ID
				return false, nil
			}
			out = append(out, e)
			return true, nil
		})
	})
	return out, next, err
}

// walkEffects calls fn with each effect matching f (Limit and all), in f's
// order from f's cursor, until fn returns false.
func walkEffects(tx storage.ReadTx, f EffectFilter, fn func(model.Effect) (bool, error)) error {
	cursor, floor := f.Cursor, uint64(0)
	if !f.Since.IsZero() {
		var err error
		if floor, err = sinceFloor(tx, f.Since); err != nil {
			return err
		}
		if f.Ascending && floor > 0 {
			cursor = max(cursor, floor-1)
		}
	}
	return tx.EffectsWhere(f.matches(), f.Ascending, cursor, func(id uint64) (bool, error) {
		if !f.Ascending && id < floor {
			return false, nil // everything further back is older
		}
		e, err := tx.Effect(id)
		if errors.Is(err, model.ErrNotFound) {
			// Within one transaction only a damaged index names an effect
			// the log does not hold: shown where it is, like a damaged row.
			err = fmt.Errorf("%w: an index names effect %d, which the log does not hold", model.ErrCorrupt, id)
		}
		if errors.Is(err, model.ErrCorrupt) {
			// Its indexes say it matches; what it says cannot be read.
			return fn(damaged(id, err))
		} else if err != nil {
			return false, err
		}
		// The engine's join answers for the indexed fields (verify checks
		// its indexes agree with the records); the rest are checked here.
		if !f.Since.IsZero() && e.CreatedAt.Before(f.Since) {
			return true, nil
		}
		if f.Failed && (e.State != sm.Pending || e.Error == "") {
			return true, nil
		}
		if f.Undo != "" {
			u, err := tx.Undo(e.Session, e.ID, &e)
			if errors.Is(err, model.ErrCorrupt) {
				e.Damage = damageText(err)
				return fn(e)
			} else if err != nil {
				return false, err
			}
			if u == nil || u.State != f.Undo {
				return true, nil
			}
		}
		return fn(e)
	})
}

// sinceFloor is the least id that may have been created at or after since:
// ids grow with time, so a binary search over them reads a few dozen
// effects where a walk from either end would read every older or newer one.
func sinceFloor(tx storage.ReadTx, since time.Time) (uint64, error) {
	// next is the first id at or after x, and whether it is older than since.
	next := func(x uint64) (id uint64, older bool, err error) {
		err = tx.Effects(storage.AllEffects, "", true, x-1, func(got uint64) (bool, error) {
			e, err := tx.Effect(got)
			if errors.Is(err, model.ErrCorrupt) {
				// Its time is unknown: the floor stays at or below it,
				// and the walk lists it as damaged.
				id, older = got, false
				return false, nil
			}
			id, older = got, err == nil && e.CreatedAt.Before(since)
			return false, err
		})
		return id, older, err
	}
	var last uint64
	err := tx.Effects(storage.AllEffects, "", false, 0, func(id uint64) (bool, error) {
		last = id
		return false, nil
	})
	if err != nil || last == 0 {
		return 0, err
	}
	lo, hi := uint64(1), last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		id, older, err := next(mid)
		if err != nil {
			return 0, err
		}
		if older {
			lo = id + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// PendingApproval is a request awaiting a decision, with its effect.
type PendingApproval struct {
	model.Approval
	Effect model.Effect `json:"effect"`
}

// PendingApprovals returns up to limit (0: all) approval requests awaiting a
// decision, oldest first, and how many are waiting in all. Only the requests
// returned are read with their effects; the rest are only counted. Expired
// requests are not waiting: they are left out (and closed as timed out by
// the next write that touches their session).
func (s *Service) PendingApprovals(ctx context.Context, session string, limit int) ([]PendingApproval, int, error) {
	var out []PendingApproval
	var waiting int
	now := s.now()
	err := s.view(ctx, func(tx storage.ReadTx) error {
		out, waiting = out[:0], 0
		return tx.OpenRequests(session, func(r storage.OpenRequest) (bool, error) {
			full := limit > 0 && len(out) == limit
			if full && r.Known && r.Session != "" {
				if !expiredAt(r.Expires, now) {
					waiting++ // counted from the index alone
				}
				return true, nil
			}
			a, err := tx.Approval(r.EffectID)
			if errors.Is(err, model.ErrCorrupt) {
				// Shown as waiting, by its id, when the index puts it in
				// the sessions asked for: it may be.
				if session != "" && r.Session != session {
					return true, nil
				}
				if waiting++; !full {
					out = append(out, PendingApproval{Approval: model.Approval{EffectID: r.EffectID, Session: r.Session,
						ApprovalRound: model.ApprovalRound{Outcome: string(model.StateDamaged)}}, Effect: damaged(r.EffectID, err)})
				}
				return true, nil
			} else if err != nil {
				return false, err
			}
			if a == nil || (session != "" && a.Session != session) || (a.ExpiresAt != nil && expiredAt(*a.ExpiresAt, now)) {
				return true, nil
			}
			waiting++
			if full {
				return true, nil
			}
			e, err := tx.Effect(r.EffectID)
			if errors.Is(err, model.ErrCorrupt) {
				e = damaged(r.EffectID, err)
			} else if err != nil {
				return false, err
			}
			out = append(out, PendingApproval{Approval: *a, Effect: e})
			return true, nil
		})
	})
	return out, waiting, err
}

// UndoStack returns up to limit (0: all) of the session's undo entries, last
// in first out, and how many entries the session has.
func (s *Service) UndoStack(ctx context.Context, session string, limit int) ([]model.UndoEntry, int, error) {
	var out []model.UndoEntry
	var total int
	err := s.view(ctx, func(tx storage.ReadTx) error {
		out, total = out[:0], 0
		return tx.Effects(storage.WithUndo, session, false, 0, func(id uint64) (bool, error) {
			total++
			if limit > 0 && len(out) == limit {
				return true, nil // count the rest without reading them
			}
			u, err := tx.Undo(session, id, nil)
			if errors.Is(err, model.ErrCorrupt) {
				out = append(out, damagedEntry(session, id))
				return true, nil
			} else if err != nil || u == nil {
				return false, err
			}
			out = append(out, *u)
			return true, nil
		})
	})
	return out, total, err
}

// ChangeRecord is one history record in the order the log recorded it.
type ChangeRecord struct {
	Position uint64              `json:"position"`
	Record   model.HistoryRecord `json:"record"`
}

// Changes returns up to limit history records (effects and sessions) recorded
// after position `after`, oldest first, and the position of the newest one.
// Followers poll it.
func (s *Service) Changes(ctx context.Context, after uint64, limit int) ([]ChangeRecord, uint64, error) {
	var out []ChangeRecord
	last := after
	if err := s.syncFeed(ctx); err != nil {
		return nil, after, err
	}
	err := s.view(ctx, func(tx storage.ReadTx) error {
		out, last = out[:0], after
		full := false
		err := tx.Changes(after, func(pos uint64, r model.HistoryRecord) (bool, error) {
			if limit > 0 && len(out) == limit {
				full = true
				return false, nil
			}
			last = pos
			out = append(out, ChangeRecord{Position: pos, Record: r})
			return true, nil
		})
		if err != nil || full {
			return err
		}
		// Read to the end: past changes gc dropped too, so that a follower
		// waiting for a change after last waits for a new one.
		top, err := tx.LastChange()
		last = max(last, top)
		return err
	})
	return out, last, err
}

// syncFeed waits, on an engine that gives change positions after the
// commit, for those of this process's writes.
func (s *Service) syncFeed(ctx context.Context) error {
	if f, ok := s.engine.(storage.FeedSyncer); ok {
		return f.SyncFeed(ctx)
	}
	return nil
}

// LastChange is the position of the newest history record: a cheap way for a
// viewer to tell whether anything changed since it last looked.
func (s *Service) LastChange(ctx context.Context) (uint64, error) {
	var last uint64
	if err := s.syncFeed(ctx); err != nil {
		return 0, err
	}
	err := s.view(ctx, func(tx storage.ReadTx) error {
		var err error
		last, err = tx.LastChange()
		return err
	})
	return last, err
}

// ExportRecord is one line of an export: what kind of record, and the record.
type ExportRecord struct {
	Type   string `json:"type"` // meta, session, session_history, effect, history, undo, approval, end
	Record any    `json:"record"`
}

// ExportMeta is an export's first record: the version of its records.
type ExportMeta struct {
	SchemaVersion uint64 `json:"schema_version"`
}

// ExportSchemaVersion is the version of the records this build exports and
// the newest it imports. Exports stated their engine's schema version here
// until the records' own was kept (the file's 6, PostgreSQL's 10, in
// records this build reads): it starts at the higher of those, so that
// every earlier export is one it takes, and changes only when the records do.
const ExportSchemaVersion = 10

// ExportEnd is an export's last record: what it holds, so that one cut
// short, or with a session taken out, is told from a whole one.
type ExportEnd = ImportReport

// Export calls fn with every record of the log (or of one session), in an
// order that rebuilds it: meta, then per session its record and history, its
// effects each followed by their history, undo entry and approval.
//
// Each session is read whole in one read transaction, into memory, and given
// to fn after that transaction ends: the export holds one consistent view of
// each session (a session written meanwhile is exported as it was when
// read), and a slow consumer (a pipe to less) holds no lock while it waits.
//
// An export leaves nothing out and passes over no damage: a whole-log export
// first checks, in one transaction, the log's indexes against its records
// (verify's engine half), and each session's effects are held to the
// session's counts. A record that does not read, an index entry missing or
// dangling, fails the export (model.ErrCorrupt) naming it.
func (s *Service) Export(ctx context.Context, session string, fn func(ExportRecord) error) error {
	var end ExportEnd
	write := func(recs []ExportRecord) error {
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
			end.count(r.Type)
		}
		return nil
	}
	err := s.view(ctx, func(tx storage.ReadTx) error {
		if session != "" {
			_, err := tx.Session(session)
			return err
		}
		return exportable(tx)
	})
	if err != nil {
		return err
	}
	if err := write([]ExportRecord{{Type: "meta", Record: &ExportMeta{SchemaVersion: ExportSchemaVersion}}}); err != nil {
		return err
	}
	ended := func() error { return fn(ExportRecord{Type: "end", Record: &end}) }
	if session != "" {
		if err := s.exportSession(ctx, session, write); err != nil {
			return err
		}
		return ended()
	}
	for seq := uint64(0); ; {
		var ids []string
		err := s.view(ctx, func(tx storage.ReadTx) error {
			ids = ids[:0]
			return tx.Sessions(true, seq, func(at uint64, id string) (bool, error) {
				if len(ids) == exportSessionsPage {
					return false, nil
				}
				ids, seq = append(ids, id), at
				return true, nil
			})
		})
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return ended()
		}
		for _, id := range ids {
			if err := s.exportSession(ctx, id, write); err != nil {
				return err
			}
		}
		if seq == math.MaxUint64 {
			return ended() // nothing comes after it (and seq+1 would start over)
		}
	}
}

// exportSessionsPage bounds how many session ids an export lists in one
// transaction.
const exportSessionsPage = 256

// exportable checks that an export of the whole log would hold every
// record the log holds: each record reads, and the indexes the export walks
// (and the others) agree with the records. It fails with model.ErrCorrupt
// naming the first problems found.
//
// It counts first, keeping nothing: the effects the sessions in the
// session index say they hold against the effect records, and each open
// request against its request (exportSession holds each session's index
// to its counts and reads each record it names). Only where those
// disagree does it read every record, as verify does, to name what.
func exportable(tx storage.ReadTx) error {
	if agree, err := countsAgree(tx); err != nil || agree {
		return err
	}
	return indexProblems(tx)
}

// countsAgree says whether the effects of the sessions the session index
// names add up to the effect records, and every open request names a
// request waiting for a decision.
func countsAgree(tx storage.ReadTx) (bool, error) {
	var said, held uint64
	agree := true
	err := tx.Sessions(true, 0, func(_ uint64, id string) (bool, error) {
		sess, err := tx.Session(id)
		if errors.Is(err, model.ErrNotFound) || errors.Is(err, model.ErrCorrupt) {
			agree = false
			return false, nil
		} else if err != nil {
			return false, err
		}
		said += uint64(sess.Effects)
		return true, nil
	})
	if err != nil || !agree {
		return false, err
	}
	if err := tx.Effects(storage.AllEffects, "", true, 0, func(uint64) (bool, error) { held++; return true, nil }); err != nil {
		return false, err
	}
	if said != held {
		return false, nil
	}
	err = tx.OpenRequests("", func(r storage.OpenRequest) (bool, error) {
		a, err := tx.Approval(r.EffectID)
		if errors.Is(err, model.ErrNotFound) || errors.Is(err, model.ErrCorrupt) || err == nil && (a == nil || a.Outcome != model.ApprovalPending) {
			agree = false
			return false, nil
		}
		return err == nil, err
	})
	return agree, err
}

// indexProblems reads every record and checks the indexes against them
// (verify's engine half), and fails naming the first problems found.
func indexProblems(tx storage.ReadTx) error {
	sessions := map[string]*model.Session{}
	effects := storage.NewEffectSet()
	var problems []model.Problem
	add := func(p model.Problem) { problems = append(problems, p) }
	err := tx.Records(func(sess model.Session) { sessions[sess.ID] = &sess }, func(e model.Effect) { effects.Add(&e) }, add)
	if err == nil {
		err = tx.CheckIndexes(sessions, effects, add)
	}
	if err != nil {
		return err
	}
	if len(problems) == 0 {
		return nil
	}
	const named = 3
	var say []string
	for _, p := range problems[:min(len(problems), named)] {
		say = append(say, p.String())
	}
	if len(problems) > named {
		say = append(say, fmt.Sprintf("and %d more", len(problems)-named))
	}
	return fmt.Errorf("%w: the log is damaged, and an export of it would leave records out: %s; run undolog verify",
		model.ErrCorrupt, strings.Join(say, "; "))
}

// exportSession reads session id's records in one transaction and gives
// them to write once it has ended. A session dropped (gc) since it was
// listed is left out. The effects its index gives are held to what the
// session's record counts: an index entry missing or dangling fails the
// export rather than leaving an effect out.
func (s *Service) exportSession(ctx context.Context, id string, write func([]ExportRecord) error) error {
	// An interrupt ends an export between two sessions: a view on a file
	// log does not look at ctx.
	if err := ctx.Err(); err != nil {
		return err
	}
	var recs []ExportRecord
	err := s.view(ctx, func(tx storage.ReadTx) error {
		recs = recs[:0]
		sess, err := tx.Session(id)
		if errors.Is(err, model.ErrNotFound) {
			return nil // dropped since it was listed
		} else if err != nil {
			return err
		}
		recs = append(recs, ExportRecord{Type: "session", Record: sess})
		hist, err := tx.SessionHistory(id)
		if err != nil {
			return fmt.Errorf("session %s: %w", id, err)
		}
		for _, r := range hist {
			recs = append(recs, ExportRecord{Type: "session_history", Record: r})
		}
		counts, waiting := map[sm.State]int{}, 0
		var damaged []string // every damaged effect of the session is named, not only the first
		err = tx.Effects(storage.BySession, id, true, 0, func(eid uint64) (bool, error) {
			d, err := effectDetail(tx, eid)
			switch {
			case errors.Is(err, model.ErrNotFound):
				return false, fmt.Errorf("%w: session %s's index names effect %d, which the log does not hold; run undolog verify", model.ErrCorrupt, id, eid)
			case errors.Is(err, model.ErrCorrupt):
				damaged = append(damaged, fmt.Sprintf("effect %d: %v", eid, err))
				return true, nil
			case err != nil:
				return false, fmt.Errorf("effect %d of session %s: %w", eid, id, err)
			case d.Effect.Session != id:
				return false, fmt.Errorf("%w: session %s's index names effect %d, which is session %s's; run undolog verify", model.ErrCorrupt, id, eid, d.Effect.Session)
			}
			counts[d.Effect.State]++
			if d.Approval != nil && d.Approval.Outcome == model.ApprovalPending {
				waiting++
			}
			recs = appendEffect(recs, d)
			return true, nil
		})
		if err != nil {
			return err
		}
		if len(damaged) > 0 {
			if len(damaged) > 3 {
				damaged = append(damaged[:3], fmt.Sprintf("and %d more", len(damaged)-3))
			}
			return fmt.Errorf("%w: session %s: %s; run undolog verify", model.ErrCorrupt, id, strings.Join(damaged, "; "))
		}
		if problems := countProblems(&sess, counts, waiting); len(problems) > 0 {
			return fmt.Errorf("%w: session %s %s: its index leaves effects out, or its record was changed; run undolog verify",
				model.ErrCorrupt, id, strings.Join(problems, "; "))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return write(recs)
}

// appendEffect appends effect d's records: the effect, its history, undo
// entry and approval.
func appendEffect(recs []ExportRecord, d model.EffectDetail) []ExportRecord {
	recs = append(recs, ExportRecord{Type: "effect", Record: d.Effect})
	for _, r := range d.History {
		recs = append(recs, ExportRecord{Type: "history", Record: r})
	}
	if d.Undo != nil {
		recs = append(recs, ExportRecord{Type: "undo", Record: d.Undo})
	}
	if d.Approval != nil {
		recs = append(recs, ExportRecord{Type: "approval", Record: d.Approval})
	}
	return recs
}

// UndoEntries returns the undo entries of the given effects of a session
// (those that have one), for views that show a page of effects.
func (s *Service) UndoEntries(ctx context.Context, session string, ids []uint64) (map[uint64]model.UndoEntry, error) {
	out := map[uint64]model.UndoEntry{}
	err := s.view(ctx, func(tx storage.ReadTx) error {
		clear(out)
		for _, id := range ids {
			u, err := tx.Undo(session, id, nil)
			if errors.Is(err, model.ErrCorrupt) {
				out[id] = damagedEntry(session, id)
				continue
			} else if err != nil {
				return err
			}
			if u != nil {
				out[id] = *u
			}
		}
		return nil
	})
	return out, err
}

// damagedEntry is what a read shows of the undo entry of effect id, which
// could not be read.
func damagedEntry(session string, id uint64) model.UndoEntry {
	return model.UndoEntry{EffectID: id, Session: session, State: model.EntryDamaged}
}
