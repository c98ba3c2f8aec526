package logstore

// The journal makes a write durable with one flush instead of bbolt's two.
//
// bbolt commits a transaction with two fsyncs (its pages, then its meta page)
// and rewrites every page the transaction touched: a dozen for one effect. So
// a batch of writes is made durable by writing what it put and deleted as one
// record to a journal beside the file (one write, one fdatasync), and stays
// uncommitted in the committer's bbolt transaction (committer.go). Whoever
// opens the log next replays the journal into its own transaction before
// anything else, so it sees every write made before it. Once the journal
// holds journalMaxRecords records or would pass journalMaxBytes, when a
// checkpoint is asked for, and when a reader finds it not yet applied, the
// journal is checkpointed: committed to bbolt with the transaction that
// holds it. The next records overwrite it from the start.
//
// Each record names the log (a random id made with it) and the bbolt
// transaction id it applies on. A checkpoint moves that id on, so the
// records it committed read as leftovers from then on, never applied twice;
// so do the records of a log since deleted or replaced by another at the
// same path.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
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
//
// The file is reused in place: a checkpoint does not empty it, and the next
// records overwrite the old ones from the start. An append then changes no
// file metadata (the blocks exist, the size stays), so one fdatasync makes it
// durable without a metadata journal commit: lifecycles ran 1.2x as fast as
// with appends that grow the file. What follows the valid records is
// leftovers: records of an earlier transaction, or a torn append never
// acknowledged.
type journal struct {
	path    string
	exists  bool
	mode    os.FileMode // the file's permission bits, when it exists
	data    []byte      // the valid records as read, until replayed
	size    int64       // bytes of valid records
	records int
	base    journalBase // what the records apply on
}

// readJournal reads the records of the journal at path that apply on want,
// the log's last committed transaction. They run from the start of the file
// to the first record that is cut short, fails its checksum or applies on
// another transaction: the rest is leftovers. A record failing its checksum
// is damage, not the end, if a record on want follows it.
func readJournal(path string, want journalBase) (*journal, error) {
	j := &journal{path: path, base: want}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, nil
	} else if err != nil {
		return nil, fmt.Errorf("read journal %s: %w", path, bare(err))
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read journal %s: %w", path, bare(err))
	}
	data := make([]byte, info.Size())
	n, err := io.ReadFull(f, data)
	if err != nil && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("read journal %s: %w", path, bare(err))
	}
	data = data[:n]
	j.exists, j.mode = true, info.Mode().Perm()
	off := 0
	for off < len(data) {
		n, base, ok := parseRecord(data[off:])
		if ok && base == want {
			j.records++
			off += n
			continue
		}
		if !ok && n > 0 {
			if _, next, ok := parseRecord(data[off+n:]); ok && next == want {
				return nil, fmt.Errorf("%w: journal %s has a damaged record at byte %d", ErrCorrupt, path, off)
			}
		}
		break
	}
	j.data, j.size = data[:off], int64(off)
	return j, nil
}

// parseRecord reads the record at the start of data: its length n (0 if
// its header is cut short or claims more than data holds), its base, and
// whether its checksum holds.
func parseRecord(data []byte) (n int, base journalBase, ok bool) {
	le := binary.LittleEndian
	if len(data) < journalHeader || uint64(le.Uint32(data)) > uint64(len(data)-journalHeader) {
		return 0, base, false
	}
	n = journalHeader + int(le.Uint32(data))
	return n, headerBase(data), crc32.Checksum(data[8:n], castagnoli) == le.Uint32(data[4:])
}

// headerBase is the base a record header names.
func headerBase(header []byte) journalBase {
	le := binary.LittleEndian
	return journalBase{txid: le.Uint64(header[8:]), log: le.Uint64(header[16:])}
}

// replay applies the records to tx, a write transaction on the base they
// were read for; it reports whether there were any.
func (j *journal) replay(tx *bolt.Tx) (bool, error) {
	if j.records == 0 {
		return false, nil
	}
	if j.base != baseOf(tx) {
		return false, fmt.Errorf("journal %s was read for transaction %d, not %d", j.path, j.base.txid, baseOf(tx).txid)
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
// after room for the header, which append fills in. It goes after the valid
// records, over leftovers if there are any.
func (j *journal) append(base journalBase, rec []byte) error {
	if j.records > 0 && base != j.base {
		return fmt.Errorf("journal %s: a record on transaction %d after records on %d", j.path, base.txid, j.base.txid)
	}
	perm := j.mode
	if perm == 0 {
		perm = 0o600
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE, perm)
	if err != nil {
		return fmt.Errorf("write journal %s: %w", j.path, bare(err))
	}
	defer f.Close()
	at := j.size
	le := binary.LittleEndian
	le.PutUint32(rec, uint32(len(rec)-journalHeader))
	le.PutUint64(rec[8:], base.txid)
	le.PutUint64(rec[16:], base.log)
	le.PutUint32(rec[4:], crc32.Checksum(rec[8:], castagnoli))
	if _, err = f.WriteAt(rec, at); err == nil {
		err = fdatasync(f)
	}
	if err != nil {
		// Not acknowledged: take the record back so that it is not replayed.
		f.Truncate(at)
		return fmt.Errorf("write journal %s: %w", j.path, bare(err))
	}
	if !j.exists {
		syncDir(j.path)
		j.exists, j.mode = true, perm
	}
	j.size += int64(len(rec))
	j.records++
	j.base = base
	return nil
}

// takeMode gives the journal the log's permission bits, which it is made
// with: whoever may read the log may read its journal, which a reader
// must, to know whether it holds writes not yet in the log. A holder that
// does not own the file leaves it as it is.
func (j *journal) takeMode(perm os.FileMode) {
	if j.exists && j.mode != perm && os.Chmod(j.path, perm) == nil {
		j.mode = perm
	}
	if !j.exists {
		j.mode = perm
	}
}

// syncDir makes the directory entry of a new file survive a power cut.
func syncDir(path string) {
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
}

// empty drops the records once bbolt holds them. Nothing is written: they
// apply on a transaction bbolt has moved past, so they read as leftovers,
// and the next records overwrite them. Where transaction ids may start over,
// as they do in a compacted file, that does not hold: with reset set, the
// file is cut to nothing, durably.
func (j *journal) empty(reset bool) error {
	if reset && j.exists {
		f, err := os.OpenFile(j.path, os.O_WRONLY, 0)
		if err == nil {
			err = f.Truncate(0)
			if err == nil {
				err = f.Sync()
			}
			f.Close()
		}
		if err != nil {
			return fmt.Errorf("empty journal %s: %w", j.path, bare(err))
		}
	}
	j.data, j.size, j.records = nil, 0, 0
	return nil
}

// journalPending reports whether the journal of the log at logPath holds
// records for the read transaction tx, which a reader must see: the log is
// checkpointed first. An empty journal is not opened, and one that does not
// start with a record header on tx (leftovers, or a torn first write) is
// read no further: on every read, that is the common case. A journal whose
// permission bits are not the log's gets the log's, if this user owns it, so
// that whoever may read the log may read the journal, as they must.
func journalPending(logPath string, tx *bolt.Tx) (bool, error) {
	path := logPath + JournalSuffix
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && info.Size() == 0 {
		return false, nil
	}
	if log, err := os.Stat(logPath); err == nil && info != nil && info.Mode().Perm() != log.Mode().Perm() {
		os.Chmod(path, log.Mode().Perm())
	}
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("read journal %s: %w", path, bare(err))
	}
	var head [journalHeader]byte
	n, _ := f.ReadAt(head[:], 0)
	f.Close()
	if n < journalHeader || headerBase(head[:]) != baseOf(tx) {
		return false, nil
	}
	// Records on tx, or a torn or damaged one: the whole journal tells.
	j, err := readJournal(path, baseOf(tx))
	if err != nil {
		return false, err
	}
	return j.records > 0, nil
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
	base := journalBase{txid: txid}
	if meta := tx.Bucket(bMeta); meta != nil { // nil in a file that is not a log: checkSchema says so
		base.log = btoi(meta.Get(keyLogID))
	}
	return base
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
