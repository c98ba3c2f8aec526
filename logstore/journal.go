package logstore

// The journal makes a write durable with one flush instead of bbolt's two.
//
// bbolt commits a transaction with two fsyncs (its pages, then its meta page)
// and rewrites every page the transaction touched: a dozen for one effect. So
// a batch of writes is made durable by appending what it put and deleted to a
// journal beside the file (one append, one fsync), and stays uncommitted in
// the committer's bbolt transaction (committer.go). Whoever opens the log
// next replays the journal into its own transaction before anything else, so
// it sees every write made before it. Once the journal holds
// journalMaxRecords records or would pass journalMaxBytes, when a checkpoint
// is asked for, and when a reader finds it not yet applied, the journal is
// checkpointed: committed to bbolt with the transaction that holds it, then
// emptied.
//
// Each record names the log (a random id made with it) and the bbolt
// transaction id it applies on. A checkpoint moves that id on, so a journal
// left behind by a crash between the commit and the emptying reads as
// already applied and is dropped, never applied twice; so is the journal of
// a log since deleted or replaced by another at the same path.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// JournalSuffix is added to the log's path to name its journal.
const JournalSuffix = "-journal"

// Checkpoint thresholds. The committer keeps the journal's writes in its
// transaction, so a longer journal costs a replay only when a process opens
// the log anew; a checkpoint costs a bbolt commit, cheaper per write the more
// it takes. A few dozen records, a few hundred KiB, balance the two
// (measured with `go run -C bench .`).
const (
	journalMaxRecords = 64
	journalMaxBytes   = 256 << 10
)

// A record: payload length (4 bytes), CRC-32C of the rest (4), the bbolt
// transaction id it applies on (8), the log's id (8), then the payload:
// operations, each a kind byte and length-prefixed bucket name, key and
// value (a sequence operation has the number in place of key and value).
const journalHeader = 24

const (
	opPut      = 'p'
	opDelete   = 'd'
	opSequence = 's'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// journal is a log's journal file as its holder (under the log's exclusive
// lock) knows it.
type journal struct {
	path    string
	exists  bool
	data    []byte // the valid records as read, until replayed
	size    int64  // bytes of valid records
	records int
	base    journalBase // what the records apply on
	tail    int64       // bytes after the valid records: a torn append, cut before the next
}

// readJournal reads the journal at path. A record cut short or failing its
// checksum at the end of the file is a torn append that was never
// acknowledged and is ignored; one followed by more records is damage.
func readJournal(path string) (*journal, error) {
	j := &journal{path: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, nil
	} else if err != nil {
		return nil, fmt.Errorf("read journal %s: %w", path, bare(err))
	}
	j.exists = true
	le := binary.LittleEndian
	off := 0
	for off < len(data) {
		rest := data[off:]
		if len(rest) < journalHeader || uint64(le.Uint32(rest)) > uint64(len(rest)-journalHeader) {
			break
		}
		end := journalHeader + int(le.Uint32(rest))
		if crc32.Checksum(rest[8:end], castagnoli) != le.Uint32(rest[4:]) {
			if end == len(rest) {
				break
			}
			return nil, fmt.Errorf("%w: journal %s has a damaged record at byte %d", ErrCorrupt, path, off)
		}
		base := journalBase{txid: le.Uint64(rest[8:]), log: le.Uint64(rest[16:])}
		if j.records > 0 && base != j.base {
			return nil, fmt.Errorf("%w: journal %s mixes records of transactions %d and %d", ErrCorrupt, path, j.base.txid, base.txid)
		}
		j.base = base
		j.records++
		off += end
	}
	j.data, j.size, j.tail = data[:off], int64(off), int64(len(data)-off)
	return j, nil
}

// replay applies the records to tx, whose predecessor is the transaction
// they were written on; it reports false, applying nothing, for a journal of
// an earlier transaction (already checkpointed), whose records are then
// treated as a tail to cut before the next append.
func (j *journal) replay(tx *bolt.Tx) (bool, error) {
	if j.records == 0 {
		return false, nil
	}
	if j.base != baseOf(tx) {
		j.tail += j.size
		j.data, j.size, j.records = nil, 0, 0
		return false, nil
	}
	le := binary.LittleEndian
	for off := 0; off < len(j.data); {
		end := off + journalHeader + int(le.Uint32(j.data[off:]))
		if err := applyOps(tx, j.data[off+journalHeader:end]); err != nil {
			return false, fmt.Errorf("%w: journal %s, record at byte %d: %v", ErrCorrupt, j.path, off, err)
		}
		off = end
	}
	j.data = nil // bbolt keeps what it needs until the transaction ends
	return true, nil
}

func applyOps(tx *bolt.Tx, ops []byte) error {
	r := &recordReader{buf: ops}
	for len(r.buf) > 0 && r.err == nil {
		kind, name := r.bytes(1), r.bytes(r.uint())
		if r.err != nil {
			break
		}
		b := tx.Bucket(name)
		if b == nil {
			return fmt.Errorf("no bucket %q", name)
		}
		var err error
		switch kind[0] {
		case opPut:
			key, value := r.bytes(r.uint()), r.bytes(r.uint())
			if r.err == nil {
				err = b.Put(key, value)
			}
		case opDelete:
			if key := r.bytes(r.uint()); r.err == nil {
				err = b.Delete(key)
			}
		case opSequence:
			if seq := r.uint(); r.err == nil {
				err = b.SetSequence(seq)
			}
		default:
			return fmt.Errorf("unknown operation %q", kind)
		}
		if err != nil {
			return err
		}
	}
	return r.err
}

// append makes rec, a record on base, durable: rec holds the operations
// after room for the header, which append fills in.
func (j *journal) append(base journalBase, rec []byte) error {
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("write journal %s: %w", j.path, bare(err))
	}
	defer f.Close()
	at := j.size
	if j.tail > 0 {
		if err := f.Truncate(at); err != nil {
			return fmt.Errorf("write journal %s: %w", j.path, bare(err))
		}
		j.tail = 0
	}
	le := binary.LittleEndian
	le.PutUint32(rec, uint32(len(rec)-journalHeader))
	le.PutUint64(rec[8:], base.txid)
	le.PutUint64(rec[16:], base.log)
	le.PutUint32(rec[4:], crc32.Checksum(rec[8:], castagnoli))
	if _, err = f.WriteAt(rec, at); err == nil {
		err = f.Sync()
	}
	if err != nil {
		// Not acknowledged: take the record back so that it is not replayed.
		f.Truncate(at)
		return fmt.Errorf("write journal %s: %w", j.path, bare(err))
	}
	if !j.exists {
		syncDir(j.path)
		j.exists = true
	}
	j.size += int64(len(rec))
	j.records++
	j.base = base
	return nil
}

// syncDir makes the directory entry of a new file survive a power cut.
func syncDir(path string) {
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
}

// empty drops the records once bbolt holds them. It need not be durable (the
// records name a transaction bbolt has moved past) unless the transaction ids
// may start over, as they do in a compacted file: then sync is set.
func (j *journal) empty(sync bool) error {
	if !j.exists || j.size+j.tail == 0 {
		return nil
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY, 0o600)
	if err == nil {
		err = f.Truncate(0)
		if err == nil && sync {
			err = f.Sync()
		}
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("empty journal %s: %w", j.path, bare(err))
	}
	j.data, j.size, j.records, j.tail = nil, 0, 0, 0
	return nil
}

// journalPending reports whether the journal at path holds records for the
// read transaction tx, which a reader must see: the log is checkpointed
// first. An empty journal is not opened, so that a user who may read the log
// but not its journal still reads it; a pending one must be readable.
func journalPending(path string, tx *bolt.Tx) (bool, error) {
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && info.Size() == 0 {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read journal %s: %w", path, bare(err))
	}
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("read journal %s: %w", path, bare(err))
	}
	defer f.Close()
	var head [journalHeader]byte
	if n, _ := f.ReadAt(head[:], 0); n < journalHeader {
		return true, nil // a torn first append: let a checkpoint cut it
	}
	le := binary.LittleEndian
	return journalBase{txid: le.Uint64(head[8:]), log: le.Uint64(head[16:])} == baseOf(tx), nil
}

// journalBase is what journal records apply on: a log, in the state of one
// bbolt transaction.
type journalBase struct{ txid, log uint64 }

// baseOf is the base of records written in a write transaction tx, or
// waiting for a read transaction tx: its log, at the last committed
// transaction.
func baseOf(tx *bolt.Tx) journalBase {
	txid := uint64(tx.ID())
	if tx.Writable() {
		txid--
	}
	return journalBase{txid: txid, log: btoi(tx.Bucket(bMeta).Get(keyLogID))}
}

// writeTx is a write transaction that also records what it writes, as a
// journal record.
type writeTx struct {
	*bolt.Tx
	ops recordWriter // room for a record header, then the operations
	// mustCommit is set by a write that bbolt itself must hold at once (a
	// schema upgrade, which an older undolog reads without the journal).
	mustCommit bool
}

// newWriteTx records tx's writes into buf, reused from an earlier
// transaction.
func newWriteTx(tx *bolt.Tx, buf []byte) *writeTx {
	if cap(buf) < journalHeader {
		buf = make([]byte, 0, 4<<10)
	}
	return &writeTx{Tx: tx, ops: recordWriter{buf: buf[:journalHeader]}}
}

// record is the journal record of the writes, its header yet to be filled
// in; nil when nothing was written.
func (w *writeTx) record() []byte {
	if len(w.ops.buf) == journalHeader {
		return nil
	}
	return w.ops.buf
}

func (w *writeTx) op(kind byte, bucket []byte) {
	w.ops.buf = append(w.ops.buf, kind)
	w.ops.bytes(bucket)
}

func (w *writeTx) put(bucket, key, value []byte) error {
	if value == nil {
		// Read back in this transaction, nil would read as no key at all.
		value = []byte{}
	}
	if err := w.Bucket(bucket).Put(key, value); err != nil {
		return err
	}
	w.op(opPut, bucket)
	w.ops.bytes(key)
	w.ops.bytes(value)
	return nil
}

func (w *writeTx) delete(bucket, key []byte) error {
	if err := w.Bucket(bucket).Delete(key); err != nil {
		return err
	}
	w.op(opDelete, bucket)
	w.ops.bytes(key)
	return nil
}

func (w *writeTx) nextSequence(bucket []byte) (uint64, error) {
	seq, err := w.Bucket(bucket).NextSequence()
	if err != nil {
		return 0, err
	}
	w.op(opSequence, bucket)
	w.ops.uint(seq)
	return seq, nil
}
