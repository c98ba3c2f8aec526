package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// querier is what a transaction's reads and writes run on: a pgx.Tx
// (verify), View's connection, or a pipelined write transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// pipelined is a write transaction that sends its statements with the
// next one whose answer it needs: BEGIN goes with the first read, the writes
// since a read go with the next read, and the last writes with COMMIT. A
// lifecycle's transaction then costs a round trip per read instead of one
// per statement. A write's error is returned by the read or the commit it
// went with: the whole transaction fails, as it would have.
type pipelined struct {
	conn    *pgxpool.Conn
	pending *pgx.Batch // not sent yet
	// beforeSend, if set, queues what its owner held back (rows it puts
	// in one statement) before anything is sent.
	beforeSend func()
	// sent says a statement was sent; noReads that a read is refused
	// (errRead): the transaction decides on recent rows. refused says one
	// was, whatever its caller made of the error: the transaction is not
	// committed then.
	sent, noReads, refused bool
	released               bool // the connection went back to the pool
	// schema is the schema version check sent with the first batch, if
	// any (checkSchema).
	schema *schemaCheck
}

// schemaCheck is the read of the log's schema version a transaction sends
// with its first statements, where it would otherwise cost a round trip of
// its own before them: the rest of the transaction counts only once it
// says this build's version.
type schemaCheck struct {
	sent, current bool
}

// errSchemaNotCurrent fails a transaction whose schema check did not find
// this build's version (or could not read it): it is rolled back, and the
// engine migrates (or says why not) before it runs again.
var errSchemaNotCurrent = errors.New("pgstore: the log's schema is not this build's")

// checkSchema sends the schema version's read with the transaction's first
// statements.
func (t *pipelined) checkSchema() {
	t.schema = &schemaCheck{}
	t.pending.Queue(`SELECT value FROM undolog_meta WHERE key = 'schema_version'`).QueryRow(func(row pgx.Row) error {
		var v int64
		if err := row.Scan(&v); err != nil || uint64(v) != SchemaVersion {
			return errSchemaNotCurrent
		}
		t.schema.current = true
		return nil
	})
}

// held queues what the transaction's owner held back.
func (t *pipelined) held() {
	if t.beforeSend != nil {
		t.beforeSend()
	}
}

var _ querier = (*pipelined)(nil)

// beginPipelined begins a transaction with the statements of begin, sent
// with the first read.
func beginPipelined(ctx context.Context, pool *pgxpool.Pool, begin []string) (*pipelined, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	t := &pipelined{conn: conn, pending: &pgx.Batch{}}
	for _, sql := range begin {
		t.pending.Queue(sql)
	}
	return t, nil
}

// Exec queues a write; its command tag is not known.
func (t *pipelined) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t.pending.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

// send sends what is queued with b's statements after it; the caller reads
// b's results from the BatchResults returned, then closes it.
func (t *pipelined) send(ctx context.Context, b *pgx.Batch) (pgx.BatchResults, error) {
	if t.noReads {
		t.refused = true
		return nil, errRead
	}
	t.sent = true
	t.held()
	queued := t.pending
	t.pending = &pgx.Batch{}
	n := queued.Len()
	queued.QueuedQueries = append(queued.QueuedQueries, b.QueuedQueries...)
	if t.schema != nil {
		t.schema.sent = true
	}
	br := t.conn.SendBatch(ctx, queued)
	for _, q := range queued.QueuedQueries[:n] {
		var err error
		if q.Fn != nil {
			err = q.Fn(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			br.Close()
			return nil, err
		}
	}
	return br, nil
}

// QueryRow and Query send what is queued first, through send (which puts
// in what was held back: its INSERT holds its place in the queue already).
func (t *pipelined) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.noReads {
		t.refused = true
		return errRow{errRead}
	}
	if t.pending.Len() == 0 {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br, err := t.send(ctx, b)
	if err != nil {
		return errRow{err}
	}
	return batchRow{br.QueryRow(), br}
}

func (t *pipelined) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.noReads {
		t.refused = true
		return nil, errRead
	}
	if t.pending.Len() == 0 {
		return t.conn.Query(ctx, sql, args...)
	}
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

// SendBatch sends what is queued, then b.
func (t *pipelined) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br, err := t.send(ctx, b)
	if err != nil {
		return errBatch{err}
	}
	return br
}

func (t *pipelined) flush(ctx context.Context) error {
	br, err := t.send(ctx, &pgx.Batch{})
	if err != nil {
		return err
	}
	return br.Close()
}

// commit sends what is queued and COMMIT, and with publish the feed's
// publish after it, in the same round trip, if it has the feed's lock at
// once (published says it did). A statement before COMMIT that the server
// says failed rolled the transaction back (err is the server's); a COMMIT
// the server refused too. Any other failure is commitInDoubt: the answers
// of a batch are flushed only at its end, so a connection lost with none
// of them may have lost a commit's. The publish runs once the commit is
// made, in a transaction of its own: its failure leaves the changes queued,
// for the next publish, and fails nothing.
func (t *pipelined) commit(ctx context.Context, publish bool) (published bool, err error) {
	if t.schema != nil && !t.schema.sent {
		// Nothing was read: the schema is known before the COMMIT is sent.
		if err := t.flush(ctx); err != nil {
			return false, err
		}
	}
	t.held()
	queued := t.pending
	t.pending = &pgx.Batch{}
	queued.Queue(`COMMIT`)
	last := queued.Len() - 1
	if publish {
		queued.Queue(tryPublishSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&published) })
	}
	br := t.conn.SendBatch(ctx, queued)
	for i, q := range queued.QueuedQueries[:last+1] {
		var err error
		if q.Fn != nil {
			err = q.Fn(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			br.Close()
			var pe *pgconn.PgError
			if errors.As(err, &pe) && (i < last || pe.Severity == "ERROR") {
				return false, err
			}
			return false, commitInDoubt{err}
		}
	}
	if publish {
		if queued.QueuedQueries[last+1].Fn(br) != nil {
			published = false
		}
		br.Close() // committed, whatever the publish's end
		return published, nil
	}
	if err := br.Close(); err != nil {
		return false, commitInDoubt{err}
	}
	return false, nil
}

// release ends the transaction if it is still open and gives the
// connection back (the pool drops one left in a transaction or broken).
func (t *pipelined) release(ctx context.Context) {
	if t.released {
		return
	}
	t.released = true
	if t.conn.Conn().PgConn().TxStatus() != 'I' {
		t.conn.Exec(ctx, `ROLLBACK`)
	}
	t.conn.Release()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// batchRow is a row read with queued writes: it ends their batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow{b.err} }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
