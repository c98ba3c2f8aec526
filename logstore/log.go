package logstore

import (
	"context"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// Log is the effect log's whole API. Store keeps it in one bbolt file; a
// backend shared across machines (PostgreSQL) is to implement the same
// operations, so nothing outside this package depends on bbolt.
type Log interface {
	CreateSession(ctx context.Context, req NewSession) (model.Session, error)
	GetSession(ctx context.Context, id string) (model.Session, error)
	ListSessions(ctx context.Context, f SessionFilter) ([]model.Session, uint64, error)
	SetSessionState(ctx context.Context, id string, to sm.SessionState, c model.Change) (model.Session, error)
	SessionHistory(ctx context.Context, id string) ([]model.HistoryRecord, error)
	SetUpstream(ctx context.Context, id string, upstream []string) (model.Session, error)
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
	ExpireApprovals(ctx context.Context, session string) (int, error)

	GetEffect(ctx context.Context, id uint64) (model.EffectDetail, error)
	ListEffects(ctx context.Context, f EffectFilter) ([]model.Effect, uint64, error)
	PendingApprovals(ctx context.Context, session string, limit int) ([]PendingApproval, int, error)
	UndoStack(ctx context.Context, session string, limit int) ([]model.UndoEntry, int, error)
	UndoEntries(ctx context.Context, session string, ids []uint64) (map[uint64]model.UndoEntry, error)
	Changes(ctx context.Context, after uint64, limit int) ([]ChangeRecord, uint64, error)
	LastChange(ctx context.Context) (uint64, error)

	Verify(ctx context.Context) (VerifyReport, error)
	GC(ctx context.Context, before time.Time, states []sm.SessionState) (GCReport, error)
	Export(ctx context.Context, session string, fn func(ExportRecord) error) error

	// Close lets the log go once this process's writes to it are done.
	Close() error
}

// FileLog is what a log kept in a file can do beyond Log: say where it is,
// and rewrite itself without its free space. Commands that need it check
// for it; a log shared in a database has neither.
type FileLog interface {
	Log
	Path() string
	Compact() (before, after int64, err error)
}

var _ FileLog = (*Store)(nil)
