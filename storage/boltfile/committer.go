package boltfile

// The committer: every write of one process to one log runs on a goroutine of
// its own, which groups the calls that wait into one transaction (group
// commit) and makes each batch durable with one journal append.
//
// While calls keep coming, the committer keeps the log open and its write
// transaction with it: the next batch goes on where the last one stopped,
// with nothing to reopen or replay. It lets the log go when no call has come
// for `linger`, when it has held it for `maxHold`, or when Compact asks; what
// it had written stays in the journal, which the next holder replays. A
// process waiting for the log says so (waiters_flock.go), and the committer
// that lets the log go then waits for it to get in. So no process keeps the
// log for longer than maxHold at a time while another waits for it, and
// `undolog approve` in another shell gets through within about 0.1 s however
// busy the log is.
//
// A caller that expects another write soon (a call in flight through the
// proxy: its intercept written, its commit to come once the server answers)
// says so with ExpectWrite. Meanwhile the committer keeps the log past
// linger and maxHold, as long as nobody waits for it (it looks every
// expectPoll) and for maxExpect at most: the commit then goes on in the
// same transaction instead of reopening the log and replaying the journal.
// Without a way to see waiters (waiters_other.go) it lingers as before.
//
// A write that need not be durable at once (UpdateUnflushed) is queued
// without its caller waiting, and waits in the queue for up to
// unflushedWait for a durable write to share its batch and its flush.

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/undolog/undolog/storage"
	bolt "go.etcd.io/bbolt"
)

const (
	// linger is how long the committer keeps the log after a batch for the
	// next call. A caller's next write comes within microseconds; another
	// process polls for the lock every 50 ms and says it is waiting.
	linger = time.Millisecond
	// maxHold bounds how long the committer keeps the log at a time.
	maxHold = 50 * time.Millisecond
	// maxExpect bounds a hold kept for an expected write: an opener that
	// does not say it waits (no flock, or not undolog) gets in after it.
	maxExpect = time.Second
	// expectPoll is how often a committer kept for an expected write looks
	// for waiters (a waiter takes the lock the moment it is let go: waitLock).
	expectPoll = time.Millisecond
	// unflushedWait bounds how long a write queued by UpdateUnflushed
	// waits for a durable one to carry it, and so how much a crash loses:
	// the proxy's next call comes within milliseconds of the answer.
	unflushedWait = 10 * time.Millisecond
)

// writeGroup holds the calls of one process to one log file and the
// committer's state.
type writeGroup struct {
	mu      sync.Mutex
	queue   []*writeCall
	running bool          // the committer goroutine runs
	wake    chan struct{} // holds a token once calls are queued
	pauses  int           // Compact has the file: no committer may start
	stopped *sync.Cond    // on mu: the committer stopped

	commits  atomic.Int64 // bbolt transactions committed, for tests and benchmarks
	journals atomic.Int64 // journal records appended, likewise
	opens    atomic.Int64 // opens of the log by this process, likewise

	expecting atomic.Int64 // writes expected soon (ExpectWrite)

	overlays overlayCache // the readers' last overlay of the journal
	walked   walkedFile   // the state of the file whose pages were walked last
	walks    atomic.Int64 // walks of the file's pages (checkPages)

	// users is held (shared) by each use of the file outside the
	// committer, a read or a compaction, and by Suspend (whole) to wait
	// them out and keep new ones off the file.
	users sync.RWMutex

	// The committer's own.
	ops      []byte   // the buffer for journal records, reused
	held     *heldLog // the log it holds open, or nil
	yielding bool     // take let the log go for a waiter: yield to it
}

// kept reports whether h is kept for an expected write.
func (g *writeGroup) kept(h *heldLog) bool {
	return canSeeWaiters && g.expecting.Load() > 0 && time.Since(h.since) < maxExpect
}

func newWriteGroup() *writeGroup {
	g := &writeGroup{wake: make(chan struct{}, 1)}
	g.stopped = sync.NewCond(&g.mu)
	return g
}

// durableWrites counts journal appends and commits: each costs a flush.
func (g *writeGroup) durableWrites() int64 { return g.commits.Load() + g.journals.Load() }

// ExpectWrite tells the committer that this process will write again soon:
// it keeps the log until done is called while nobody else waits for it (see
// the top of this file). done may be called more than once.
func (s *Engine) ExpectWrite() (done func()) {
	g := s.group
	g.expecting.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			g.expecting.Add(-1)
			g.signal() // a committer kept for it lingers from now
		})
	}
}

// Opens counts the times this process opened the log (to write or to
// read), for benchmarks: each open of a writer replays the journal.
func (s *Engine) Opens() int64 { return s.group.opens.Load() }

// writeCall is one caller's request: a write (fn), a read (read), or, with
// neither, a checkpoint of the journal.
type writeCall struct {
	fn      func(tx *writeTx) error
	read    func(tx *readTx) error
	timeout time.Duration // the caller's lock timeout
	err     error
	done    chan struct{} // closed when the call is answered
	// unflushed is set for a write nobody waits for (UpdateUnflushed),
	// queued at queued.
	unflushed bool
	queued    time.Time
}

// heldLog is the log as the committer holds it: open, in a write
// transaction that holds what the journal holds.
type heldLog struct {
	db      *bolt.DB
	tx      *bolt.Tx
	j       *journal
	version uint64 // the log's schema version
	since   time.Time
	file    os.FileInfo // the file opened, to see it replaced
	waiters waitSignal
}

// update runs fn in a write transaction, creating the log if it does not
// exist yet. Calls that arrive while another batch is being written are
// grouped into the next (group commit): concurrent callers share one
// transaction and one journal append, yet each sees only its own outcome.
func (s *Engine) update(fn func(tx *writeTx) error) error {
	return s.enqueue(&writeCall{fn: fn})
}

// updateUnflushed queues fn as a write of the committer's and returns at
// once: the write goes with the next batch that has a durable write, or on
// its own after unflushedWait.
func (s *Engine) updateUnflushed(fn func(tx *writeTx) error) {
	s.queue(&writeCall{fn: fn, unflushed: true, queued: time.Now()})
}

func (s *Engine) enqueue(c *writeCall) error {
	s.queue(c)
	<-c.done
	return c.err
}

// queue adds c to the committer's queue, starting the committer if need be.
func (s *Engine) queue(c *writeCall) {
	c.done, c.timeout = make(chan struct{}), s.opts.LockTimeout
	g := s.group
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if !g.running && g.pauses == 0 {
		g.running = true
		go s.committer()
	}
	g.mu.Unlock()
	g.signal()
}

// unflushedOnly tells how long the queue may wait yet for a durable write:
// zero unless it holds only unflushed writes queued less than
// unflushedWait ago.
func (g *writeGroup) unflushedOnly() time.Duration {
	if len(g.queue) == 0 {
		return 0
	}
	for _, c := range g.queue {
		if !c.unflushed {
			return 0
		}
	}
	return max(0, unflushedWait-time.Since(g.queue[0].queued))
}

// flushUnflushed makes the writes queued by UpdateUnflushed durable now,
// if there are any.
func (s *Engine) flushUnflushed() error {
	g := s.group
	g.mu.Lock()
	queued := false
	for _, c := range g.queue {
		queued = queued || c.unflushed
	}
	g.mu.Unlock()
	if !queued {
		return nil
	}
	return s.update(func(*writeTx) error { return storage.ErrNothingToWrite })
}

// viewInCommitter runs fn in the committer's transaction if the committer
// runs (it may hold the log, which this process could not open beside it);
// ok is false if it does not.
func (s *Engine) viewInCommitter(fn func(tx *readTx) error) (err error, ok bool) {
	g := s.group
	c := &writeCall{read: fn, timeout: s.opts.LockTimeout, done: make(chan struct{})}
	g.mu.Lock()
	if !g.running || g.pauses > 0 {
		g.mu.Unlock()
		return nil, false
	}
	g.queue = append(g.queue, c)
	g.mu.Unlock()
	g.signal()
	<-c.done
	return c.err, true
}

func (g *writeGroup) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// Suspend lets the log go now and keeps this process off it until resume
// is called (writes and reads made meanwhile wait): a process about to be
// stopped (SIGTSTP) then keeps no other process out while it is. A read or
// a compaction under way ends first.
func (s *Engine) Suspend() (resume func()) {
	resumeWrites := s.pause()
	s.group.users.Lock()
	return func() {
		s.group.users.Unlock()
		resumeWrites()
	}
}

// pause stops the committer, which lets the log go, and keeps it stopped
// until resume is called; calls made meanwhile wait.
func (s *Engine) pause() (resume func()) {
	g := s.group
	g.mu.Lock()
	g.pauses++
	for g.running {
		g.signal()
		g.stopped.Wait()
	}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.pauses--
		if g.pauses == 0 && len(g.queue) > 0 && !g.running {
			g.running = true
			go s.committer()
		}
		g.mu.Unlock()
	}
}

func (s *Engine) committer() {
	g := s.group
	for {
		if batch := g.take(); batch != nil {
			s.runBatch(batch)
			if h := g.held; h != nil && time.Since(h.since) > maxHold {
				if others := h.waiters.others(); others || !g.kept(h) {
					s.letGo(nil, others)
				}
			}
			continue
		}
		s.letGo(nil, g.yielding)
		g.yielding = false
		g.mu.Lock()
		if len(g.queue) == 0 || g.pauses > 0 {
			g.running = false
			g.stopped.Broadcast()
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
	}
}

// take returns the calls queued, waiting for some while the log is held: up
// to linger, or while it is kept for an expected write and nobody waits
// (then yielding is set once someone does); nil when none came or Compact
// waits.
func (g *writeGroup) take() []*writeCall {
	var lingerEnd time.Time
	for {
		h := g.held
		g.mu.Lock()
		batch, paused := g.queue, g.pauses > 0
		wait := g.unflushedOnly()
		if wait > 0 && h != nil && h.waiters.others() {
			wait = 0 // another process waits for the log: no keeping it for them
		}
		if paused || wait > 0 {
			batch = nil
		} else {
			g.queue = nil
		}
		g.mu.Unlock()
		if len(batch) > 0 || paused || h == nil && wait == 0 {
			return batch
		}
		if wait > 0 {
			// Only unflushed writes: wait for a durable one to carry them.
			lingerEnd = time.Time{}
		} else if g.kept(h) {
			if h.waiters.others() {
				g.yielding = true
				return nil
			}
			wait, lingerEnd = expectPoll, time.Time{}
		} else {
			if lingerEnd.IsZero() {
				lingerEnd = time.Now().Add(linger)
			}
			if wait = time.Until(lingerEnd); wait <= 0 {
				return nil
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-g.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// runBatch answers every call of the batch: reads first, which see what the
// journal holds, then the writes in one transaction.
func (s *Engine) runBatch(batch []*writeCall) {
	// Opening the log waits as long as the most patient caller would.
	var timeout time.Duration
	create := false
	for _, c := range batch {
		timeout = max(timeout, c.timeout)
		create = create || c.fn != nil
	}
	h, err := s.hold(timeout, create)
	if err == errNoLog {
		// Reads and checkpoints of a log removed meanwhile: as view promises,
		// a log that does not exist reads as empty and is not made.
		answer(batch, nil)
		return
	} else if err != nil {
		answer(batch, err)
		return
	}
	writes := batch[:0:0]
	for _, c := range batch {
		if c.read == nil {
			writes = append(writes, c)
			continue
		}
		err := s.guard(func() error { return c.read(plainTx(h.tx)) })
		if errors.As(err, new(damagedPage)) {
			s.letGo(err, false)
			answer(batch, err)
			return
		}
		answer([]*writeCall{c}, err)
	}
	for len(writes) > 0 {
		failed, err := s.writeBatch(h, writes)
		if err != errBatchMember {
			if err != nil {
				s.letGo(err, false)
			}
			answer(writes, err)
			return
		}
		// The transaction holds the failed call's writes, if any: start it
		// again from the journal, and the batch without that call.
		s.letGo(nil, false)
		answer([]*writeCall{failed}, failed.err)
		rest := writes[:0:0]
		for _, c := range writes {
			if c != failed {
				rest = append(rest, c)
			}
		}
		if writes = rest; len(writes) == 0 {
			return
		}
		if h, err = s.hold(timeout, true); err != nil {
			answer(writes, err)
			return
		}
	}
}

// answer closes the calls' done channels, first setting err on each of
// them if it is not nil; calls already answered are skipped.
func answer(calls []*writeCall, err error) {
	for _, c := range calls {
		select {
		case <-c.done:
			continue
		default:
		}
		if err != nil {
			c.err = err
		}
		close(c.done)
	}
}

// errNoLog tells a batch without writes that the log does not exist.
var errNoLog = errors.New("no log")

// errBatchMember marks a batch stopped because one call failed.
var errBatchMember = errors.New("a call of the batch failed")

// writeBatch runs the calls in the held transaction and makes what they
// wrote durable: by a journal append or, when the journal is full, a
// checkpoint is asked for or the schema moves up, by a bbolt commit. It
// returns errBatchMember and the failed call when one call failed.
func (s *Engine) writeBatch(h *heldLog, pending []*writeCall) (failed *writeCall, err error) {
	err = s.guard(func() error {
		w := newWriteTx(h.tx, s.group.ops)
		defer func() {
			if cap(w.ops.Buf) <= 2*journalMaxBytes { // a huge batch's buffer is let go
				s.group.ops = w.ops.Buf[:0]
			}
		}()
		checkpoint := false
		for _, c := range pending {
			if c.fn == nil {
				checkpoint = true
				continue
			}
			err := c.fn(w)
			kept, isKept := storage.Kept(err)
			switch {
			case err == nil:
				c.err = nil
			case isKept:
				c.err = kept
			case err == storage.ErrNothingToWrite:
				c.err = nil
			default:
				c.err, failed = err, c
				return errBatchMember
			}
		}
		if w.record() == nil && !(checkpoint && h.j.records > 0) {
			return nil
		}
		if w.record() != nil && h.version < SchemaVersion {
			if err := upgradeSchema(w, h.version); err != nil {
				return err
			}
		}
		rec := w.record()
		lost := false
		if !checkpoint && !w.mustCommit && h.j.records < journalMaxRecords && h.j.size+int64(len(rec)) <= int64(journalMaxBytes) {
			err := h.j.append(baseOf(h.tx), rec)
			if err == nil {
				s.group.journals.Add(1)
				s.markWalked()
				return nil
			} else if err != errJournalLost {
				return err
			}
			lost = true // the transaction holds what the journal held: commit it
		}
		return s.commitHeld(h, lost)
	})
	return failed, err
}

// commitHeld commits the held transaction to bbolt, which then holds every
// write the journal held, empties the journal (resetting the file at its
// path if the one written was lost) and begins the next transaction.
func (s *Engine) commitHeld(h *heldLog, lost bool) error {
	txid := uint64(h.tx.ID())
	if err := h.tx.Commit(); err != nil {
		return err
	}
	s.group.commits.Add(1)
	s.wrote(h.file, txid)
	h.version = SchemaVersion
	if err := h.j.empty(lost); err != nil {
		return err
	}
	if lost {
		h.waiters.close()
		h.waiters = watchWaiters(s.journalPath(), h.file.Mode().Perm())
	}
	tx, err := h.db.Begin(true)
	if err != nil {
		return err
	}
	h.tx = tx
	packAppendBuckets(tx)
	return nil
}

// hold opens the log, waiting up to timeout for its lock, and begins the
// write transaction with the journal replayed into it; a log already held is
// returned as it is. A log that does not exist is made if create is set (the
// batch writes); otherwise hold returns errNoLog.
func (s *Engine) hold(timeout time.Duration, create bool) (*heldLog, error) {
	g := s.group
	if h := g.held; h != nil {
		if h.replaced(s.path) {
			s.letGo(nil, false)
		} else {
			return h, nil
		}
	}
	if err := s.checkFile(); errors.Is(err, os.ErrNotExist) {
		if !create {
			return nil, errNoLog
		}
		if err := s.create(); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	db, err := s.open(false, timeout)
	if err != nil {
		return nil, err
	}
	g.opens.Add(1)
	h := &heldLog{db: db, since: time.Now()}
	err = s.guard(func() error {
		if h.file, err = os.Stat(s.path); err != nil {
			return err
		}
		if h.tx, err = db.Begin(true); err != nil {
			return err
		}
		if h.j, err = readJournal(s.journalPath(), baseOf(h.tx)); err != nil {
			return err
		}
		if _, err := h.j.replay(h.tx); err != nil {
			return err
		}
		if h.version, err = checkSchema(plainTx(h.tx), s.path); err != nil {
			return err
		}
		h.j.takeMode(h.file.Mode().Perm())
		h.j.open()
		packAppendBuckets(h.tx)
		return nil
	})
	if err != nil {
		if h.tx != nil {
			s.guard(h.tx.Rollback)
		}
		if h.j != nil {
			h.j.close()
		}
		closeDB(db, err)
		return nil, err
	}
	h.waiters = watchWaiters(s.journalPath(), h.file.Mode().Perm())
	g.held = h
	return h, nil
}

// replaced reports whether the file at path is no longer the one held (it
// was removed, or another took its place).
func (h *heldLog) replaced(path string) bool {
	info, err := os.Stat(path)
	if err != nil {
		return true
	}
	return !os.SameFile(info, h.file)
}

// letGo rolls the held transaction back (the journal keeps its writes) and
// closes the log; err is what ended the hold, if anything did. With yield,
// it then waits a moment for the processes that wait for the log to get it.
func (s *Engine) letGo(err error, yield bool) {
	h := s.group.held
	if h == nil {
		return
	}
	s.group.held = nil
	if err == nil && h.j.records > 0 && h.j.f != nil && !h.j.intact(h.j.size) {
		// The journal went (removed, replaced, cut short) with writes only it
		// and the transaction hold: bbolt must hold them before the log goes.
		if cerr := s.guard(func() error { return s.commitHeld(h, true) }); cerr != nil {
			err = cerr
		}
	}
	h.j.close()
	if rerr := s.guard(h.tx.Rollback); err == nil && errors.As(rerr, new(damagedPage)) {
		err = rerr
	}
	closeDB(h.db, err)
	if yield {
		h.waiters.yield()
	}
	h.waiters.close()
}
