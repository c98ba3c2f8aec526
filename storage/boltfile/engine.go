// Package boltfile is the storage engine that keeps an effect log in one
// bbolt file and its journal: the record codec and key layouts, the indexes,
// the committer, the journal and its fdatasync, the flock and its waiters,
// compaction, verify's index half and the readers of older schemas. It
// stores and decides nothing: the rules are package effectlog's.
//
// A process's writes to a log run on one committer goroutine (committer.go),
// which groups them into transactions and makes each batch durable with one
// append to a journal beside the file (journal.go). It keeps the log open
// only while calls keep coming, and never longer than 50 ms at a time, so
// that `undolog approve` in another shell always gets through. Reads never
// write: they open the log read-only, under its shared lock, with the
// journal's records laid over it in memory (overlay.go), or read in the
// committer's transaction while it holds the log. All writes of one logical
// step are one transaction.
package boltfile

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/undolog/undolog/model"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the layout this build writes. A log with a higher version is
// refused (ErrNewerSchema); a lower one is read and moved up on its next write.
// Version 2 stores records in a binary form (see codec.go); the JSON records of
// version 1 stay readable, so moving up rewrites nothing but the version.
// Version 3 may keep recent writes in a journal beside the file (journal.go),
// which an older undolog would not read: it must refuse the log instead.
// Version 4 writes records of form 2 (codec.go), which version 3 cannot decode,
// and history records whose hash covers their effect's content
// (model.HashWithContent), which it would read as damage.
// Version 5 writes records of form 3 (owners' leases), which version 4
// cannot decode.
// Version 6 adds the indexes of undo entries by state and of open requests
// by session (byindex.go), which version 5 would not keep in step.
const SchemaVersion = 6

// DefaultLockTimeout is how long an operation waits for another process to
// release the log before giving up with ErrBusy.
const DefaultLockTimeout = 5 * time.Second

// Options tune an Engine.
type Options struct {
	// LockTimeout bounds the wait for the file lock; zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// Interrupt, once closed, ends a wait for the file lock at once with
	// context.Canceled: a command that a signal stops does not wait out
	// the lock timeout first. Nil: no wait is cut short.
	Interrupt <-chan struct{}
}

// Engine keeps the effect log at one path in a bbolt file. It holds the file open
// only while its committer writes; it is safe for concurrent use by many
// goroutines, and the Engines of one path in a process share one committer.
type Engine struct {
	path  string
	opts  Options
	group *writeGroup // this process's writers to the file
}

var (
	groupsMu sync.Mutex
	groups   = map[string]*writeGroup{}
)

// New returns the Engine for the log at path. It does no I/O: the file is
// created by the first write.
func New(path string, opts Options) *Engine {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	groupsMu.Lock()
	g, ok := groups[abs]
	if !ok {
		g = newWriteGroup()
		groups[abs] = g
	}
	groupsMu.Unlock()
	return &Engine{path: path, opts: opts, group: g}
}

// Close lets the log go: the committer answers what it was given, makes
// unflushed writes durable, then closes the file. The Engine may be used
// again; it opens the log anew.
func (s *Engine) Close() error {
	err := s.flushUnflushed()
	s.pause()()
	return err
}

// Path is the log file's path.
func (s *Engine) Path() string { return s.path }

// Bucket names.
var (
	bMeta           = []byte("meta")
	bSessions       = []byte("sessions")
	bSessionsByTime = []byte("sessions_by_time")
	bSessionHistory = []byte("session_history")
	bEffects        = []byte("effects")
	bHistory        = []byte("history")
	bSignatures     = []byte("signatures")
	bBySession      = []byte("idx_session")
	bByState        = []byte("idx_state")
	bByTool         = []byte("idx_tool")
	bByTier         = []byte("idx_tier")
	bUndo           = []byte("undo")
	bApprovals      = []byte("approvals")
	bApprovalsOpen  = []byte("approvals_pending")
	bChanges        = []byte("changes")

	allBuckets = [][]byte{bMeta, bSessions, bSessionsByTime, bSessionHistory, bEffects, bHistory,
		bSignatures, bBySession, bByState, bByTool, bByTier, bUndo, bApprovals, bApprovalsOpen, bChanges}

	keySchema = []byte("schema_version")
	// keyHexSignatures marks a log upgraded from schema 1, whose signatures
	// index may hold keys as 64 hex digits.
	keyHexSignatures = []byte("hex_signatures")
	// keyLogID is the log's random id (schema 3), named by its journal records.
	keyLogID = []byte("log_id")
)

// appendBuckets grow mostly at their end (keys are increasing ids, or ids
// under a prefix): their pages can be filled, where bbolt's default leaves
// half of every split page empty for inserts that never come.
var appendBuckets = [][]byte{bEffects, bHistory, bChanges, bUndo, bBySession, bByTool, bByTier,
	bSessionsByTime, bSessionHistory, bApprovals}

// packAppendBuckets sets the fill of the append buckets for this transaction
// (bbolt keeps the handle, and the setting, for the rest of the transaction).
func packAppendBuckets(tx *bolt.Tx) {
	for _, name := range appendBuckets {
		tx.Bucket(name).FillPercent = 0.95
	}
}

// journalPath is where the log's journal lives.
func (s *Engine) journalPath() string { return s.path + JournalSuffix }

// view runs fn in a read-only transaction. A log that does not exist yet reads
// as empty: fn is not called and nothing is created. While this process's
// committer runs, fn runs in its transaction, which holds the journal's
// writes. Otherwise fn reads bbolt, opened read-only under the shared lock,
// with the journal's records laid over it in memory (readView): a read takes
// no exclusive lock and never writes or syncs, so it works on a full disk,
// on a read-only file system and as a user who may not write the log.
func (s *Engine) view(fn func(tx *readTx) error) error {
	if err, inCommitter := s.viewInCommitter(fn); inCommitter {
		return err
	}
	return s.viewOnce(fn)
}

func (s *Engine) viewOnce(fn func(tx *readTx) error) error {
	s.group.users.RLock() // fn must not read again: a Suspend waiting would hold that off
	defer s.group.users.RUnlock()
	if err := s.checkFile(); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	db, err := s.open(true, s.opts.LockTimeout)
	if err != nil {
		return err
	}
	s.group.opens.Add(1)
	err = s.guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			rtx, err := s.readView(tx)
			if err != nil {
				return err
			}
			return fn(rtx)
		})
	})
	closeDB(db, err)
	return err
}

// readView is tx, a read transaction under the log's shared lock, with the
// journal's records over it: what a writer would hold after replaying them
// (the same checks, the same records, the same refusals), and the schema
// checked as a writer checks it, after them.
func (s *Engine) readView(tx *bolt.Tx) (*readTx, error) {
	rtx := plainTx(tx)
	j, err := pendingJournal(s.path, tx)
	if err != nil {
		return nil, err
	}
	if j != nil {
		if rtx.ov, err = s.group.overlays.overlay(j, tx, s.path); err != nil {
			return nil, err
		}
	}
	if _, err := checkSchema(rtx, s.path); err != nil {
		return nil, err
	}
	return rtx, nil
}

// guard turns a panic or a memory fault inside bbolt, which a damaged page
// can cause, into ErrCorrupt: a damaged log is reported, never a crash.
func (s *Engine) guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = damagedPage{fmt.Errorf("%w: %s has a damaged page (%v)", model.ErrCorrupt, s.path, r)}
		}
	}()
	return fn()
}

// damagedPage marks an error recovered from a panic inside bbolt.
type damagedPage struct{ error }

func (d damagedPage) Unwrap() error { return d.error }

// closeDB closes db after an operation that ended with err. After a panic
// inside bbolt, its transaction may still hold the locks Close waits for, so
// the close is left to a goroutine: the damage is reported now, and a hang, if
// any, costs a goroutine and a file descriptor rather than the caller.
func closeDB(db *bolt.DB, err error) {
	if errors.As(err, new(damagedPage)) {
		go db.Close()
		return
	}
	db.Close()
}

// open opens the log, waiting up to timeout for its lock. The file it locked
// must still be the one at the path, or it opens the path again: a process
// that opened the log while compaction held it would otherwise lock, and
// write to, a file renamed away.
func (s *Engine) open(readOnly bool, timeout time.Duration) (*bolt.DB, error) {
	if err := s.checkLogPath(); err != nil {
		return nil, err
	}
	if err := s.checkJournalPath(); err != nil {
		return nil, err
	}
	var db *bolt.DB
	// checkFile catches the damage known to make bbolt.Open panic; the guard is
	// for the rest, so that a damaged log is an error and never a crash.
	defer announceWaiting(s.journalPath())()
	var file *os.File
	openFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := openLogFile(name, flag, perm)
		if err == nil {
			// bbolt looks for the lock every 50 ms; waitLock every 1 ms, so
			// a log let go for this process is taken at once. bbolt's own
			// flock on the same file then succeeds.
			if err = waitLock(f, !readOnly, timeout, s.opts.Interrupt); err != nil {
				f.Close()
				f = nil
			}
		}
		file = f
		return f, err
	}
	var err error
	for tries := 0; ; tries++ {
		err = s.guard(func() (err error) {
			db, err = bolt.Open(s.path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: readOnly, OpenFile: openFile})
			return err
		})
		if err != nil || s.isFileAtPath(file) {
			break
		}
		db.Close()
		if tries == 10 {
			return nil, fmt.Errorf("%w: %s was replaced 10 times while this process waited for it", model.ErrBusy, s.path)
		}
		if err := s.checkFile(); err != nil { // the path again, and what is there now
			return nil, err
		}
	}
	switch {
	case err == nil:
		if !readOnly {
			if err := s.checkWritable(file); err != nil {
				db.Close()
				return nil, err
			}
		}
		return db, nil
	case errors.Is(err, model.ErrCorrupt), errors.Is(err, context.Canceled):
		return nil, err
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s is held by another process (waited %s)", model.ErrBusy, s.path, timeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("%w: %s: %v", model.ErrCorrupt, s.path, err)
	default:
		return nil, fmt.Errorf("open log %s: %w", s.path, bare(err))
	}
}

// checkWritable refuses to write the log file f, open under the log's
// exclusive lock, if it or its journal belongs to another user (who could
// read every call written to it, or change it under this user), or if its
// pages are damaged (checkPages).
func (s *Engine) checkWritable(f *os.File) error {
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open log %s: %w", s.path, bare(err))
	}
	if err := checkOwner(s.path, info); err != nil {
		return err
	}
	if err := s.checkJournalOwner(); err != nil {
		return err
	}
	return s.checkPages(f)
}

// checkJournalOwner refuses a journal that another user owns.
func (s *Engine) checkJournalOwner() error {
	if info, err := os.Lstat(s.journalPath()); err == nil {
		return checkOwner(s.journalPath(), info)
	}
	return nil
}

// checkOwner refuses a file, of the log's, that another user owns: the
// user who runs undolog writes only its own files, as it reads another's
// only to read them.
func checkOwner(path string, info os.FileInfo) error {
	uid, other := ownedByOther(info)
	if !other {
		return nil
	}
	return fmt.Errorf("%s belongs to user %d, not to user %d who writes: undolog writes only its own user's log and journal (move it away, or write as its owner): %w",
		path, uid, os.Geteuid(), os.ErrPermission)
}

// ownedByOther reports whether another user than the one that runs owns
// the file info describes, and who.
func ownedByOther(info os.FileInfo) (uid int, other bool) {
	uid, ok := fileOwner(info)
	return uid, ok && uid != os.Geteuid()
}

// openLogFile opens the log file for bbolt; tests replace it to refuse
// opens for writing, as a read-only file system does.
var openLogFile = os.OpenFile

// isFileAtPath reports whether f is the file at the log's path.
func (s *Engine) isFileAtPath(f *os.File) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(s.path)
	return err == nil && os.SameFile(held, now)
}

// create writes a new, fully initialized log beside path and links it into
// place, so that the log never exists half made: an empty or partial file at
// path is always damage, never a log being born.
func (s *Engine) create() error {
	// A link to nowhere is no place for a new log: opened, it would make an
	// empty file at its target, which no later open could take for a log.
	if info, err := os.Lstat(s.path); err == nil && info.Mode()&os.ModeSymlink != 0 {
		target, _ := os.Readlink(s.path)
		return fmt.Errorf("%w: %s is a symbolic link to %s, which does not exist: give the log's own path", model.ErrInvalidInput, s.path, target)
	}
	// Nor is a journal of another user's (made first in a shared directory).
	if err := s.checkJournalOwner(); err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create log directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".undolog-new-*")
	if err != nil {
		return fmt.Errorf("create log %s: %w", s.path, err)
	}
	tmpPath := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpPath)
	// bbolt must create the file itself (mode 0600); CreateTemp only reserved the name.
	if err := os.Remove(tmpPath); err != nil {
		return fmt.Errorf("create log %s: %w", s.path, err)
	}
	db, err := bolt.Open(tmpPath, 0o600, &bolt.Options{Timeout: s.opts.LockTimeout})
	if err != nil {
		return fmt.Errorf("create log %s: %w", s.path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range append(allBuckets, schema6Buckets...) {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bMeta).Put(keyLogID, newLogID()); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Put(keySchema, itob(SchemaVersion))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create log %s: %w", s.path, err)
	}
	if err := os.Link(tmpPath, s.path); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create log %s: %w", s.path, err)
	}
	// Make the new directory entry durable.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// checkSchema checks that tx is an undolog log this build can read and
// returns its schema version.
func checkSchema(tx *readTx, path string) (uint64, error) {
	meta := tx.Bucket(bMeta)
	if meta == nil {
		return 0, fmt.Errorf("%w: %s is a bbolt file without undolog's records", model.ErrCorrupt, path)
	}
	v := meta.Get(keySchema)
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s has no schema version record", model.ErrCorrupt, path)
	}
	n := btoi(v)
	if n > SchemaVersion {
		return 0, fmt.Errorf("%w: %s has schema version %d; this undolog reads up to %d, upgrade undolog", model.ErrNewerSchema, path, n, SchemaVersion)
	} else if n == 0 {
		return 0, fmt.Errorf("%w: %s has schema version 0", model.ErrCorrupt, path)
	}
	for _, name := range allBuckets {
		if tx.Bucket(name) == nil {
			return 0, fmt.Errorf("%w: %s lacks the %s bucket", model.ErrCorrupt, path, name)
		}
	}
	return n, nil
}

// upgradeSchema moves a log written by an older undolog to this schema, in
// the transaction that is about to write binary records or use the journal,
// so that older undologs refuse the log rather than misread it. It is
// committed to bbolt at once, where they look. Nothing is rewritten: a
// schema 1 log keeps its JSON records and hex signature keys, which are
// still read; keyHexSignatures says the latter may be there.
func upgradeSchema(tx *writeTx, from uint64) error {
	tx.mustCommit = true
	if from < 2 {
		if err := tx.put(bMeta, keyHexSignatures, []byte{1}); err != nil {
			return err
		}
	}
	if from < 3 {
		if err := tx.put(bMeta, keyLogID, newLogID()); err != nil {
			return err
		}
	}
	if from < 6 {
		if err := buildSchema6(tx.Tx); err != nil {
			return err
		}
	}
	return tx.put(bMeta, keySchema, itob(SchemaVersion))
}

// newLogID is a log's random id, which its journal records carry.
func newLogID() []byte {
	id := make([]byte, 8)
	rand.Read(id)
	return id
}

// bbolt's meta page layout (see bbolt's internal/common/meta.go): a 16-byte
// page header, then magic, version, page size, flags, root bucket (root page
// and sequence), freelist page, high-water page id, txid and an FNV-64a checksum
// of everything before it.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	metaOffset     = 16
	metaChecksumAt = metaOffset + 56
	// Field offsets within the meta, after the page header.
	metaVersion   = 4
	metaPageSize  = 8
	metaRoot      = 16
	metaFreelist  = 32
	metaHighWater = 40
	metaTxid      = 48
)

// LooksLikeLog reports whether the file at path begins as a bbolt file (its
// first meta page's magic number and version), without opening it as a log:
// of one that does not, an open says it is not a log.
func LooksLikeLog(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var head [metaOffset + 8]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return false
	}
	le := binary.LittleEndian
	return le.Uint32(head[metaOffset:]) == boltMagic && le.Uint32(head[metaOffset+metaVersion:]) == boltVersion
}

// checkLogPath refuses a log path that is a symbolic link. The journal is
// kept beside the path given: through a link, writes would go to a journal
// of their own, which a process given the log's own path never sees (it
// would log again a call the link's journal holds, and a checkpoint of
// either would leave the other's writes behind as leftovers).
func (s *Engine) checkLogPath() error {
	info, err := os.Lstat(s.path)
	if err != nil || info.Mode()&os.ModeSymlink == 0 {
		return nil // none yet, or no link: the opens that follow say what is wrong
	}
	target, _ := os.Readlink(s.path)
	return fmt.Errorf("%w: %s is a symbolic link to %s: undolog keeps the log's journal beside the path it is given, so give the log's own path",
		model.ErrInvalidInput, s.path, target)
}

// checkJournalPath refuses a journal path that holds something other than
// a regular file: a FIFO would block every open, a symbolic link would send
// the journal's writes (and its mode) to whatever it names.
func (s *Engine) checkJournalPath() error {
	return journalKindError(s.journalPath())
}

// journalKindError is the error for a journal path that holds something
// other than a regular file, or nil.
func journalKindError(path string) error {
	info, err := os.Lstat(path)
	if err != nil || info.Mode().IsRegular() {
		return nil // none yet, or a file: the opens that follow say what is wrong
	}
	return notRegularJournal(path, info.Mode())
}

func notRegularJournal(path string, m os.FileMode) error {
	return fmt.Errorf("%w: %s is %s, not a regular file: undolog keeps the log's journal there; move it away",
		model.ErrCorrupt, path, fileKind(m))
}

// fileKind names what a path that is not a regular file holds.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "not a plain file"
}

// checkFile refuses, before bbolt maps it, a file that is empty, not a bbolt
// file, or shorter than its own meta page says: bbolt would initialize an empty
// file and may fault on a truncated one. It returns os.ErrNotExist (wrapped)
// when there is no file.
func (s *Engine) checkFile() error {
	// Only a regular file is opened: opening a FIFO would wait for a writer
	// for ever, a device would read what it streams.
	if info, err := os.Stat(s.path); err == nil && !info.Mode().IsRegular() && !info.IsDir() {
		return fmt.Errorf("%w: %s is %s, not a regular file", model.ErrCorrupt, s.path, fileKind(info.Mode()))
	}
	f, err := os.Open(s.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return err
		}
		return fmt.Errorf("open log %s: %w", s.path, bare(err))
	}
	defer f.Close()
	// This look takes no lock: a writer may commit while it reads (the file
	// grown past the size it took, a page it reads reused). What it finds
	// wrong counts only if the file stayed as it was meanwhile.
	for tries := 0; ; tries++ {
		info, err := f.Stat()
		if err != nil {
			return fmt.Errorf("open log %s: %w", s.path, bare(err))
		}
		err = s.checkOpenFile(f, info)
		if err == nil || tries == 4 {
			return err
		}
		if now, statErr := f.Stat(); statErr != nil || now.Size() == info.Size() && now.ModTime().Equal(info.ModTime()) {
			return err
		}
	}
}

// checkOpenFile is checkFile's look at f, whose stat is info.
func (s *Engine) checkOpenFile(f *os.File, info os.FileInfo) error {
	if info.IsDir() {
		return fmt.Errorf("%w: %s is a directory", model.ErrCorrupt, s.path)
	}
	size := info.Size()
	if size == 0 {
		return fmt.Errorf("%w: %s is empty: undolog makes its log where no file is yet; remove the empty file, or name a new path", model.ErrCorrupt, s.path)
	}
	m, err := s.newestMeta(f, size)
	if err != nil {
		return err
	}
	pages := pageChecker{f: f, path: s.path, pageSize: m.pageSize, highWater: m.pgid}
	if err := pages.check("root", m.root, branchPageFlag|leafPageFlag); err != nil {
		return err
	}
	if m.freelist != noFreelist {
		if err := pages.check("freelist", m.freelist, freelistPageFlag); err != nil {
			return err
		}
	}
	return nil
}

// newestMeta reads the meta page bbolt uses, of the file f of size bytes,
// and checks that its pages fit in the file. bbolt uses the newest meta page
// that is valid and skips one failing its checksum (a torn write); the older
// one may describe pages reused since, so only the one bbolt will use counts.
func (s *Engine) newestMeta(f *os.File, size int64) (*metaPage, error) {
	first, err := s.readMeta(f, 0)
	if err != nil {
		return nil, err
	}
	var second *metaPage
	if first != nil {
		second, err = s.readMeta(f, int64(first.pageSize))
	} else {
		for ps := int64(1024); ps <= 1<<24 && ps < size && second == nil && err == nil; ps <<= 1 {
			second, err = s.readMeta(f, ps)
		}
	}
	if err != nil {
		return nil, err
	}
	if first == nil && second == nil {
		return nil, fmt.Errorf("%w: %s is not a bbolt file", model.ErrCorrupt, s.path)
	}
	m := first
	if m == nil || second != nil && second.txid > m.txid {
		m = second
	}
	if m.pageSize < 512 || m.pageSize > 1<<16 || m.pageSize&(m.pageSize-1) != 0 {
		return nil, fmt.Errorf("%w: %s has a damaged meta page (page size %d)", model.ErrCorrupt, s.path, m.pageSize)
	}
	if m.pgid > uint64(size)/m.pageSize {
		return nil, fmt.Errorf("%w: %s is truncated (%d bytes, its pages need %d)", model.ErrCorrupt, s.path, size, m.pgid*m.pageSize)
	}
	return m, nil
}

// metaPage holds the fields of a bbolt meta page that checkFile checks.
type metaPage struct {
	pageSize, root, freelist, pgid, txid uint64
}

// readMeta reads the meta page at off; nil when there is none there or it
// fails bbolt's own validation (magic, version, checksum).
func (s *Engine) readMeta(f *os.File, off int64) (*metaPage, error) {
	head := make([]byte, metaChecksumAt+8)
	if _, err := f.ReadAt(head, off); err != nil {
		if err == io.EOF {
			return nil, nil
		}
		return nil, fmt.Errorf("read log %s: %w", s.path, bare(err))
	}
	le := binary.LittleEndian
	if le.Uint32(head[metaOffset:]) != boltMagic || le.Uint32(head[metaOffset+metaVersion:]) != boltVersion {
		return nil, nil
	}
	h := fnv.New64a()
	h.Write(head[metaOffset:metaChecksumAt])
	if h.Sum64() != le.Uint64(head[metaChecksumAt:]) {
		return nil, nil
	}
	return &metaPage{
		pageSize: uint64(le.Uint32(head[metaOffset+metaPageSize:])),
		root:     le.Uint64(head[metaOffset+metaRoot:]),
		freelist: le.Uint64(head[metaOffset+metaFreelist:]),
		pgid:     le.Uint64(head[metaOffset+metaHighWater:]),
		txid:     le.Uint64(head[metaOffset+metaTxid:]),
	}, nil
}

// bbolt's page header: id (8 bytes), flags (2), count (2), overflow (4).
const (
	pageHeaderSize   = 16
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	freelistPageFlag = 0x10
	// noFreelist is the freelist page id of a log that does not store one.
	noFreelist = ^uint64(0)
)

// pageChecker checks the pages the meta page points at, which bbolt reads
// without bounds checks when it opens the log: a page of the wrong type, past
// the file's pages, or with more entries than it has room for would make it
// panic or read outside the file.
type pageChecker struct {
	f                   *os.File
	path                string
	pageSize, highWater uint64
}

func (c pageChecker) check(what string, id uint64, flags uint16) error {
	if id < 2 || id >= c.highWater {
		return c.damaged(what, id, "outside the file's pages")
	}
	head := make([]byte, pageHeaderSize+8)
	if _, err := c.f.ReadAt(head, int64(id*c.pageSize)); err != nil {
		return c.damaged(what, id, "unreadable")
	}
	return c.checkHeader(what, id, flags, head)
}

func (c pageChecker) damaged(what string, id uint64, why string) error {
	return fmt.Errorf("%w: %s has a damaged %s page %d (%s)", model.ErrCorrupt, c.path, what, id, why)
}

// checkHeader checks head, the header and first 8 bytes of page id, which
// is inside the file's pages and of a kind flags allows.
func (c pageChecker) checkHeader(what string, id uint64, flags uint16, head []byte) error {
	damaged := func(why string) error { return c.damaged(what, id, why) }
	le := binary.LittleEndian
	if le.Uint16(head[8:])&flags == 0 {
		return damaged("wrong page type")
	}
	overflow := uint64(le.Uint32(head[12:]))
	if overflow >= c.highWater-id {
		return damaged("runs past the file's pages")
	}
	count := uint64(le.Uint16(head[10:]))
	if flags == freelistPageFlag && count == 0xFFFF { // a large count sits in the first id slot
		count = le.Uint64(head[pageHeaderSize:])
		if count < ^uint64(0) {
			count++
		}
	}
	// Every entry takes at least 8 bytes (a freelist id; a leaf or branch element is 16).
	if count > ((overflow+1)*c.pageSize-pageHeaderSize)/8 {
		return damaged("more entries than the page holds")
	}
	return nil
}

// bare drops the path an *os.PathError repeats, keeping what went wrong.
func bare(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func itob(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// btoi reads an 8-byte id; a malformed (damaged) key reads as 0, which no
// record uses, so damage is reported as missing rather than panicking.
func btoi(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
