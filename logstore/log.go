package logstore

import (
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// Log is the effect log's whole API. Store keeps it in one bbolt file; a
// backend shared across machines (PostgreSQL) is to implement the same
// operations, so nothing outside this package depends on bbolt.
type Log interface {
	CreateSession(NewSession) (model.Session, error)
	GetSession(id string) (model.Session, error)
	ListSessions(SessionFilter) ([]model.Session, uint64, error)
	SetSessionState(id string, to sm.SessionState, c model.Change) (model.Session, error)
	SessionHistory(id string) ([]model.HistoryRecord, error)
	SetUpstream(id string, upstream []string) (model.Session, error)
	VerifySession(id string) (model.Session, error)

	Intercept(InterceptRequest) (InterceptResult, error)
	InterceptMany([]InterceptRequest) ([]InterceptResult, error)
	Transition(id uint64, to sm.State, c model.Change) (model.Effect, error)
	Start(id uint64, c model.Change) (model.Effect, error)
	Commit(id uint64, c model.Change) (model.Effect, error)
	Fail(id uint64, c model.Change) (model.Effect, error)
	Approve(id uint64, c model.Change) (model.Effect, error)
	Reject(id uint64, c model.Change) (model.Effect, error)
	UndoStep(id uint64, to sm.EntryState, c model.Change) (model.UndoEntry, error)
	ExpireApprovals(session string) (int, error)

	GetEffect(id uint64) (model.EffectDetail, error)
	ListEffects(EffectFilter) ([]model.Effect, uint64, error)
	PendingApprovals(session string, limit int) ([]PendingApproval, int, error)
	UndoStack(session string, limit int) ([]model.UndoEntry, int, error)
	UndoEntries(session string, ids []uint64) (map[uint64]model.UndoEntry, error)
	Changes(after uint64, limit int) ([]ChangeRecord, uint64, error)
	LastChange() (uint64, error)

	Verify() (VerifyReport, error)
	GC(before time.Time, states []sm.SessionState) (GCReport, error)
	Export(session string, fn func(ExportRecord) error) error

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
