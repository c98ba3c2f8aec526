package pgstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/undolog/undolog/storage"
)

// Every transaction that gives change-feed positions (undolog_publish: a
// publish of what writes queued) sends a
// notification on channel, so PostgreSQL delivers it on commit, only if it
// commits, and only once the changes are in the feed. Its payload is the
// schema the log is in and the newest position given: "schema position",
// a hint only (hear reads the position from the feed).
// The name is in undolog_publish's text too.
const channel = "undolog_changes"

// wakeSQL notifies the listening engines, at its transaction's commit, that
// a decision was recorded, before the feed gives it a position (a publish
// after the commit, on a fresh connection a compile of undolog_publish
// more): position 0 in the payload, on which every wait looks again.
const wakeSQL = `SELECT pg_notify('` + channel + `', coalesce(current_schema(), '') || ' 0')`

// listenName is the application_name of the listening connection, by which
// an operator (or a test) can tell it among a log's connections.
const listenName = "undolog listen"

// Reconnecting after the listening connection dropped waits from
// minBackoff, doubling up to maxBackoff, between attempts.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 5 * time.Second
)

var _ storage.Notifier = (*Engine)(nil)

// listener is the one listening connection an Engine shares among all its
// waiters. It knows the newest position in the feed: read after LISTEN
// took effect, so a change is either counted in that read or notified
// after it, and read again on a notification of a newer one.
type listener struct {
	mu      sync.Mutex
	running bool
	stop    context.CancelFunc
	done    chan struct{}
	ready   bool          // listening, and latest read since
	latest  uint64        // newest position read from the feed
	epoch   uint64        // bumped on each (re)connection: a wait begun before it looks again
	wake    chan struct{} // closed (and replaced) on whatever a waiter may want to see
	heard   []uint64      // positions notified, for tests (kept only if record)
	record  bool
	lastErr error // why the last connection attempt failed, for tests
}

// broadcast wakes every waiter; l.mu is held.
func (l *listener) broadcast() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// WaitChange returns once a change after position after was committed (read
// from the feed when listening began, or on a notification since), or
// once the listening connection was made anew (what was notified while it
// was down is lost: the caller looks again), or when ctx ends. It connects
// the listener on first use; until it is listening, only ctx ends a wait.
func (e *Engine) WaitChange(ctx context.Context, after uint64) error {
	l := e.listen()
	l.mu.Lock()
	epoch := l.epoch
	for !(l.ready && l.latest > after) {
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
		l.mu.Lock()
		if l.epoch != epoch {
			break
		}
	}
	l.mu.Unlock()
	return nil
}

// listen returns the engine's listener, started if it is not running.
func (e *Engine) listen() *listener {
	l := &e.listener
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	if !l.running {
		ctx, stop := context.WithCancel(context.Background())
		l.running, l.stop, l.done = true, stop, make(chan struct{})
		go e.runListener(ctx, l.done)
	}
	return l
}

// stopListening ends the listener, if running, and waits for it to let its
// connection go. Its waiters are woken (they look again, and a wait after
// starts it anew).
func (e *Engine) stopListening() {
	l := &e.listener
	l.mu.Lock()
	if !l.running {
		l.mu.Unlock()
		return
	}
	stop, done := l.stop, l.done
	l.mu.Unlock()
	stop()
	<-done
	l.mu.Lock()
	l.running, l.ready = false, false
	l.epoch++
	l.broadcast()
	l.mu.Unlock()
}

// runListener keeps one connection listening until ctx ends, connecting
// again, with backoff, whenever it drops.
func (e *Engine) runListener(ctx context.Context, done chan struct{}) {
	defer close(done)
	if _, p, err := listenConfig(e.url); err == nil && p.polls() {
		e.pollFeed(ctx)
		return
	}
	l := &e.listener
	backoff := minBackoff
	for ctx.Err() == nil {
		conn, schema, latest, err := e.connectListener(ctx)
		l.mu.Lock()
		l.lastErr = err
		if err == nil {
			l.ready, l.latest = true, latest
			l.epoch++
			l.broadcast()
		}
		l.mu.Unlock()
		if err == nil {
			began := time.Now()
			e.hear(ctx, conn, schema)
			conn.Close(context.Background())
			l.mu.Lock()
			l.ready = false
			l.mu.Unlock()
			if time.Since(began) > maxBackoff {
				backoff = minBackoff
				continue // at once: a connection that lasted is worth a quick try
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// connectListener opens the listening connection, starts listening, and
// then reads the feed's newest position and the schema the log is in.
func (e *Engine) connectListener(ctx context.Context) (conn *pgx.Conn, schema string, latest uint64, err error) {
	cfg, _, err := listenConfig(e.url)
	if err != nil {
		return nil, "", 0, err
	}
	conn, err = pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, "", 0, err
	}
	fail := func(err error) (*pgx.Conn, string, uint64, error) {
		conn.Close(context.Background())
		return nil, "", 0, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return fail(err)
	}
	var feed bool
	if err := conn.QueryRow(ctx, `SELECT coalesce(current_schema(), ''), to_regclass('undolog_changes') IS NOT NULL`).Scan(&schema, &feed); err != nil {
		return fail(err)
	}
	if feed {
		// The newest position is the greatest at every schema (change rows
		// are never deleted; before publishSchema a counter kept it too).
		var n int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(max(pos), 0) FROM undolog_changes`).Scan(&n); err != nil {
			return fail(err)
		}
		latest = uint64(n)
	}
	return conn, schema, latest, nil
}

// listenConfig is the listening connection's configuration: url's, or
// behind a transaction pooler the server the URL names for listening.
func listenConfig(url string) (*pgx.ConnConfig, pooling, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, pooling{}, err
	}
	p, err := takePooling(&cfg.Config)
	if err != nil {
		return nil, p, err
	}
	if p.listenHost != "" {
		cfg.Host, cfg.Port, cfg.Fallbacks = p.listenHost, p.listenPort, nil
	}
	cfg.RuntimeParams["application_name"] = listenName
	return cfg, p, nil
}

// pollFeed stands in for the listening connection behind a transaction
// pooler without one: it reads the feed's newest position every
// pollInterval, through the pool, and wakes the waiters on a newer one.
func (e *Engine) pollFeed(ctx context.Context) {
	l := &e.listener
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		latest, err := e.newestPosition(ctx)
		l.mu.Lock()
		l.lastErr = err
		switch {
		case err != nil:
			l.ready = false
		case !l.ready:
			// As a listening connection made anew: every wait looks again.
			l.ready, l.latest = true, latest
			l.epoch++
			l.broadcast()
		case latest > l.latest:
			l.latest = latest
			l.broadcast()
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// newestPosition reads the feed's newest position; 0 before the feed's
// table is made.
func (e *Engine) newestPosition(ctx context.Context) (uint64, error) {
	pool, err := e.connect(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	err = pool.QueryRow(ctx, `SELECT coalesce(max(pos), 0) FROM undolog_changes`).Scan(&n)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // no such table
		return 0, nil
	}
	return uint64(n), err
}

// hear passes on the notifications of the log's schema until the
// connection fails or ctx ends.
func (e *Engine) hear(ctx context.Context, conn *pgx.Conn, schema string) {
	l := &e.listener
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		s, p, ok := strings.Cut(n.Payload, " ")
		pos, err := strconv.ParseUint(p, 10, 64)
		if !ok || s != schema || err != nil {
			continue // another log's, in another schema of this database
		}
		if pos == 0 {
			// A decision was recorded (wakeSQL): every wait looks again,
			// as after a new connection. Sent by any role, it costs each
			// waiter a look, no more.
			l.mu.Lock()
			l.epoch++
			l.broadcast()
			l.mu.Unlock()
			continue
		}
		l.mu.Lock()
		news := pos > l.latest
		l.mu.Unlock()
		// Any role that can connect may send a notification, with any
		// payload: it only says "look". The position waiters compare with
		// is read from the feed, so a forged one wakes nobody, and a burst
		// of notifications already counted in a read costs no more reads.
		var latest uint64
		if news {
			var n int64
			if err := conn.QueryRow(ctx, `SELECT coalesce(max(pos), 0) FROM undolog_changes`).Scan(&n); err != nil {
				return
			}
			latest = uint64(n)
		}
		l.mu.Lock()
		if l.record {
			l.heard = append(l.heard, pos)
		}
		if latest > l.latest {
			l.latest = latest
			l.broadcast()
		}
		l.mu.Unlock()
	}
}
