// Package pgstore is the storage engine that keeps an effect log in a
// PostgreSQL database, for a team or a CI fleet that shares one: its
// schema and migrations, transactions with their retries, row locks, the
// change feed in commit order, and verify's index half. Like every engine it
// stores and decides nothing: the rules are package effectlog's.
//
// Writes run in READ COMMITTED transactions. A write locks the session and
// effect rows it reads (SELECT ... FOR UPDATE), so writers of one session or
// effect take turns; what two writers still race for (a new signature, a new
// session id) is a unique constraint, and a transaction that breaks one, or
// that PostgreSQL picked as a deadlock victim, runs again from its start:
// the rules then see what the other wrote. A write queues its changes with
// its commit; positions in the change feed are given after, to the queue in
// its order, under one lock (the writer's publisher, undolog_publish),
// so they follow commit order and a follower never skips a change.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage"
)

// Engine keeps the effect log in the PostgreSQL database at one URL. It
// connects on first use, and keeps a pool of connections until Close.
type Engine struct {
	url string

	// LockTimeout bounds a statement's wait for the rows (and tables)
	// another transaction holds, as --lock-timeout bounds a wait for a
	// log file's lock: past it the write fails as the log busy and wrote
	// nothing. Zero, or a URL that sets lock_timeout itself: no bound.
	LockTimeout time.Duration

	mu   sync.Mutex
	pool *pgxpool.Pool
	role string // the user the pool authenticates as: its session_user
	// beginWrite is what a write transaction begins with: BEGIN, and
	// behind a transaction pooler its lock_timeout (SET LOCAL).
	beginWrite []string
	migrated   bool // the schema is this build's
	pub        publisher

	listener listener // the connection that hears of other processes' writes

	// writes is held (shared) by each write transaction, which holds rows
	// others wait for, and by Suspend (whole).
	writes sync.RWMutex

	recent recentRows // the rows its writes left, to decide on (recent.go)

	writeTxs atomic.Int64 // writes begun, each once whatever its attempts (sendUnpreparedWhileCold)

	wrapConn func(net.Conn) net.Conn // set by tests that count what goes over the wire
}

// Suspend waits for this process's write transactions under way to end
// and keeps new ones from starting until resume is called: a process about
// to be stopped (SIGTSTP) then holds no row another writer waits for.
func (e *Engine) Suspend() (resume func()) {
	e.writes.Lock()
	return e.writes.Unlock
}

var (
	_ storage.Engine    = (*Engine)(nil)
	_ storage.Migrator  = (*Engine)(nil)
	_ storage.Suspender = (*Engine)(nil)
)

// DefaultConnectTimeout bounds a connection's making (the dial, TLS and the
// sign-in) when the URL has no connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// New returns the Engine for the database at url (postgres://...). It does
// no I/O.
func New(url string) *Engine { return &Engine{url: url} }

// connect returns the pool, made on first use.
func (e *Engine) connect(ctx context.Context) (*pgxpool.Pool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pool != nil {
		return e.pool, nil
	}
	cfg, pooling, err := poolConfig(e.url)
	if err != nil {
		return nil, fmt.Errorf("%w: log %s: %v", model.ErrInvalidInput, redactURL(e.url), err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 && !strings.Contains(e.url, "connect_timeout") {
		// Without one, a server that takes the connection and says nothing
		// (or a host that drops the packets) holds a command for minutes.
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	begin := []string{`BEGIN ISOLATION LEVEL READ COMMITTED`}
	if ms := max(e.LockTimeout.Milliseconds(), 1); e.LockTimeout > 0 && !strings.Contains(e.url, "lock_timeout") {
		if pooling.transaction {
			// A pooler keeps no setting of the connection's start; SET
			// LOCAL goes with BEGIN, in its round trip.
			begin = append(begin, fmt.Sprintf("SET LOCAL lock_timeout = %d", ms))
		} else {
			// A parameter of the connection's start, so it costs no round trip.
			cfg.ConnConfig.RuntimeParams["lock_timeout"] = fmt.Sprint(ms)
		}
	}
	if cfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement && !strings.Contains(e.url, "default_query_exec_mode") {
		e.sendUnpreparedWhileCold(cfg)
	}
	if wrap := e.wrapConn; wrap != nil {
		dial := cfg.ConnConfig.DialFunc
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return wrap(c), nil
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, e.failed(err)
	}
	e.pool, e.role, e.beginWrite = pool, cfg.ConnConfig.User, begin
	return pool, nil
}

// warmAfter is how many write transactions an engine runs before its
// connections prepare their statements.
const warmAfter = 4

// sendUnpreparedWhileCold has the connections an engine makes for its first
// warmAfter writes send each statement with its arguments in one round
// trip (the unnamed statement), where pgx's statement cache first prepares
// each new one in a round trip of its own: a process of one call (exec)
// uses each statement once or twice, and would pay a round trip more per
// batch. A process that lives on drops such a connection when it takes it
// from the pool past them, and makes one that prepares its statements,
// which saves the server their parse and plan from then on. Reads do not
// count: an exec waiting for a decision looks again and again, and would
// otherwise make a new connection for the look and the start that follow
// the decision (a sign-in, a round trip to prepare each batch, a server
// process whose caches are cold).
func (e *Engine) sendUnpreparedWhileCold(cfg *pgxpool.Config) {
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		if e.writeTxs.Load() < warmAfter {
			cc.DefaultQueryExecMode = pgx.QueryExecModeExec
		}
		return nil
	}
	cfg.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) {
		return e.writeTxs.Load() < warmAfter || c.Config().DefaultQueryExecMode != pgx.QueryExecModeExec, nil
	}
}

// DefaultPoolSize is how many connections an engine keeps at most, unless its
// URL says (pool_max_conns): writers of different sessions commit at once,
// and PostgreSQL flushes their commits together.
const DefaultPoolSize = 16

// PoolConfig is the pool an engine makes for url (the benchmark's plain-SQL
// floor uses the same).
func PoolConfig(url string) (*pgxpool.Config, error) {
	cfg, _, err := poolConfig(url)
	return cfg, err
}

// poolConfig is PoolConfig, and what url says of a pooler in front of the
// server (its parameters taken out).
func poolConfig(url string) (*pgxpool.Config, pooling, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, pooling{}, err
	}
	p, err := takePooling(&cfg.ConnConfig.Config)
	if err != nil {
		return nil, pooling{}, err
	}
	if p.transaction && !strings.Contains(url, "default_query_exec_mode") {
		// A transaction pooler keeps no prepared statement between
		// transactions: each statement goes with its arguments in one
		// round trip (the unnamed statement), never described first.
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultPoolSize
	}
	return cfg, p, nil
}

// Close closes the pool; the engine connects again if used again.
func (e *Engine) Close() error {
	// A publish that waits longer for the feed's lock (another holds it)
	// is given up: the changes stay queued, for the next publish of any
	// process, as a process killed after its commit leaves them.
	wait, cancel := context.WithTimeout(context.Background(), closePublishWait)
	e.waitPublished(wait)
	cancel()
	e.pub.mu.Lock()
	if e.pub.stop != nil {
		e.pub.stop()
		e.pub.ctx, e.pub.stop = nil, nil
	}
	e.pub.mu.Unlock()
	e.stopListening() // first: a listener that polls reads through the pool
	e.mu.Lock()
	pool := e.pool
	e.pool, e.migrated = nil, false
	e.mu.Unlock()
	if pool != nil {
		pool.Close()
	}
	return nil
}

// failed says what went wrong with the server, in one line.
func (e *Engine) failed(err error) error {
	// The caller's context ending passes as it is; a connect timeout (a
	// deadline of the connection's own) is the server's failure.
	var ce *pgconn.ConnectError
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &ce) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == insufficientPrivilege:
			return e.denied(pe)
		case pe.Code == "57014", pe.Code == "55P03": // a statement cancelled (statement_timeout), a lock not had within lock_timeout
			// The server rolled the transaction back: nothing was written, as
			// when a log file is held past the lock timeout.
			return fmt.Errorf("%w: log %s: %s (SQLSTATE %s)", model.ErrBusy, redactURL(e.url), pe.Message, pe.Code)
		case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03":
			// A connection exception, the server shutting down or starting
			// up: it may be back in a moment.
			return unavailable{fmt.Errorf("log %s: %s (SQLSTATE %s)", redactURL(e.url), pe.Message, pe.Code)}
		}
		return fmt.Errorf("log %s: %s (SQLSTATE %s)", redactURL(e.url), pe.Message, pe.Code)
	}
	// pgx puts each address it tried on a line of its own: one line here,
	// each reason once.
	var parts []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.Join(strings.Fields(line), " "); line != "" && !slices.Contains(parts, line) {
			parts = append(parts, line)
		}
	}
	msg := strings.ReplaceAll(strings.Join(parts, "; "), ":; ", ": ")
	// No answer from the server (refused, unreachable, timed out, the
	// connection cut): it may be back in a moment.
	return unavailable{fmt.Errorf("log %s: %s", redactURL(e.url), msg)}
}

// unavailable is a failure to reach the server (model.ErrUnavailable),
// worded as the server's error alone.
type unavailable struct{ err error }

func (u unavailable) Error() string        { return u.err.Error() }
func (u unavailable) Unwrap() error        { return u.err }
func (u unavailable) Is(target error) bool { return target == model.ErrUnavailable }

// View runs fn in a read-only transaction that sees one snapshot of the log
// (REPEATABLE READ). A database without undolog's tables reads as empty.
func (e *Engine) View(ctx context.Context, fn func(storage.ReadTx) error) error {
	pool, err := e.connect(ctx)
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return e.failed(err)
	}
	defer func() {
		// A connection left in a transaction would be dropped by the pool.
		if conn.Conn().PgConn().TxStatus() != 'I' {
			conn.Exec(context.WithoutCancel(ctx), `ROLLBACK`)
		}
		conn.Release()
	}()
	version, err := beginRead(ctx, conn)
	if err != nil {
		return e.failed(err)
	}
	switch {
	case version == 0:
		return nil
	case version > SchemaVersion:
		return newerSchema(e.url, version)
	}
	r := reader{ctx: ctx, tx: conn}
	if err := fn(r); err != nil {
		return e.wrapped(err)
	}
	_, err = conn.Exec(ctx, `COMMIT`)
	return e.failed0(err)
}

// beginRead begins View's transaction and reads the log's schema version
// with it, in one round trip (BEGIN, then the existence of undolog_meta and
// the version, took three); 0 for a database without undolog's tables.
func beginRead(ctx context.Context, conn *pgxpool.Conn) (uint64, error) {
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	var v int64
	b.Queue(`SELECT value FROM undolog_meta WHERE key = 'schema_version'`).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&v); !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return nil
	})
	err := conn.SendBatch(ctx, b).Close()
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // no such table
		return 0, nil
	}
	return uint64(v), err
}

// maxAttempts bounds how often a write runs again after a conflict.
const maxAttempts = 30

// Update runs fn in a READ COMMITTED transaction, again from the start after
// a deadlock, a serialization failure or a unique constraint another writer
// won, and commits it with its change-feed positions.
func (e *Engine) Update(ctx context.Context, fn func(storage.WriteTx) error) error {
	return e.update(ctx, fn, false)
}

// UpdateUnflushed runs fn like Update in a transaction that commits with
// synchronous_commit off: its commit does not wait for the WAL flush. The
// server flushes it within three wal_writer_delay, or with the next
// synchronous commit (the WAL is written in order); only a crash of the
// server loses it.
func (e *Engine) UpdateUnflushed(ctx context.Context, fn func(storage.WriteTx) error) error {
	return e.update(ctx, fn, true)
}

func (e *Engine) update(ctx context.Context, fn func(storage.WriteTx) error, unflushed bool) error {
	pool, err := e.connect(ctx)
	if err != nil {
		return err
	}
	e.mu.Lock()
	checkSchema := !e.migrated
	e.mu.Unlock()
	e.writeTxs.Add(1)
	useRecent := true
	for attempt := 1; ; attempt++ {
		outcome, onRecent, err := e.updateOnce(ctx, pool, fn, useRecent, unflushed, checkSchema)
		if checkSchema {
			checkSchema = false
			if errors.Is(err, errSchemaNotCurrent) {
				// Looked at alone, migrated if it is older.
				if err := e.migrate(ctx, pool); err != nil {
					return err
				}
				attempt--
				continue
			}
		}
		var doubt commitInDoubt
		if onRecent != nil && (err != nil || outcome == errNothingWritten) && !errors.As(err, &doubt) {
			// Decided on recent rows that had changed, or read more, or
			// wrote nothing (and so checked nothing): decide again on a
			// read.
			e.recent.forget(onRecent.effect, onRecent.session)
			useRecent = false
			attempt--
			continue
		}
		if outcome == errNothingWritten {
			outcome = nil
		}
		if err == nil || !retryable(err) || attempt == maxAttempts {
			if err != nil {
				return e.wrapped(err)
			}
			return outcome
		}
		// Let the writer that won finish before looking again.
		time.Sleep(time.Duration(rand.IntN(attempt*2000)+200) * time.Microsecond)
	}
}

// updateOnce is one attempt of Update: err is a failure (the transaction
// rolled back), outcome what fn returned through KeepWrites (committed).
//
// With checkSchema, the log's schema version is read with the transaction's
// first statements: unless it read this build's, the attempt is
// errSchemaNotCurrent.
func (e *Engine) updateOnce(ctx context.Context, pool *pgxpool.Pool, fn func(storage.WriteTx) error, useRecent, unflushed, checkSchema bool) (outcome error, on *onRecent, err error) {
	e.writes.RLock()
	defer e.writes.RUnlock()
	e.pub.writing(+1)
	defer e.pub.writing(-1)
	e.mu.Lock()
	role, begin := e.role, e.beginWrite
	e.mu.Unlock()
	tx, err := beginPipelined(ctx, pool, begin)
	if err != nil {
		return nil, nil, err
	}
	if checkSchema {
		tx.checkSchema()
	}
	if unflushed {
		tx.Exec(ctx, `SET LOCAL synchronous_commit = off`) // sent with the transaction's first statements
	}
	defer tx.release(context.WithoutCancel(ctx))
	defer func() {
		switch {
		case !checkSchema:
		case tx.schema.current:
			e.mu.Lock()
			e.migrated = true
			e.mu.Unlock()
		default:
			// Whatever fn made of it: what it read or wrote was not on
			// this build's schema (a COMMIT of an aborted transaction
			// rolls it back without an error).
			outcome, err = nil, errSchemaNotCurrent
		}
	}()
	w := &writer{reader: reader{ctx: ctx, tx: tx, forUpdate: true}, role: role, pipe: tx}
	if useRecent {
		w.recent = &e.recent
	}
	tx.beforeSend = func() { w.queueHistory(); w.checkRecent() }
	err = fn(w)
	if kept, ok := storage.Kept(err); ok {
		outcome, err = kept, nil
	}
	if tx.refused {
		return nil, w.onRecent, errRead // whatever fn made of it, it did not read
	}
	switch {
	case err == storage.ErrNothingToWrite:
		return errNothingWritten, w.onRecent, nil
	case err != nil:
		return nil, w.onRecent, err
	}
	queued := w.queueChanges()
	if w.wakes {
		tx.Exec(ctx, wakeSQL) // sent with the COMMIT
	}
	// A write whose caller goes on at its commit (a call starts) leaves
	// the publish to the next write or the publisher.
	carry := !w.goesOn && e.pub.carry(queued)
	published, err := tx.commit(ctx, carry)
	if carry {
		e.pub.mu.Lock()
		if e.pub.carried(err == nil, published) {
			// The feed's lock was held: the publisher waits for it.
			e.startPublisher(pool)
		}
		e.pub.mu.Unlock()
	}
	if err != nil {
		return nil, w.onRecent, err
	}
	e.recent.keep(&w.wrote)
	// The connection goes back first: the publish takes it, and a process
	// of one call then never opens a second.
	tx.release(ctx)
	if queued && !carry {
		e.publishLater(pool)
	}
	return outcome, w.onRecent, nil
}

// publishSQL gives positions to every change queued (undolog_publish),
// waiting for the feed's lock; tryPublishSQL only if it has it at once
// (false otherwise): a write's batch never waits behind a publish.
const (
	publishSQL    = `SELECT undolog_publish(true, NULL, NULL, NULL, NULL)`
	tryPublishSQL = `SELECT undolog_publish(false, NULL, NULL, NULL, NULL)`
)

// publishGap is the least time between the starts of two publishes of one
// engine, and between a write that asks for one and its publish: the
// changes of writes committed meanwhile go in the next, so that under load
// a publish gives positions to many writes' changes at once (a write of a
// quiet engine publishes with its commit: carry). A reader of the feed
// waiting for one (SyncFeed, Close) does not wait out the gap.
const publishGap = 25 * time.Millisecond

// publishWriteWait bounds a publish's wait, past its gap, for the writes of
// its engine under way, one of which sends it with its commit.
const publishWriteWait = time.Second

// publisher gives positions to the changes this engine's writes queued, one
// publish at a time, after their commits. undolog_publish moves the whole
// queue, every process's, into the feed, in the order it was queued: a
// write's changes come after those of every write committed before it
// began, and a follower sees a position only after every lower one.
type publisher struct {
	mu      sync.Mutex
	ctx     context.Context // the publishes'; Close ends it
	stop    context.CancelFunc
	rescued time.Time     // when SyncFeed last looked for changes others left queued
	asked   uint64        // writes that queued changes
	done    uint64        // of those, the ones a publish ended after
	running bool          // a goroutine runs publishes until done == asked
	ended   chan struct{} // closed (and replaced) when a publish ends
	urge    chan struct{} // a reader waits: no gap before the next
	last    time.Time     // when the newest publish began
	asking  time.Time     // when the write that started the publisher committed
	// inflight counts this engine's writes under way; quiet is closed
	// (and replaced) when it falls to zero.
	inflight int
	quiet    chan struct{}
	// sending: the publisher sends a publish now. carrying: a write sends
	// one with its commit, for the writes counted up to carryUpTo.
	sending, carrying bool
	carryUpTo         uint64
}

// carry says whether a write about to commit sends the publish with its
// COMMIT, in its round trip: when the publisher waits out its gap (it then
// sends none: this one covers what it waited for), or when no other write
// of this engine is under way and this one queued changes (a process of
// one call, or a quiet one, publishes each write at once, on the
// connection the write holds, whatever the time between its writes). Under
// load the publisher gives one publish to many writes. The write counts
// itself among those asking until it is carried.
func (p *publisher) carry(queued bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sending || p.carrying || !p.running && (!queued || p.inflight > 1) {
		return false
	}
	if p.ended == nil {
		p.ended, p.urge = make(chan struct{}), make(chan struct{}, 1)
	}
	p.asked++
	p.carrying, p.carryUpTo = true, p.asked
	return true
}

// carried ends what carry began, with p.mu held: with the commit made, a
// publish that had the feed's lock covered every write counted before it
// (its failure leaves their changes queued, as the publisher's does); one
// that found the lock held leaves them to the publisher, which it says to
// start.
func (p *publisher) carried(committed, published bool) (startPublisher bool) {
	p.carrying = false
	switch {
	case !committed:
		// Rolled back, nothing of it to publish: it takes its count back,
		// so that no one waits for a publish of it (the publisher, woken
		// below, publishes what others asked).
		p.asked--
	case !published:
		startPublisher = true
	case p.carryUpTo > p.done:
		p.done = p.carryUpTo
		p.last = time.Now()
	}
	close(p.ended)
	p.ended = make(chan struct{})
	return startPublisher
}

// writing counts a write of this engine in (+1) or out (-1).
func (p *publisher) writing(delta int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.quiet == nil {
		p.quiet = make(chan struct{})
	}
	p.inflight += delta
	if p.inflight == 0 {
		close(p.quiet)
		p.quiet = make(chan struct{})
	}
}

// publishLater has this engine's publisher give positions to what a
// committed write queued.
func (e *Engine) publishLater(pool *pgxpool.Pool) {
	p := &e.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked++
	e.startPublisher(pool)
}

// startPublisher starts the publisher unless it runs; p.mu is held.
func (e *Engine) startPublisher(pool *pgxpool.Pool) {
	p := &e.pub
	if p.running {
		return
	}
	if p.ended == nil {
		p.ended, p.urge = make(chan struct{}), make(chan struct{}, 1)
	}
	if p.ctx == nil {
		p.ctx, p.stop = context.WithCancel(context.Background())
	}
	p.running, p.asking = true, time.Now()
	go e.runPublisher(pool, p.ctx)
}

func (e *Engine) runPublisher(pool *pgxpool.Pool, ctx context.Context) {
	p := &e.pub
	for {
		p.mu.Lock()
		if p.done == p.asked {
			p.running = false
			p.mu.Unlock()
			return
		}
		gap := publishGap - time.Since(later(p.last, p.asking))
		p.mu.Unlock()
		if gap > 0 && !p.wait(gap) {
			// Past the gap, a write of this engine under way (exec's
			// Finish after a quick command) sends the publish with its
			// COMMIT (carry), on the connection it holds; waited for
			// until this engine's writes are over (or one carried it),
			// publishWriteWait at most.
			p.mu.Lock()
			busy, quiet, ended := p.inflight > 0, p.quiet, p.ended
			p.mu.Unlock()
			if busy {
				t := time.NewTimer(publishWriteWait)
				select {
				case <-t.C:
				case <-quiet:
				case <-ended:
				case <-p.urge:
				}
				t.Stop()
			}
		}
		p.mu.Lock()
		if p.carrying {
			// A write sends it with its commit: wait for that, then
			// see what is left.
			ended := p.ended
			p.mu.Unlock()
			<-ended
			continue
		}
		if p.done == p.asked {
			// A write carried what it waited for (exec's end after its
			// start, whose publish it left): none to send.
			p.mu.Unlock()
			continue
		}
		upTo := p.asked
		p.last, p.sending = time.Now(), true
		p.mu.Unlock()
		// A failure leaves the changes queued: the next publish, of this
		// process or another, gives them their positions.
		// It holds the feed's lock: Suspend waits for it, as for a write.
		var ok bool
		e.writes.RLock()
		_ = pool.QueryRow(ctx, publishSQL).Scan(&ok)
		e.writes.RUnlock()
		p.mu.Lock()
		p.sending = false
		p.done = max(p.done, upTo)
		close(p.ended)
		p.ended = make(chan struct{})
		p.mu.Unlock()
	}
}

// wait waits d, or less if a reader urges a publish; it says which.
func (p *publisher) wait(d time.Duration) (urged bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return false
	case <-p.urge:
		return true
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

var _ storage.FeedSyncer = (*Engine)(nil)

// closePublishWait bounds Close's wait for this engine's publishes.
const closePublishWait = 2 * time.Second

// rescueEvery is how often at most SyncFeed gives positions to changes
// other processes left queued (one killed between its commit and its
// publish), if it can take the feed's lock at once.
const rescueEvery = time.Second

// SyncFeed waits until the changes of this engine's writes committed so far
// have positions (or a publish of them failed), so that a process reads its
// own writes in the feed. At most once in rescueEvery it also publishes what
// others left queued, so that a follower sees a change whose writer died
// before it gave positions without waiting for the next write.
func (e *Engine) SyncFeed(ctx context.Context) error {
	if err := e.waitPublished(ctx); err != nil {
		return err
	}
	p := &e.pub
	p.mu.Lock()
	rescue := time.Since(p.rescued) >= rescueEvery
	if rescue {
		p.rescued = time.Now()
	}
	p.mu.Unlock()
	if !rescue {
		return nil
	}
	pool, err := e.connect(ctx)
	if err != nil {
		return nil // the read that follows says
	}
	// Only tries for the lock (whoever holds it publishes), and fails
	// harmlessly on a log of an older schema or for a role without the
	// right: the feed then waits for the next write, as it did.
	var ok *bool
	_ = pool.QueryRow(ctx, `SELECT CASE WHEN EXISTS (SELECT 1 FROM undolog_changes_pending)
		THEN undolog_publish_queue(false) END`).Scan(&ok)
	return nil
}

// waitPublished waits until this engine's publishes of the writes committed
// so far have ended.
func (e *Engine) waitPublished(ctx context.Context) error {
	p := &e.pub
	p.mu.Lock()
	target := p.asked
	for p.done < target {
		ended := p.ended
		p.mu.Unlock()
		select {
		case p.urge <- struct{}{}:
		default:
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return nil
}

// commitInDoubt is a commit whose answer was lost.
type commitInDoubt struct{ err error }

func (c commitInDoubt) Error() string { return c.err.Error() }
func (c commitInDoubt) Unwrap() error { return c.err }

// retryable says whether a transaction that failed with err is worth
// running again: PostgreSQL asked for it, or another writer took first
// what this one was about to (a unique key the rules looked up before).
func retryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01", "23505": // serialization failure, deadlock, unique violation
		return true
	}
	return false
}

// wrapped turns a server's error into one line naming the log; the rules'
// own errors pass as they are.
func (e *Engine) wrapped(err error) error {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	var ne net.Error
	var doubt commitInDoubt
	switch {
	case errors.As(err, &doubt):
		return fmt.Errorf("%w: %v: the connection was lost as the write was committed, so it may or may not have been made (look before repeating it)",
			model.ErrInDoubt, e.failed(doubt.err))
	case errors.As(err, &pe) || errors.As(err, &ce) || pgconn.Timeout(err) || errors.As(err, &ne),
		// A connection lost mid-transaction: the server went, or ended it.
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, pgx.ErrTxClosed):
		return e.failed(err)
	}
	return err
}

func (e *Engine) failed0(err error) error {
	if err == nil {
		return nil
	}
	return e.failed(err)
}

// migrationLock is the advisory lock key that keeps two migrations apart.
const migrationLock = 0x756e646f6c6f67 // "undolog"

// insufficientPrivilege is the SQLSTATE of a refused privilege, which
// undolog's own checks raise too.
const insufficientPrivilege = "42501"

// denied is a refusal by the database, in one line that names the role.
func (e *Engine) denied(pe *pgconn.PgError) error {
	msg := pe.Message
	if !strings.HasPrefix(msg, "the database role ") {
		msg = fmt.Sprintf("the database role %s may not change this log (%s)", e.roleName(), msg)
	}
	return fmt.Errorf("%w: log %s: %s", model.ErrDenied, redactURL(e.url), msg)
}

func (e *Engine) roleName() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.role
}

// Migrate moves the database to this build's schema now; it returns the
// schema version the database had and the one it has.
func (e *Engine) Migrate(ctx context.Context) (before, after uint64, err error) {
	pool, err := e.connect(ctx)
	if err != nil {
		return 0, 0, err
	}
	// A database at this build's schema takes no lock: a lock any role may
	// hold (an advisory one) would otherwise fail every migrate.
	if v, err := currentVersion(ctx, pool); err == nil && v == SchemaVersion {
		before = v
	} else if before, err = e.migrateOnce(ctx, pool); err != nil {
		return 0, 0, err
	}
	if err := e.regate(ctx, pool); err != nil {
		return 0, 0, err
	}
	return before, SchemaVersion, nil
}

// regate makes the history gates anew (undolog_gate_history, the migration
// to queueSchema) when the tables changed owner since they were made, if
// this role owns them: their WHEN clauses let the owner they were made for
// through.
func (e *Engine) regate(ctx context.Context, pool *pgxpool.Pool) error {
	g, err := readGateOwners(ctx, pool)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // verify says so
	case err == nil && g.stale() && g.mine:
		_, err = pool.Exec(ctx, `SELECT undolog_gate_history()`)
	}
	return e.wrapped(err)
}

// migrate moves the database to this build's schema, once per engine.
func (e *Engine) migrate(ctx context.Context, pool *pgxpool.Pool) error {
	e.mu.Lock()
	done := e.migrated
	e.mu.Unlock()
	if done {
		return nil
	}
	// A database at this build's schema is read in one query, without the
	// lock or a transaction: a process per command pays it each time.
	v, err := currentVersion(ctx, pool)
	var pe *pgconn.PgError
	switch {
	case err == nil && v == SchemaVersion:
		e.mu.Lock()
		e.migrated = true
		e.mu.Unlock()
		return nil
	case err == nil && v > SchemaVersion:
		return newerSchema(e.url, v)
	case err != nil && !errors.Is(err, pgx.ErrNoRows) && !(errors.As(err, &pe) && pe.Code == "42P01"): // 42P01: no such table
		return e.wrapped(err)
	}
	_, err = e.migrateOnce(ctx, pool)
	return err
}

// currentVersion reads the schema version in one query, without a lock
// or a transaction; an error where the tables are not there.
func currentVersion(ctx context.Context, pool *pgxpool.Pool) (uint64, error) {
	var v int64
	err := pool.QueryRow(ctx, `SELECT value FROM undolog_meta WHERE key = 'schema_version'`).Scan(&v)
	return uint64(v), err
}

// migrateOnce applies the migrations the database lacks in one
// transaction, under an advisory lock of the transaction's (a pooler in
// transaction mode keeps no session's), so that two processes starting at
// once apply each migration once. A transaction that waited for the lock
// may still find "no tables" in its connection's catalog cache (from an
// earlier read): its first CREATE then fails as a duplicate, and it runs
// again, in a new transaction that reads the catalog afresh. A role that
// may not change the schema (an agent's) is told to have the owner migrate.
func (e *Engine) migrateOnce(ctx context.Context, pool *pgxpool.Pool) (before uint64, err error) {
	for attempt := 1; ; attempt++ {
		before, err = e.migrateTx(ctx, pool)
		if err == nil || !duplicate(err) || attempt == 3 {
			break
		}
	}
	if err != nil {
		return 0, e.wrapped(err)
	}
	e.mu.Lock()
	e.migrated = true
	e.mu.Unlock()
	return before, nil
}

// duplicate says err is a CREATE of what exists already: a table, an
// object, or the catalog row of a type.
func duplicate(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P07" || pe.Code == "42710" || pe.Code == "23505")
}

// migrateTx is one attempt of migrateOnce.
func (e *Engine) migrateTx(ctx context.Context, pool *pgxpool.Pool) (before uint64, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return err
		}
		version, err := schemaVersion(ctx, tx)
		if err != nil {
			return err
		}
		before = version
		if version > SchemaVersion {
			return newerSchema(e.url, version)
		}
		for v := version; v < SchemaVersion; v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				var pe *pgconn.PgError
				if errors.As(err, &pe) && pe.Code == insufficientPrivilege {
					return fmt.Errorf("%w: log %s has schema version %d and this undolog needs %d, which the database role %s may not create (%s): run `undolog migrate` as the database's owner",
						model.ErrDenied, redactURL(e.url), version, SchemaVersion, e.roleName(), pe.Message)
				}
				return fmt.Errorf("migration to schema %d: %w", v+1, err)
			}
		}
		if version < SchemaVersion {
			_, err = tx.Exec(ctx, `INSERT INTO undolog_meta (key, value) VALUES ('schema_version', $1)
				ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, int64(SchemaVersion))
		}
		return err
	})
	return before, err
}

// schemaVersion is the database's schema version; 0 without undolog's tables.
func schemaVersion(ctx context.Context, tx querier) (uint64, error) {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('undolog_meta') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return 0, err
	}
	var v int64
	err := tx.QueryRow(ctx, `SELECT value FROM undolog_meta WHERE key = 'schema_version'`).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return uint64(v), err
}

func newerSchema(url string, version uint64) error {
	return fmt.Errorf("%w: log %s has schema version %d; this undolog reads up to %d, upgrade undolog",
		model.ErrNewerSchema, redactURL(url), version, SchemaVersion)
}

// errNothingWritten is updateOnce's outcome of a write that found nothing
// to write (storage.ErrNothingToWrite).
var errNothingWritten = errors.New("pgstore: nothing written")
