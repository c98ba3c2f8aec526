// Package storage is the narrow interface under the effect log's rules: an
// engine keeps sessions, effects, their history records, the signature
// index, undo entries, approval requests and the change feed, allocates ids
// and walks its indexes, all in transactions. It decides nothing: every rule
// (what an intercept does, which moves are allowed, what a record's hash
// covers) is in package effectlog, written once over this interface, and the
// conformance suite proves that each engine keeps them alike.
//
// An engine copies what it returns out of its own memory: a record read in a
// transaction stays valid after it.
package storage

import (
	"context"
	"errors"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// Engine runs transactions on one log. ctx bounds what an engine waits for
// (a server, a lock); an engine whose waits cannot be cut short may ignore
// it. A caller that records what already happened (a call that ran) passes
// a context that is not cancelled (context.WithoutCancel).
type Engine interface {
	// View runs fn in a read-only transaction. A log that does not exist yet
	// reads as empty: fn is not called, and nothing is created.
	View(ctx context.Context, fn func(ReadTx) error) error
	// Update runs fn in a write transaction, creating the log if need be,
	// and makes what it wrote durable before it returns. fn may share its
	// transaction with other callers' (group commit) and may run more than
	// once (when a call it was grouped with failed): it must leave its
	// outcome only in variables it sets anew each run. An error from fn
	// undoes fn's writes, except ErrNothingToWrite (fn wrote nothing: the
	// call succeeds) and an error made by KeepWrites.
	Update(ctx context.Context, fn func(WriteTx) error) error
	// UpdateUnflushed runs fn like Update without waiting for what it
	// wrote to be durable: for a record whose loss in a crash is harmless.
	// A crash may lose it, and nothing else. The writes this process asks
	// for after it is called see it, and a durable one makes it durable
	// too. It may return before fn ran; fn's error then goes unreported.
	UpdateUnflushed(ctx context.Context, fn func(WriteTx) error) error
	// Close lets the log go once this process's writes to it are done. The
	// engine may be used again afterwards.
	Close() error
}

// File is what an engine that keeps its log in one file can do beyond
// Engine. Commands that need it check for it.
type File interface {
	Engine
	// Path is the log file's path.
	Path() string
	// Compact rewrites the file without its free space; it returns the
	// file's size before and after.
	Compact() (before, after int64, err error)
	// AcceptJournalLoss lets the file open without the journal it needs
	// (missing, or not the one of its last checkpoint): it sets that
	// journal aside, returning where ("" if it was missing), and the writes
	// only it held are lost. Refused when the journal is the log's.
	AcceptJournalLoss() (aside string, err error)
}

// Identity is what a write transaction of an engine that authenticates to
// a server can say: the role it is authenticated as. The rules record it in
// every history record they write; an engine that authenticates no one
// lacks it.
type Identity interface {
	Role() string
}

// Migrator is what an engine with a versioned schema of its own can do
// beyond Engine: move the log to this build's schema now, rather than on
// first write, and say from which version to which.
type Migrator interface {
	Engine
	Migrate(ctx context.Context) (before, after uint64, err error)
}

// Roles is what an engine whose server checks who may do what can do: set
// up its group roles (see the engine's documentation for what each may do).
type Roles interface {
	Engine
	ApplyRoles(ctx context.Context) error
}

// Holder is what an engine that keeps its log open between one process's
// writes can do beyond Engine (the bbolt file's committer): hold the log
// through a call, from its start to its end, while no other process waits
// for it, so that the end is written without reopening the log.
type Holder interface {
	Engine
	// ExpectWrite says that this process writes again soon; done (which may
	// be called more than once) ends that.
	ExpectWrite() (done func())
}

// Suspender is what an engine that can hold something other processes
// wait for (the file, rows) can do beyond Engine: let it go now and keep
// this process off the log until resume, for a process about to be
// stopped (SIGTSTP).
type Suspender interface {
	Engine
	Suspend() (resume func())
}

// Notifier is what an engine that hears of other processes' writes can do
// beyond Engine (PostgreSQL's LISTEN/NOTIFY). Waiters check for it; without
// it they poll.
type Notifier interface {
	// WaitChange returns nil once the change feed may hold a change after
	// position after, or ctx.Err() once ctx ends. A caller reads the feed's
	// position, then waits for something after it: a change committed in
	// between returns at once. It may also return with nothing new (the
	// engine lost track, as when its listening connection dropped): the
	// caller looks again.
	WaitChange(ctx context.Context, after uint64) error
}

// FeedSyncer is what an engine that gives a write's change-feed positions
// after its commit can do beyond Engine: wait until the changes of the
// writes this process committed so far have them. The feed's readers call
// it first, so that a process reads its own writes in the feed.
type FeedSyncer interface {
	SyncFeed(ctx context.Context) error
}

// SignatureLookahead is what a write transaction of an engine that pays a
// round trip for each read can do beyond WriteTx: be told the signature
// that will be looked up next after the session, so that it reads both at
// once. The look-up is the same, made after the session's is.
type SignatureLookahead interface {
	LookAhead(sig string)
}

// CallerGoesOn is what a write transaction of an engine that gives a
// write's change-feed positions after its commit can do beyond WriteTx: be
// told that its caller acts as soon as the write is committed (a call
// starts once its effect is recorded executing), so that the positions
// follow the write's return instead of delaying it.
type CallerGoesOn interface {
	GoesOnAtCommit()
}

// DecisionWaker is what a write transaction of an engine that tells other
// processes of its changes can do beyond WriteTx: tell their waits, as its
// commit is made and before its changes have feed positions, to look again
// (a decision on a request they may be waiting for was recorded).
type DecisionWaker interface {
	WakeWaiters()
}

// ErrNothingToWrite is returned by an Update function that looked and found
// nothing to change: the call succeeds and writes nothing.
var ErrNothingToWrite = errors.New("nothing to write")

// KeepWrites makes err the outcome of an Update function that keeps what it
// wrote before it refused (an approval found expired on the way is recorded
// even though the request it came with is refused).
func KeepWrites(err error) error { return &keptWrites{err} }

type keptWrites struct{ err error }

func (k *keptWrites) Error() string { return k.err.Error() }

// Kept returns the error a KeepWrites outcome carries; ok is false for any
// other error.
func Kept(err error) (inner error, ok bool) {
	var k *keptWrites
	if errors.As(err, &k) {
		return k.err, true
	}
	return nil, false
}

// Index names an index of effects by one of their fields.
type Index int

const (
	AllEffects Index = iota // every effect, by id
	BySession
	ByTool
	ByState
	ByTier
	// WithUndo holds the effects of a session that have an undo entry.
	WithUndo
	// ByUndoState holds the effects whose undo entry may be in the state
	// named: an engine may give more (entries written before it kept the
	// index), never fewer, and the rules read the entry.
	ByUndoState
)

// Match is one condition of EffectsWhere: the ids under Name in index Index
// (not AllEffects).
type Match struct {
	Index Index
	Name  string
}

// OpenRequest is an entry of the index of approval requests awaiting a
// decision.
type OpenRequest struct {
	EffectID uint64
	// Session is the request's session; "" when the entry does not say
	// (logs written before), and then the request itself says.
	Session string
	// Expires is when the request expires (zero: never) if Known; if not,
	// only the request itself says.
	Expires time.Time
	Known   bool
}

// ReadTx reads a log. Records that are not there are model.ErrNotFound
// (Session, Effect) or nil (Undo, Approval); records that cannot be read
// are model.ErrCorrupt.
type ReadTx interface {
	Session(id string) (model.Session, error)
	Effect(id uint64) (model.Effect, error)
	// EffectHistory and SessionHistory return a history in order, each
	// record with its effect id, session and previous hash filled in.
	EffectHistory(id uint64, session string) ([]model.HistoryRecord, error)
	SessionHistory(session string) ([]model.HistoryRecord, error)
	// Undo returns the undo entry of effect id of session. known, if not
	// nil, is that effect as read in this transaction; the engine may take
	// what the entry shares with it (tool, compensation) from there.
	Undo(session string, id uint64, known *model.Effect) (*model.UndoEntry, error)
	Approval(id uint64) (*model.Approval, error)
	// SignatureOwner is the effect that owns a call signature.
	SignatureOwner(sig string) (id uint64, ok bool, err error)

	// Effects walks the ids under name in index ix (name is ignored for
	// AllEffects), ascending or descending, strictly after the cursor id in
	// that direction (0: from the start), until fn returns false.
	Effects(ix Index, name string, asc bool, cursor uint64, fn func(id uint64) (bool, error)) error
	// EffectsWhere walks, like Effects, the ids that are under every one
	// of the matches at once (none: every effect): the engine joins its
	// indexes itself, so that a walk costs about what its matches share,
	// not what its largest index holds.
	EffectsWhere(m []Match, asc bool, cursor uint64, fn func(id uint64) (bool, error)) error
	// Sessions walks the sessions in the order they were created (their
	// Seq), ascending or descending, strictly after the cursor (0: from the
	// start), until fn returns false.
	Sessions(asc bool, cursor uint64, fn func(seq uint64, id string) (bool, error)) error
	// OpenRequests walks the requests awaiting a decision, oldest first;
	// with session not "", only those that may be of that session (an
	// entry that does not say is walked too).
	OpenRequests(session string, fn func(OpenRequest) (bool, error)) error
	// Changes walks the change feed after position `after`, oldest first:
	// each history record at the position it was written, filled in as
	// EffectHistory fills it. Records since dropped (gc) are skipped.
	Changes(after uint64, fn func(pos uint64, r model.HistoryRecord) (bool, error)) error
	// LastChange is the position of the newest change.
	LastChange() (uint64, error)
	// SchemaVersion is the version of the engine's layout the log has.
	SchemaVersion() uint64

	// Records and CheckIndexes are verify's engine half. Records calls
	// session and effect with every record the log holds (a nil one: that
	// kind is not walked), all sessions first, in the order of their ids,
	// and bad with every record it cannot read; session and effect may
	// read the transaction. CheckIndexes reports, with add, each
	// index entry that disagrees with the records given (those Records
	// read, kept as their keys), each record its indexes lack, and each
	// thing stored that belongs to no record.
	Records(session func(model.Session), effect func(model.Effect), bad func(model.Problem)) error
	CheckIndexes(sessions map[string]*model.Session, effects *EffectSet, add func(model.Problem)) error
}

// WriteTx writes a log. The rules write a record after changing it; the
// engine keeps its indexes in step with what it is given.
type WriteTx interface {
	ReadTx
	NextEffectID() (uint64, error)
	NextSessionSeq() (uint64, error)
	// ReserveIDs makes the ids allocated from now on greater than effect
	// and sessionSeq (an import keeps the ids it brings).
	ReserveIDs(effect, sessionSeq uint64) error
	// InsertSession writes a new session and its place in creation order
	// (its Seq); PutSession writes one that exists.
	InsertSession(s *model.Session) error
	PutSession(s *model.Session) error
	// PutEffect writes an effect that was in state `from`; "" for a new
	// effect, which is entered in every index.
	PutEffect(e *model.Effect, from sm.State) error
	// SetSignatureOwner makes effect id the owner of a call signature.
	SetSignatureOwner(sig string, id uint64) error
	// MoveSignatureOwner makes effect to the owner of a signature that
	// effect from owns (a call run again after its answer reached the
	// client); model.ErrConflict if from does not own it.
	MoveSignatureOwner(sig string, from, to uint64) error
	// AddHistory writes a history record (a session's own, of
	// model.KindSession, under its session; else under its effect) and
	// appends it to the change feed.
	AddHistory(r *model.HistoryRecord) error
	PutUndo(u *model.UndoEntry) error
	PutApproval(a *model.Approval) error
	// OpenRequest enters effect id's request in the index of requests
	// awaiting a decision; CloseRequest takes it out.
	OpenRequest(id uint64, session string, expires *time.Time) error
	CloseRequest(id uint64) error
	// DeleteEffect drops an effect with everything kept of it: its history,
	// index entries, signature, undo entry and approval.
	DeleteEffect(e *model.Effect) error
	// DeleteSession drops a session, its history and its place in order,
	// and appends to the change feed a change that names no record (readers
	// skip it, as they skip the records dropped): a follower looking at the
	// feed's position sees that something changed.
	DeleteSession(s *model.Session) error
}

// LaterOwner tells whether owner, the effect a signature index entry names,
// may own the signature of effect e, an earlier effect of the same call that
// is not a replay: a call the proxy ran again after its first answer
// reached the client (which the rules check) is a new effect, with a
// greater id, and the index names the newest. For CheckIndexes.
func LaterOwner(owner EffectKeys, found bool, e EffectKeys) bool {
	return found && !owner.Replay && owner.CallSignature == e.CallSignature &&
		owner.Session == e.Session && owner.ID > e.ID
}
