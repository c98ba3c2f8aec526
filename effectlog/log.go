// Package effectlog owns the effect log's rules: what an intercepted call
// becomes (new, replayed, retried, in progress, rejected), every move of an
// effect, its session, its approval request and its undo entry, the hash
// chain of their history, and the semantic half of verify. It writes them
// once, over the narrow interface of package storage, so every engine (a
// bbolt file, a shared database) keeps the same rules; the conformance
// suite proves it.
package effectlog

import (
	"context"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// Log is the effect log's whole API. New makes one over any storage engine.
type Log interface {
	CreateSession(ctx context.Context, req NewSession) (model.Session, error)
	GetSession(ctx context.Context, id string) (model.Session, error)
	ListSessions(ctx context.Context, f SessionFilter) ([]model.Session, uint64, error)
	SetSessionState(ctx context.Context, id string, to sm.SessionState, c model.Change) (model.Session, error)
	SessionHistory(ctx context.Context, id string) ([]model.HistoryRecord, error)
	SetUpstream(ctx context.Context, id string, upstream []string) (model.Session, error)
	SetUpstreamAt(ctx context.Context, id string, upstream []string, dir string, env model.StateEnv) (model.Session, error)
	VerifySession(ctx context.Context, id string) (model.Session, error)

	Intercept(ctx context.Context, req InterceptRequest) (InterceptResult, error)
	InterceptMany(ctx context.Context, reqs []InterceptRequest) ([]InterceptResult, error)
	Transition(ctx context.Context, id uint64, to sm.State, c model.Change) (model.Effect, error)
	Start(ctx context.Context, id uint64, c model.Change) (model.Effect, error)
	Commit(ctx context.Context, id uint64, c model.Change) (model.Effect, error)
	Fail(ctx context.Context, id uint64, c model.Change) (model.Effect, error)
	Approve(ctx context.Context, id uint64, c model.Change) (model.Effect, error)
	Reject(ctx context.Context, id uint64, c model.Change) (model.Effect, error)
	UndoStep(ctx context.Context, id uint64, to sm.EntryState, c model.Change) (model.UndoEntry, error)
	// Answered records that a committed call's answer reached its client
	// (see Service.Answered).
	Answered(ctx context.Context, id uint64, c model.Change) (model.Effect, error)
	// AnsweredUnflushed records it without waiting for the record to be
	// durable (see Service.AnsweredUnflushed).
	AnsweredUnflushed(ctx context.Context, id uint64, c model.Change) error
	// InputRound records an input round of an executing call (see
	// Service.InputRound).
	InputRound(ctx context.Context, id uint64, awaiting bool, c model.Change) (model.Effect, error)
	// RenewLease renews owner's lease on the effect it executes or
	// compensates (see Service.RenewLease).
	RenewLease(ctx context.Context, id uint64, owner *model.Owner, until time.Time) error
	ExpireApprovals(ctx context.Context, session string) (int, error)

	GetEffect(ctx context.Context, id uint64) (model.EffectDetail, error)
	// GetEffectAndPosition reads the effect and the change feed's newest
	// position in one snapshot (see Service.GetEffectAndPosition).
	GetEffectAndPosition(ctx context.Context, id uint64) (model.EffectDetail, uint64, error)
	ListEffects(ctx context.Context, f EffectFilter) ([]model.Effect, uint64, error)
	PendingApprovals(ctx context.Context, session string, limit int) ([]PendingApproval, int, error)
	UndoStack(ctx context.Context, session string, limit int) ([]model.UndoEntry, int, error)
	UndoEntries(ctx context.Context, session string, ids []uint64) (map[uint64]model.UndoEntry, error)
	Changes(ctx context.Context, after uint64, limit int) ([]ChangeRecord, uint64, error)
	LastChange(ctx context.Context) (uint64, error)
	// WaitChange returns once the change feed may hold a change after
	// position after (read before the caller's last look): when the engine
	// hears of one (PostgreSQL's NOTIFY), else once poll has passed. Even an
	// engine that hears of changes is looked at again after the log's
	// Fallback at most. It returns ctx.Err() once ctx ends, else nil: look.
	WaitChange(ctx context.Context, after uint64, poll time.Duration) error

	Verify(ctx context.Context) (VerifyReport, error)
	GC(ctx context.Context, before time.Time, states []sm.SessionState) (GCReport, error)
	Export(ctx context.Context, session string, fn func(ExportRecord) error) error
	Import(ctx context.Context, next func() (ExportRecord, bool, error)) (ImportReport, error)

	// ExpectWrite holds the log until done while nobody else waits for it,
	// on an engine that can (storage.Holder): this process writes again
	// soon. nil: the engine holds nothing between writes.
	ExpectWrite() (done func())
	// Suspend lets the log go now and keeps this process off it until
	// resume, on an engine that holds what others wait for
	// (storage.Suspender); nil: it holds nothing.
	Suspend() (resume func())

	// Close lets the log go once this process's writes to it are done.
	Close() error
}

// FileLog is what a log kept in a file can do beyond Log: say where it is,
// rewrite itself without its free space, and open without a journal that
// is lost, once a person accepts the loss. Commands that need it check
// for it; a log shared in a database has neither.
type FileLog interface {
	Log
	Path() string
	Compact() (before, after int64, err error)
	AcceptJournalLoss() (aside string, err error)
}

// Options tune a log's rules.
type Options struct {
	// Now returns the current time; nil means time.Now. Tests set it.
	Now func() time.Time
	// Fallback is how long a wait on an engine that hears of changes goes
	// without hearing of one before it looks anyway: the safety net for a
	// notification lost. Zero means DefaultFallback; negative: do not
	// listen, poll as on an engine that cannot hear.
	Fallback time.Duration
}

// DefaultFallback is the slow poll under waits that are woken by the engine.
const DefaultFallback = 3 * time.Second

// Service is the log's rules over one engine.
type Service struct {
	engine   storage.Engine
	clock    func() time.Time
	fallback time.Duration
}

// New returns the log kept by engine. A FileLog when the engine keeps its
// log in a file.
func New(engine storage.Engine, opts Options) Log {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Fallback == 0 {
		opts.Fallback = DefaultFallback
	}
	s := &Service{engine: engine, clock: opts.Now, fallback: opts.Fallback}
	if f, ok := engine.(storage.File); ok {
		return &fileLog{s, f}
	}
	return s
}

// fileLog is a Service over an engine that keeps its log in a file.
type fileLog struct {
	*Service
	file storage.File
}

func (f *fileLog) Path() string                              { return f.file.Path() }
func (f *fileLog) Compact() (before, after int64, err error) { return f.file.Compact() }

func (f *fileLog) AcceptJournalLoss() (aside string, err error) { return f.file.AcceptJournalLoss() }

// Engine is the engine the log is kept by.
func (s *Service) Engine() storage.Engine { return s.engine }

// ExpectWrite: see Log.ExpectWrite.
func (s *Service) ExpectWrite() (done func()) {
	if h, ok := s.engine.(storage.Holder); ok {
		return h.ExpectWrite()
	}
	return nil
}

// Suspend: see Log.Suspend.
func (s *Service) Suspend() (resume func()) {
	if h, ok := s.engine.(storage.Suspender); ok {
		return h.Suspend()
	}
	return nil
}

// Close lets the log go once this process's writes to it are done.
func (s *Service) Close() error { return s.engine.Close() }

func (s *Service) now() time.Time { return s.clock().UTC() }

// view and update run fn in a transaction of the engine.
func (s *Service) view(ctx context.Context, fn func(tx storage.ReadTx) error) error {
	return s.engine.View(ctx, fn)
}

func (s *Service) update(ctx context.Context, fn func(tx storage.WriteTx) error) error {
	return s.engine.Update(ctx, fn)
}

var (
	_ Log     = (*Service)(nil)
	_ FileLog = (*fileLog)(nil)
)
