package pgstore

import (
	"net"
	"sync"
	"sync/atomic"
)

// Migrations are the schema's migrations, for tests that make a database
// of an earlier schema.
var Migrations = migrations

// SynchronousCommit is the synchronous_commit setting of the write
// transaction tx (a storage.WriteTx of this engine's).
func SynchronousCommit(tx any) (string, error) {
	w := tx.(*writer)
	var v string
	err := w.tx.QueryRow(w.ctx, `SELECT current_setting('synchronous_commit')`).Scan(&v)
	return v, err
}

// Wire counts what an engine sends its server: the connections it makes,
// and the round trips on them (a write followed by a read is one; a
// connection's sign-in is one more).
type Wire struct {
	mu                sync.Mutex
	Conns, RoundTrips int
}

// CountWire has e count its connections and round trips into the Wire
// returned; call it before e's first use.
func CountWire(e *Engine) *Wire {
	w := &Wire{}
	e.wrapConn = func(c net.Conn) net.Conn {
		w.mu.Lock()
		w.Conns++
		w.mu.Unlock()
		return &countedConn{Conn: c, wire: w}
	}
	return w
}

// Counts reads the counts so far.
func (w *Wire) Counts() (conns, roundTrips int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.Conns, w.RoundTrips
}

type countedConn struct {
	net.Conn
	wire  *Wire
	wrote atomic.Bool // since the last read
}

func (c *countedConn) Write(b []byte) (int, error) {
	c.wrote.Store(true)
	return c.Conn.Write(b)
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.wrote.Swap(false) {
		c.wire.mu.Lock()
		c.wire.RoundTrips++
		c.wire.mu.Unlock()
	}
	return n, err
}
