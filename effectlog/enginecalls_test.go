package effectlog_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
	"github.com/undolog/undolog/storage/boltfile"
	"github.com/undolog/undolog/storage/pgstore"
)

// maxDecisionCalls bounds the engine calls of one decision's transaction:
// its effect, session and request read once each, its check, its writes.
const maxDecisionCalls = 11

// TestDecisionsMakeFewEngineCalls counts the engine calls of approve,
// reject and resolve on each engine: every rule of a move is checked once,
// and its approval request is read once in its transaction.
func TestDecisionsMakeFewEngineCalls(t *testing.T) {
	engines := map[string]func(t *testing.T) storage.Engine{
		"file": func(t *testing.T) storage.Engine {
			return boltfile.New(filepath.Join(t.TempDir(), "u.db"), boltfile.Options{LockTimeout: 2 * time.Second})
		},
		"postgres": func(t *testing.T) storage.Engine { return pgstore.New(pgtest.Server(t).NewDatabase(t)) },
	}
	decisions := []struct {
		name string
		// others is how many other requests of the session wait.
		others int
		decide func(s effectlog.Log, id uint64) error
	}{
		{"approve", 0, func(s effectlog.Log, id uint64) error {
			_, err := s.Approve(context.Background(), id, model.Change{Actor: "alice", Reason: "ok"})
			return err
		}},
		{"approve with another request waiting", 1, func(s effectlog.Log, id uint64) error {
			_, err := s.Approve(context.Background(), id, model.Change{Actor: "alice", Reason: "ok"})
			return err
		}},
		{"reject", 0, func(s effectlog.Log, id uint64) error {
			_, err := s.Reject(context.Background(), id, model.Change{Actor: "alice", Reason: "no"})
			return err
		}},
		{"resolve in doubt", 0, func(s effectlog.Log, id uint64) error {
			ctx := context.Background()
			if _, err := s.Approve(ctx, id, model.Change{Actor: "alice"}); err != nil {
				return err
			}
			if _, err := s.Start(ctx, id, model.Change{Actor: "agent"}); err != nil {
				return err
			}
			_, err := s.Fail(ctx, id, model.Change{Actor: "alice", Reason: "it did not run", Resolve: true})
			return err
		}},
	}
	for name, open := range engines {
		for _, d := range decisions {
			t.Run(name+"/"+d.name, func(t *testing.T) {
				engine := &countingEngine{Engine: open(t)}
				s := effectlog.New(engine, effectlog.Options{})
				t.Cleanup(func() { s.Close() })
				var id uint64
				for i := range d.others + 1 {
					res, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "send", Tier: sm.Irreversible,
						Args: json.RawMessage(`{"n":` + string(rune('0'+i)) + `}`), CreateSession: true, ApprovalTimeout: time.Hour})
					if err != nil {
						t.Fatal(err)
					}
					id = res.Effect.ID
				}
				// The decision counted is the last one made.
				if err := d.decide(s, id); err != nil {
					t.Fatal(err)
				}
				if engine.calls > maxDecisionCalls {
					t.Errorf("%s made %d engine calls (%v), want at most %d", d.name, engine.calls, engine.names, maxDecisionCalls)
				}
				if n := countOf(engine.names, "Approval"); n > 1 {
					t.Errorf("%s read its approval request %d times (%v), want once", d.name, n, engine.names)
				}
				t.Logf("%s: %d engine calls %v", d.name, engine.calls, engine.names)
			})
		}
	}
}

func countOf(names []string, name string) int {
	n := 0
	for _, x := range names {
		if x == name {
			n++
		}
	}
	return n
}

// countingEngine counts the calls the rules make on its transactions, those
// of the last transaction only.
type countingEngine struct {
	storage.Engine
	calls int
	names []string
}

func (c *countingEngine) Update(ctx context.Context, fn func(storage.WriteTx) error) error {
	return c.Engine.Update(ctx, func(tx storage.WriteTx) error {
		c.calls, c.names = 0, nil
		return fn(&countingTx{tx, c})
	})
}

// countingTx is a write transaction that counts the calls made on it. It
// keeps the capabilities the rules look for (the role, the look-ahead),
// which are no calls of their own.
type countingTx struct {
	tx storage.WriteTx
	c  *countingEngine
}

func (t *countingTx) count(name string) { t.c.calls++; t.c.names = append(t.c.names, name) }

func (t *countingTx) Role() string {
	if id, ok := t.tx.(storage.Identity); ok {
		return id.Role()
	}
	return ""
}

func (t *countingTx) LookAhead(sig string) {
	if l, ok := t.tx.(storage.SignatureLookahead); ok {
		l.LookAhead(sig)
	}
}

func (t *countingTx) Session(id string) (model.Session, error) {
	t.count("Session")
	return t.tx.Session(id)
}
func (t *countingTx) Effect(id uint64) (model.Effect, error) {
	t.count("Effect")
	return t.tx.Effect(id)
}
func (t *countingTx) EffectHistory(id uint64, session string) ([]model.HistoryRecord, error) {
	t.count("EffectHistory")
	return t.tx.EffectHistory(id, session)
}
func (t *countingTx) SessionHistory(session string) ([]model.HistoryRecord, error) {
	t.count("SessionHistory")
	return t.tx.SessionHistory(session)
}
func (t *countingTx) Undo(session string, id uint64, known *model.Effect) (*model.UndoEntry, error) {
	t.count("Undo")
	return t.tx.Undo(session, id, known)
}
func (t *countingTx) Approval(id uint64) (*model.Approval, error) {
	t.count("Approval")
	return t.tx.Approval(id)
}
func (t *countingTx) SignatureOwner(sig string) (uint64, bool, error) {
	t.count("SignatureOwner")
	return t.tx.SignatureOwner(sig)
}
func (t *countingTx) Effects(ix storage.Index, name string, asc bool, cursor uint64, fn func(id uint64) (bool, error)) error {
	t.count("Effects")
	return t.tx.Effects(ix, name, asc, cursor, fn)
}
func (t *countingTx) EffectsWhere(m []storage.Match, asc bool, cursor uint64, fn func(id uint64) (bool, error)) error {
	t.count("EffectsWhere")
	return t.tx.EffectsWhere(m, asc, cursor, fn)
}
func (t *countingTx) Sessions(asc bool, cursor uint64, fn func(seq uint64, id string) (bool, error)) error {
	t.count("Sessions")
	return t.tx.Sessions(asc, cursor, fn)
}
func (t *countingTx) OpenRequests(session string, fn func(storage.OpenRequest) (bool, error)) error {
	t.count("OpenRequests")
	return t.tx.OpenRequests(session, fn)
}
func (t *countingTx) Changes(after uint64, fn func(pos uint64, r model.HistoryRecord) (bool, error)) error {
	t.count("Changes")
	return t.tx.Changes(after, fn)
}
func (t *countingTx) LastChange() (uint64, error) { t.count("LastChange"); return t.tx.LastChange() }
func (t *countingTx) SchemaVersion() uint64       { t.count("SchemaVersion"); return t.tx.SchemaVersion() }
func (t *countingTx) Records(session func(model.Session), effect func(model.Effect), bad func(model.Problem)) error {
	t.count("Records")
	return t.tx.Records(session, effect, bad)
}
func (t *countingTx) CheckIndexes(sessions map[string]*model.Session, effects *storage.EffectSet, add func(model.Problem)) error {
	t.count("CheckIndexes")
	return t.tx.CheckIndexes(sessions, effects, add)
}
func (t *countingTx) NextEffectID() (uint64, error) {
	t.count("NextEffectID")
	return t.tx.NextEffectID()
}
func (t *countingTx) NextSessionSeq() (uint64, error) {
	t.count("NextSessionSeq")
	return t.tx.NextSessionSeq()
}
func (t *countingTx) ReserveIDs(effect, sessionSeq uint64) error {
	t.count("ReserveIDs")
	return t.tx.ReserveIDs(effect, sessionSeq)
}
func (t *countingTx) InsertSession(s *model.Session) error {
	t.count("InsertSession")
	return t.tx.InsertSession(s)
}
func (t *countingTx) PutSession(s *model.Session) error {
	t.count("PutSession")
	return t.tx.PutSession(s)
}
func (t *countingTx) PutEffect(e *model.Effect, from sm.State) error {
	t.count("PutEffect")
	return t.tx.PutEffect(e, from)
}
func (t *countingTx) SetSignatureOwner(sig string, id uint64) error {
	t.count("SetSignatureOwner")
	return t.tx.SetSignatureOwner(sig, id)
}
func (t *countingTx) MoveSignatureOwner(sig string, from, to uint64) error {
	t.count("MoveSignatureOwner")
	return t.tx.MoveSignatureOwner(sig, from, to)
}
func (t *countingTx) AddHistory(r *model.HistoryRecord) error {
	t.count("AddHistory")
	return t.tx.AddHistory(r)
}
func (t *countingTx) PutUndo(u *model.UndoEntry) error { t.count("PutUndo"); return t.tx.PutUndo(u) }
func (t *countingTx) PutApproval(a *model.Approval) error {
	t.count("PutApproval")
	return t.tx.PutApproval(a)
}
func (t *countingTx) OpenRequest(id uint64, session string, expires *time.Time) error {
	t.count("OpenRequest")
	return t.tx.OpenRequest(id, session, expires)
}
func (t *countingTx) CloseRequest(id uint64) error {
	t.count("CloseRequest")
	return t.tx.CloseRequest(id)
}
func (t *countingTx) DeleteEffect(e *model.Effect) error {
	t.count("DeleteEffect")
	return t.tx.DeleteEffect(e)
}
func (t *countingTx) DeleteSession(s *model.Session) error {
	t.count("DeleteSession")
	return t.tx.DeleteSession(s)
}
