package logstore

import (
	"time"

	sm "github.com/undolog/undolog/statemachine"
)

// Log is the effect log's whole API. Store keeps it in one bbolt file; a
// backend shared across machines (PostgreSQL) is to implement the same
// operations, so nothing outside this package depends on bbolt.
type Log interface {
	CreateSession(NewSession) (Session, error)
	GetSession(id string) (Session, error)
	ListSessions(SessionFilter) ([]Session, uint64, error)
	SetSessionState(id string, to sm.SessionState, c Change) (Session, error)
	SessionHistory(id string) ([]HistoryRecord, error)
	SetUpstream(id string, upstream []string) (Session, error)
	VerifySession(id string) (Session, error)

	Intercept(InterceptRequest) (InterceptResult, error)
	InterceptMany([]InterceptRequest) ([]InterceptResult, error)
	Transition(id uint64, to sm.State, c Change) (Effect, error)
	Start(id uint64, c Change) (Effect, error)
	Commit(id uint64, c Change) (Effect, error)
	Fail(id uint64, c Change) (Effect, error)
	Approve(id uint64, c Change) (Effect, error)
	Reject(id uint64, c Change) (Effect, error)
	UndoStep(id uint64, to sm.EntryState, c Change) (UndoEntry, error)
	ExpireApprovals(session string) (int, error)

	GetEffect(id uint64) (EffectDetail, error)
	ListEffects(EffectFilter) ([]Effect, uint64, error)
	PendingApprovals(session string, limit int) ([]PendingApproval, int, error)
	UndoStack(session string, limit int) ([]UndoEntry, int, error)
	UndoEntries(session string, ids []uint64) (map[uint64]UndoEntry, error)
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
