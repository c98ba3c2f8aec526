package effectlog

import (
	"context"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// SetGCBeforeDrop makes GC call fn between its read and each drop, until
// the returned function restores it.
func SetGCBeforeDrop(fn func(session string)) (restore func()) {
	gcBeforeDrop = fn
	return func() { gcBeforeDrop = nil }
}

// AppendUndoRecord appends to effect id's history, chained and hashed as
// undolog does, an undo record moving its entry from its state to to, and
// sets the entry so: what a writer of the log who hashes as undolog does
// can write without undolog's rules.
func AppendUndoRecord(log Log, id uint64, to sm.EntryState) error {
	s, ok := log.(*Service)
	if !ok {
		s = log.(*fileLog).Service
	}
	return s.update(context.Background(), func(tx storage.WriteTx) error {
		e, err := tx.Effect(id)
		if err != nil {
			return err
		}
		sess, err := tx.Session(e.Session)
		if err != nil {
			return err
		}
		u, err := tx.Undo(e.Session, id, &e)
		if err != nil {
			return err
		}
		from := u.State
		u.State = to
		if err := saveUndoStep(tx, &sess, &e, e.State, u, model.HistoryRecord{Kind: model.KindUndo, From: string(from), To: string(to),
			Trigger: "by hand", Actor: "forger", At: s.now()}); err != nil {
			return err
		}
		return tx.PutSession(&sess)
	})
}
