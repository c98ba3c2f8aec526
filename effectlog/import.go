package effectlog

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// ImportReport says what Import wrote.
type ImportReport struct {
	Sessions int `json:"sessions"`
	Effects  int `json:"effects"`
	Records  int `json:"history_records"`
}

// count counts a record of an export of the type given.
func (r *ImportReport) count(typ string) {
	switch typ {
	case "session":
		r.Sessions++
	case "effect":
		r.Effects++
	case "history", "session_history":
		r.Records++
	}
}

// Import writes the records of an export (in its order: a session, its
// history, then its effects each with their history, undo entry and
// approval) into an empty log, as they are: the same ids, times and
// hashes, so that the log verifies as the one exported did. next returns
// the records one by one, and ok false at the end. A session and what
// belongs to it are one transaction; a log that holds a session already is
// refused (ErrConflict), and a record out of its place is ErrInvalidInput,
// after which the sessions written before it are taken out again. So is an
// export of a newer schema version than ExportSchemaVersion, and a time out
// of the range importedTimes takes; an owner is taken out (withoutOwner).
func (s *Service) Import(ctx context.Context, next func() (r ExportRecord, ok bool, err error)) (rep ImportReport, err error) {
	empty := true
	err = s.view(ctx, func(tx storage.ReadTx) error {
		return tx.Sessions(true, 0, func(uint64, string) (bool, error) {
			empty = false
			return false, nil
		})
	})
	if err != nil {
		return rep, err
	}
	if !empty {
		return rep, fmt.Errorf("%w: import writes into an empty log; this one holds sessions", model.ErrConflict)
	}
	var batch []ExportRecord
	var imported []model.Session // the sessions written, as written: a refusal takes out again those still so
	seen := map[uint64]bool{}    // the export's effects written so far
	defer func() {
		if err == nil || len(imported) == 0 {
			return
		}
		// The log was empty: a refused export leaves it so, not with the
		// sessions before the one that failed. A session a writer wrote to
		// since (an effect, a move) stays, with what was imported: what the
		// writer was told it wrote is never taken out.
		var kept []string
		if uerr := s.update(context.WithoutCancel(ctx), func(tx storage.WriteTx) error {
			kept = nil
			for _, was := range imported {
				asImported, _ := json.Marshal(was)
				_, dropped, err := dropSession(tx, was.ID, func(now model.Session) bool {
					b, _ := json.Marshal(now)
					return string(b) == string(asImported)
				})
				if err != nil {
					return err
				}
				if !dropped {
					kept = append(kept, was.ID)
				}
			}
			return nil
		}); uerr != nil {
			err = fmt.Errorf("%w; and taking out the %d sessions imported before failed too: %v", err, len(imported), uerr)
		} else if len(kept) > 0 {
			err = fmt.Errorf("%w; the sessions imported before were taken out, but for %s, which another process wrote to meanwhile: it stays, with what was imported", err, strings.Join(kept, ", "))
		} else {
			rep = ImportReport{}
		}
	}()
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		var got ImportReport
		var stored model.Session
		err := s.update(ctx, func(tx storage.WriteTx) error {
			got = ImportReport{}
			if len(imported) == 0 {
				// Empty still, in the transaction that writes first: of two
				// imports at once, the second finds the first's session.
				if n, err := countSessions(tx); err != nil || n > 0 {
					return cmp.Or(err, fmt.Errorf("%w: import writes into an empty log; this one holds sessions (another import, or a writer, made them meanwhile)", model.ErrConflict))
				}
			}
			if err := importSession(tx, batch, &got, seen); err != nil {
				return err
			}
			// The session as the log keeps it, not as the export spelt it
			// (a time in another zone, digits an engine drops): a take-out
			// compares it with what it finds then.
			sess, _ := batch[0].Record.(*model.Session)
			var err error
			stored, err = tx.Session(sess.ID)
			return err
		})
		if err != nil {
			return err
		}
		imported = append(imported, stored)
		for _, r := range batch {
			if e, ok := r.Record.(*model.Effect); ok {
				seen[e.ID] = true
			}
		}
		rep.Sessions, rep.Effects, rep.Records = rep.Sessions+got.Sessions, rep.Effects+got.Effects, rep.Records+got.Records
		batch = batch[:0]
		return nil
	}
	var end *ExportEnd
	now := s.now()
	seqs := map[uint64]string{} // session seq -> session: each is one session's
	ids := map[string]bool{}    // the export's sessions: each once
	for line := 1; ; line++ {
		r, ok, err := next()
		if cerr := ctx.Err(); cerr != nil {
			return rep, cerr // interrupted: what was imported is taken out
		}
		if err != nil {
			return rep, fmt.Errorf("record %d: %w", line, err)
		}
		switch {
		case !ok:
			if err := flush(); err != nil {
				return rep, err
			}
			if end == nil {
				return rep, fmt.Errorf("%w: the export ends without its end record: it was cut short (or made by an older undolog, whose exports have none); export it again", model.ErrInvalidInput)
			}
			if *end != rep {
				return rep, fmt.Errorf("%w: the export's end record says %d sessions, %d effects and %d history records, and it holds %d, %d and %d: records were taken out or added",
					model.ErrInvalidInput, end.Sessions, end.Effects, end.Records, rep.Sessions, rep.Effects, rep.Records)
			}
			// The log holds what was imported, and nothing else: two imports
			// that both found it empty (engines that do not serialize them)
			// both fail, and are taken out.
			var n int
			if err := s.view(ctx, func(tx storage.ReadTx) (err error) { n, err = countSessions(tx); return err }); err != nil {
				return rep, err
			}
			if n != rep.Sessions {
				return rep, fmt.Errorf("%w: the log holds %d sessions besides the %d imported: another import or a writer made them meanwhile; import into an empty log",
					model.ErrConflict, n-rep.Sessions, rep.Sessions)
			}
			return rep, nil
		case end != nil:
			return rep, fmt.Errorf("%w: record %d: a %s record after the export's end record", model.ErrInvalidInput, line, r.Type)
		case line == 1 && r.Type != "meta":
			return rep, fmt.Errorf("%w: record 1 is a %s record, not the export's meta record: not a whole export", model.ErrInvalidInput, r.Type)
		}
		switch r.Type {
		case "meta":
			if line != 1 {
				return rep, fmt.Errorf("%w: record %d: a second meta record", model.ErrInvalidInput, line)
			}
			meta, ok := r.Record.(*ExportMeta)
			switch {
			case !ok || meta.SchemaVersion == 0:
				return rep, fmt.Errorf("%w: record 1: the meta record states no schema version: not an export of undolog", model.ErrInvalidInput)
			case meta.SchemaVersion > ExportSchemaVersion:
				return rep, fmt.Errorf("%w: record 1: the export is of schema version %d; this undolog imports up to %d: import it with the undolog that made it, or a newer one",
					model.ErrInvalidInput, meta.SchemaVersion, ExportSchemaVersion)
			}
			continue
		case "end":
			e, ok := r.Record.(*ExportEnd)
			if !ok {
				return rep, fmt.Errorf("%w: record %d: an end record that says nothing", model.ErrInvalidInput, line)
			}
			end = e
			continue
		case "session":
			if sess, ok := r.Record.(*model.Session); ok {
				if sess.Seq == 0 || sess.Seq > model.MaxID {
					return rep, fmt.Errorf("%w: record %d: session %s has sequence number %d, out of range (1 to 2^53)", model.ErrInvalidInput, line, sess.ID, sess.Seq)
				}
				if ids[sess.ID] {
					return rep, fmt.Errorf("%w: record %d: session %s appears twice in the export", model.ErrInvalidInput, line, sess.ID)
				}
				ids[sess.ID] = true
				if other, dup := seqs[sess.Seq]; dup {
					return rep, fmt.Errorf("%w: record %d: sessions %s and %s have the same sequence number %d: the export was changed", model.ErrInvalidInput, line, other, sess.ID, sess.Seq)
				}
				seqs[sess.Seq] = sess.ID
			}
			if err := flush(); err != nil {
				return rep, err
			}
		default:
			if len(batch) == 0 {
				return rep, fmt.Errorf("%w: record %d: a %s record before any session", model.ErrInvalidInput, line, r.Type)
			}
		}
		if err := importedTimes(r, now); err != nil {
			return rep, fmt.Errorf("%w: record %d: %v: the export was changed, or written by a clock that was wrong", model.ErrInvalidInput, line, err)
		}
		withoutOwner(r)
		batch = append(batch, r)
	}
}

// The times an import takes. A time something happened is from 2000 (no
// undolog ran before; an earlier one is a clock reset to 1970, or forged,
// and gc would drop its session as ancient) to a day past now (clocks that
// share a log disagree by seconds, a zone taken wrongly by hours; a later
// one is forged, and would keep its session from gc and its records after
// every one written since). A deadline (when a request expires) may be
// later, up to the last time a log holds.
var earliestTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

const futureSkew = 24 * time.Hour

// importedTimes checks the times of one record of an export against the
// range above, and that those a record must have are there.
func importedTimes(r ExportRecord, now time.Time) error {
	type stamp struct {
		name     string
		t        *time.Time
		required bool // a value field, zero when the export leaves it out
		deadline bool
	}
	var what string
	var times []stamp
	round := func(prefix string, a *model.ApprovalRound) []stamp {
		return []stamp{{prefix + "requested_at", &a.RequestedAt, true, false},
			{prefix + "decided_at", a.DecidedAt, false, false}, {prefix + "expires_at", a.ExpiresAt, false, true}}
	}
	switch v := r.Record.(type) {
	case *model.Session:
		what = "session " + v.ID
		times = []stamp{{"created_at", &v.CreatedAt, true, false}, {"updated_at", &v.UpdatedAt, true, false}}
	case *model.HistoryRecord:
		what = fmt.Sprintf("history record %d of effect %d", v.Seq, v.EffectID)
		if r.Type == "session_history" {
			what = fmt.Sprintf("history record %d of session %s", v.Seq, v.Session)
		}
		times = []stamp{{"at", &v.At, true, false}}
	case *model.Effect:
		what = fmt.Sprintf("effect %d", v.ID)
		times = []stamp{{"created_at", &v.CreatedAt, true, false}, {"updated_at", &v.UpdatedAt, true, false}, {"last_replayed_at", v.LastReplayedAt, false, false}}
	case *model.UndoEntry:
		what = fmt.Sprintf("the undo entry of effect %d", v.EffectID)
		times = []stamp{{"created_at", &v.CreatedAt, true, false}, {"updated_at", &v.UpdatedAt, true, false}}
	case *model.Approval:
		what = fmt.Sprintf("the approval request of effect %d", v.EffectID)
		for i := range v.Earlier {
			times = append(times, round(fmt.Sprintf("earlier round %d's ", i+1), &v.Earlier[i])...)
		}
		times = append(times, round("", &v.ApprovalRound)...)
	}
	latest := now.Add(futureSkew)
	for _, s := range times {
		switch {
		case s.t == nil:
		case s.required && s.t.IsZero():
			return fmt.Errorf("%s has no %s", what, s.name)
		case s.t.Before(earliestTime):
			return fmt.Errorf("%s has %s %s, before %s", what, s.name, s.t.UTC().Format(time.RFC3339Nano), earliestTime.Format(time.DateOnly))
		case s.deadline && s.t.After(lastTime):
			return fmt.Errorf("%s has %s %s, after %s, the last time a log holds", what, s.name, s.t.UTC().Format(time.RFC3339Nano), lastTime.Format(time.RFC3339Nano))
		case !s.deadline && s.t.After(latest):
			return fmt.Errorf("%s has %s %s, more than a day after now (%s)", what, s.name, s.t.UTC().Format(time.RFC3339Nano), now.Format(time.RFC3339))
		}
	}
	return nil
}

// withoutOwner takes out the owner (and its lease) of an effect or undo
// entry of an export: the process it names ran against the log exported,
// not this one, and one planted would hold the call for good (a host's pid
// that lives, a lease far ahead). An executing call or a running
// compensation comes in with no owner: in doubt, as a dead owner's, for a
// person to resolve or undo.
func withoutOwner(r ExportRecord) {
	switch v := r.Record.(type) {
	case *model.Effect:
		v.Owner = nil
	case *model.UndoEntry:
		v.Owner = nil
	}
}

// countSessions counts the log's sessions.
func countSessions(tx storage.ReadTx) (int, error) {
	n := 0
	err := tx.Sessions(true, 0, func(uint64, string) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

// importSession writes one session's records, each effect and the session
// once they pass the checks verify makes (an export changed since, or
// damaged, is refused rather than imported to fail verify later).
//
// A session or an effect already in the log was made by a writer since the
// import began (the log was empty): the import is refused, not merged with
// it (the session's record and counts would be the export's, its effects
// both). before holds the export's effects written by the transactions
// before this one.
func importSession(tx storage.WriteTx, records []ExportRecord, rep *ImportReport, before map[uint64]bool) error {
	mine := map[uint64]bool{} // this session's effects
	var sess *model.Session
	var sessHist []model.HistoryRecord
	var effect *model.Effect
	var hist []model.HistoryRecord
	var undo *model.UndoEntry
	var approval *model.Approval
	owners := map[string]uint64{} // signature -> the newest effect of it so far
	// What the session's record counts, as the effects imported hold it.
	counts, waiting := map[sm.State]int{}, 0
	checkEffect := func() error {
		if effect == nil {
			return nil
		}
		if problems, _ := effectProblems(effect, hist, undo, approval); len(problems) > 0 {
			return fmt.Errorf("%w: effect %d fails its check (%s): the export is damaged or was changed", model.ErrInvalidInput, effect.ID, problems[0].Detail)
		}
		counts[effect.State]++
		if approval != nil && approval.Outcome == model.ApprovalPending {
			waiting++
		}
		effect, hist, undo, approval = nil, nil, nil, nil
		return nil
	}
	for _, r := range records {
		wrong := func() error {
			return fmt.Errorf("%w: a %s record (%T) where it does not belong", model.ErrInvalidInput, r.Type, r.Record)
		}
		switch v := r.Record.(type) {
		case *model.Session:
			if sess != nil || r.Type != "session" {
				return wrong()
			}
			if err := model.ValidSessionID(v.ID); err != nil {
				return err
			}
			sess = v
			if _, err := tx.Session(v.ID); err == nil {
				return fmt.Errorf("%w: session %s is in the log already: a writer made it while the import ran; import into an empty log that nothing else writes to", model.ErrConflict, v.ID)
			} else if !errors.Is(err, model.ErrNotFound) {
				return err
			}
			taken := ""
			if err := tx.Sessions(true, v.Seq-1, func(seq uint64, id string) (bool, error) {
				if seq == v.Seq {
					taken = id
				}
				return false, nil
			}); err != nil {
				return err
			}
			if taken != "" {
				return fmt.Errorf("%w: session %s has sequence number %d, which session %s took: a writer made it while the import ran; import into an empty log that nothing else writes to", model.ErrConflict, v.ID, v.Seq, taken)
			}
			if err := tx.InsertSession(v); err != nil {
				return err
			}
			if err := tx.ReserveIDs(0, v.Seq); err != nil {
				return err
			}
			rep.Sessions++
		case *model.HistoryRecord:
			switch {
			case r.Type == "session_history" && v.Kind == model.KindSession && v.Session == sess.ID:
				sessHist = append(sessHist, *v)
			case r.Type == "history" && effect != nil && v.EffectID == effect.ID:
				hist = append(hist, *v)
			default:
				return wrong()
			}
			if err := tx.AddHistory(v); err != nil {
				return err
			}
			rep.Records++
		case *model.Effect:
			if r.Type != "effect" || v.Session != sess.ID || v.ID == 0 {
				return wrong()
			}
			if v.ID > model.MaxID {
				return fmt.Errorf("%w: effect id %d is out of range (1 to 2^53)", model.ErrInvalidInput, v.ID)
			}
			if err := checkEffect(); err != nil {
				return err
			}
			if before[v.ID] || mine[v.ID] {
				return fmt.Errorf("%w: effect %d appears twice in the export", model.ErrInvalidInput, v.ID)
			}
			if _, err := tx.Effect(v.ID); err == nil {
				return fmt.Errorf("%w: effect %d is in the log already: a writer made it while the import ran; import into an empty log that nothing else writes to", model.ErrConflict, v.ID)
			} else if !errors.Is(err, model.ErrNotFound) {
				return err
			}
			mine[v.ID] = true
			effect = v
			if err := tx.PutEffect(v, ""); err != nil {
				return err
			}
			if v.ReplayOf == nil {
				// A call made again (after it was answered, or rejected
				// and its session resumed): the newer effect owns the
				// signature (verify checks the older).
				var err error
				if prev, ok := owners[v.CallSignature]; ok && prev > v.ID {
					return fmt.Errorf("%w: effect %d comes after effect %d of the same call: an export lists them in order", model.ErrInvalidInput, v.ID, prev)
				} else if ok {
					err = tx.MoveSignatureOwner(v.CallSignature, prev, v.ID)
				} else {
					err = tx.SetSignatureOwner(v.CallSignature, v.ID)
				}
				if err != nil {
					return err
				}
				owners[v.CallSignature] = v.ID
			}
			if err := tx.ReserveIDs(v.ID, 0); err != nil {
				return err
			}
			rep.Effects++
		case *model.UndoEntry:
			if r.Type != "undo" || effect == nil || v.EffectID != effect.ID || v.Session != sess.ID {
				return wrong()
			}
			undo = v
			if err := tx.PutUndo(v); err != nil {
				return err
			}
		case *model.Approval:
			if r.Type != "approval" || effect == nil || v.EffectID != effect.ID || v.Session != sess.ID {
				return wrong()
			}
			approval = v
			if err := tx.PutApproval(v); err != nil {
				return err
			}
			if v.Outcome == model.ApprovalPending {
				if err := tx.OpenRequest(v.EffectID, v.Session, v.ExpiresAt); err != nil {
					return err
				}
			}
		default:
			return wrong()
		}
	}
	if err := checkEffect(); err != nil {
		return err
	}
	if sess != nil {
		if problems, _ := sessionProblems(sess, sessHist); len(problems) > 0 {
			return fmt.Errorf("%w: session %s fails its check (%s): the export is damaged or was changed", model.ErrInvalidInput, sess.ID, problems[0].Detail)
		}
		// An effect left out (a torn export, a line removed) shows in the
		// session's counts, which the records above cannot: verify's check.
		if problems := countProblems(sess, counts, waiting); len(problems) > 0 {
			return fmt.Errorf("%w: session %s %s: the export is damaged, cut short or was changed", model.ErrInvalidInput, sess.ID, strings.Replace(problems[0], "the log holds", "the export holds", 1))
		}
	}
	return nil
}
