package boltfile

// The journal makes a write durable with one flush instead of bbolt's two.
//
// bbolt commits a transaction with two fsyncs (its pages, then its meta page)
// and rewrites every page the transaction touched: a dozen for one effect. So
// a batch of writes is made durable by writing what it put and deleted as one
// record to a journal beside the file (one write, one fdatasync), and stays
// uncommitted in the committer's bbolt transaction (committer.go). Whoever
// opens the log next replays the journal into its own transaction before
// anything else, so it sees every write made before it; a reader lays it over
// bbolt in memory (overlay.go), and writes nothing. Once the journal
// holds journalMaxRecords records or would pass journalMaxBytes, or when a
// checkpoint or a compaction asks, the journal is checkpointed: committed to
// bbolt with the transaction that holds it. The next records overwrite it
// from the start.
//
// Each record names the log (a random id made with it, and made anew by each
// compaction, which numbers transactions from the start again) and the bbolt
// transaction id it applies on. A checkpoint moves that id on, so the
// records it committed read as leftovers from then on, never applied twice;
// so do the records of a log since deleted or replaced by another at the
// same path, or of another state of the log (a backup restored).
//
// The holder keeps the journal file open and checks, before it lets the log
// go, that it is still the file at the path and as long as it wrote it: if
// it was removed or cut short, the records it held are in the held
// transaction, which is committed to bbolt instead.
//
// While no process holds the log, the journal may be the only copy of
// acknowledged writes, so the file says when it needs its journal
// (keyJournal, written by every checkpoint, in its own commit): from the
// first hold after the log was made or compacted on, the journal must be
// there, and either hold records on the file's last transaction or still
// end, at the place the last checkpoint wrote down, with the record that
// checkpoint committed (an empty one appended for it where the journal held
// none). A journal removed, emptied, or replaced by an older copy or by
// another log's journal is then an error, never a log that reads as it was
// before those writes. The one copy that cannot be told apart is one taken
// since the last checkpoint: it reads as a journal cut short.
//
// The journal's name is one no other program claims. Until schema 7 it was
// <log>-journal, SQLite's name for a rollback journal, which sqlite3 deletes
// when it opens the file beside it; the write that moves such a log to
// schema 7 commits the journal's records to bbolt, then renames the file
// (journalPath).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage/internal/record"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// JournalSuffix is added to the log's path to name its journal (schema 7).
const JournalSuffix = ".undolog-journal"

// oldJournalSuffix named the journal of a log of schema 6 or before.
const oldJournalSuffix = "-journal"

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
	f       *os.File // open for appends while the log is held
	exists  bool
	mode    os.FileMode // the file's permission bits, when it exists
	data    []byte      // the valid records as read, until replayed
	size    int64       // bytes of valid records
	records int
	base    journalBase // what the records apply on
	last    lastRecord  // the last valid record
}

// lastRecord is where a journal's last record lies and its checksum: what
// a checkpoint writes down (keyJournal), for the journal to be known again.
type lastRecord struct {
	at     uint64
	length uint32
	crc    uint32
	txid   uint64 // the transaction it applied on
}

// journalNeed is what the log file says of its journal (keyJournal).
type journalNeed struct {
	required bool       // records may have been appended since the last commit
	last     lastRecord // the record the last checkpoint committed last, if any
}

// needOf reads what tx's log file says of its journal. A log of schema 6
// or before says nothing: its journal is read as it was.
func needOf(tx *bolt.Tx) journalNeed {
	meta := tx.Bucket(bMeta)
	if v := versionOf(tx); v < 7 || v > SchemaVersion { // a newer one is refused for its version
		return journalNeed{}
	}
	v := meta.Get(keyJournal)
	if len(v) != 24 {
		return journalNeed{}
	}
	be := binary.BigEndian
	return journalNeed{required: true, last: lastRecord{at: be.Uint64(v), length: be.Uint32(v[8:]), crc: be.Uint32(v[12:]), txid: be.Uint64(v[16:])}}
}

// encode is keyJournal's value naming r as the last committed record.
func (r lastRecord) encode() []byte {
	v := make([]byte, 24)
	be := binary.BigEndian
	be.PutUint64(v, r.at)
	be.PutUint32(v[8:], r.length)
	be.PutUint32(v[12:], r.crc)
	be.PutUint64(v[16:], r.txid)
	return v
}

// journalNotTheLogs is the error of a journal the log file needs that is
// missing, or is not the one of its last checkpoint: writes the log
// acknowledged may be lost. AcceptJournalLoss sets such a journal aside.
type journalNotTheLogs struct{ error }

func (e journalNotTheLogs) Unwrap() error { return e.error }

// acceptHint tells a person what to do about a journal that is not the log's.
const acceptHint = "put the log's own journal back (a copy of a log is its file and its journal, or the file alone right after `undolog compact`), or accept the loss of the writes since the last checkpoint (up to 64) with `undolog compact --accept-journal-loss`"

// check refuses a journal the log file needs (need) that is missing, or
// holds no record on want, the file's last transaction, and does not end
// where the last checkpoint left it: data is the file's bytes. A first
// record whose header names want is an append torn by a crash, over the
// checkpoint's records.
func (j *journal) check(need journalNeed, data []byte, want journalBase, logPath string) error {
	if !need.required || j.records > 0 {
		return nil
	}
	if !j.exists {
		return journalNotTheLogs{fmt.Errorf("%w: the journal of %s is missing (%s), and may hold its last writes: %s", model.ErrCorrupt, logPath, j.path, acceptHint)}
	}
	if len(data) >= journalHeader && headerBase(data) == want {
		return nil
	}
	left := journalBase{txid: need.last.txid, log: want.log}
	if need.last.at <= uint64(len(data)) {
		rec := data[need.last.at:]
		if n, base, ok := parseRecord(rec); ok && n == int(need.last.length) && base == left && binary.LittleEndian.Uint32(rec[4:]) == need.last.crc {
			return nil
		}
	}
	what := "an older copy of it, or another log's"
	if len(data) == 0 {
		what = "emptied"
	}
	return journalNotTheLogs{fmt.Errorf("%w: %s is not the journal %s had at its last checkpoint (%s), so writes made since may be lost: %s", model.ErrCorrupt, j.path, logPath, what, acceptHint)}
}

// lastIn is the last record of data, a journal's valid records.
func lastIn(data []byte) lastRecord {
	var last lastRecord
	for off := 0; off < len(data); {
		n, base, _ := parseRecord(data[off:])
		last = lastRecord{at: uint64(off), length: uint32(n), crc: binary.LittleEndian.Uint32(data[off+4:]), txid: base.txid}
		off += n
	}
	return last
}

// readJournal reads the records of the journal at path that apply on want,
// the log's last committed transaction. They run from the start of the file
// to the first record that is cut short, fails its checksum or applies on
// another transaction: the rest is leftovers. A record failing its checksum
// is damage, not the end, if a record on want follows it.
func readJournal(path string, want journalBase, need journalNeed, logPath string) (*journal, error) {
	j := &journal{path: path, base: want}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, j.check(need, nil, want, logPath)
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
		if n, ok := recordOn(data[off:], want); ok {
			j.records++
			off += n
			continue
		}
		break
	}
	// What ends the records must be a torn append or leftovers of earlier
	// transactions: a sound record on want after it means the end is damage
	// (a flipped length or checksum) hiding acknowledged records.
	if at := soundRecordAfter(data, off, want); at >= 0 {
		return nil, fmt.Errorf("%w: journal %s has a damaged record at byte %d (a sound record follows at byte %d); if the log was restored without its journal, the journal is of another state of it: move the journal away", model.ErrCorrupt, path, off, at)
	}
	j.data, j.size = data[:off], int64(off)
	j.last = lastIn(j.data)
	return j, j.check(need, data, want, logPath)
}

// soundRecordAfter returns the offset of the first record on want that
// passes its checksum after byte `after` of data, or -1. A record names its
// log's random id at byte 16 of its header: only where those 8 bytes are found
// is a record looked for.
func soundRecordAfter(data []byte, after int, want journalBase) int {
	if after >= len(data) {
		return -1
	}
	var id [8]byte
	binary.LittleEndian.PutUint64(id[:], want.log)
	for from := after + 1; from+journalHeader <= len(data); {
		i := bytes.Index(data[from+16:], id[:])
		if i < 0 {
			return -1
		}
		at := from + i
		if _, ok := recordOn(data[at:], want); ok {
			return at
		}
		from = at + 1
	}
	return -1
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
	return n, headerBase(data), crc32c(data[8:n]) == le.Uint32(data[4:])
}

// recordOn reports whether the record at the start of data is a sound one
// on want, and its length. Its checksum is computed only for a record on
// want: a journal holding only leftovers (a log in use, mostly) costs a
// reader no checksum.
func recordOn(data []byte, want journalBase) (n int, ok bool) {
	le := binary.LittleEndian
	if len(data) < journalHeader || uint64(le.Uint32(data)) > uint64(len(data)-journalHeader) || headerBase(data) != want {
		return 0, false
	}
	n = journalHeader + int(le.Uint32(data))
	return n, crc32c(data[8:n]) == le.Uint32(data[4:])
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
	err := j.apply(func(name []byte) opBucket {
		if b := tx.Bucket(name); b != nil {
			return b
		}
		return nil
	}, nil)
	if err != nil {
		return false, err
	}
	j.data = nil // bbolt keeps what it needs until the transaction ends
	return true, nil
}

// overlay applies the records to an overlay of tx, a read transaction on
// the base they were read for, as replay would to a write transaction on
// it, and fails where replay would.
func (j *journal) overlay(tx *bolt.Tx) (*overlay, error) {
	if j.base != baseOf(tx) {
		return nil, fmt.Errorf("journal %s was read for transaction %d, not %d", j.path, j.base.txid, baseOf(tx).txid)
	}
	o := newOverlay(j.records)
	err := j.apply(func(name []byte) opBucket {
		if b := o.bucket(tx, name); b != nil {
			return b
		}
		return nil
	}, func(off int) { o.record = off })
	// Every key touched was touched before the operation that failed, if
	// one did: a refusal finish finds came first. (The overlay's keys and
	// values are the journal's bytes, which j keeps for the read.)
	if refused := o.finish(); refused != nil {
		return nil, j.damaged(refused.record, berrors.ErrIncompatibleValue)
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// apply applies the records' operations to the buckets bucket returns,
// telling at (if set) the offset of each record first.
func (j *journal) apply(bucket func(name []byte) opBucket, at func(off int)) error {
	le := binary.LittleEndian
	for off := 0; off < len(j.data); {
		end := off + journalHeader + int(le.Uint32(j.data[off:]))
		if at != nil {
			at(off)
		}
		if err := applyOps(bucket, j.data[off+journalHeader:end]); err != nil {
			return j.damaged(off, err)
		}
		off = end
	}
	return nil
}

// damaged is the error of a record, at offset off, that cannot be applied.
func (j *journal) damaged(off int, err error) error {
	return fmt.Errorf("%w: journal %s, record at byte %d: %v", model.ErrCorrupt, j.path, off, err)
}

// opBucket is what a journal operation applies to: a bucket of a write
// transaction (replay), or of a reader's overlay.
type opBucket interface {
	Put(key, value []byte) error
	Delete(key []byte) error
	SetSequence(seq uint64) error
}

func applyOps(bucket func(name []byte) opBucket, ops []byte) error {
	r := &record.Reader{Buf: ops}
	for len(r.Buf) > 0 && r.Err == nil {
		kind, name := r.Bytes(1), r.Bytes(r.Uint())
		if r.Err != nil {
			break
		}
		b := bucket(name)
		if b == nil {
			return fmt.Errorf("no bucket %q", name)
		}
		var err error
		switch kind[0] {
		case opPut:
			key, value := r.Bytes(r.Uint()), r.Bytes(r.Uint())
			if r.Err == nil {
				err = b.Put(key, value)
			}
		case opDelete:
			if key := r.Bytes(r.Uint()); r.Err == nil {
				err = b.Delete(key)
			}
		case opSequence:
			if seq := r.Uint(); r.Err == nil {
				err = b.SetSequence(seq)
			}
		default:
			return fmt.Errorf("unknown operation %q", kind)
		}
		if err != nil {
			return err
		}
	}
	return r.Err
}

// errJournalLost says that the journal file was removed, replaced or cut
// short while its records were only there and in the held transaction: the
// holder commits the transaction to bbolt instead, which saves them all.
var errJournalLost = errors.New("journal lost under its writer")

// File operations of an append; tests replace them to inject faults.
var (
	syncJournal     = fdatasync
	truncateJournal = (*os.File).Truncate
)

// append makes rec, a record on base, durable: rec holds the operations
// after room for the header, which append fills in. It goes after the valid
// records, over leftovers if there are any. If the record could not be taken
// back after a failed sync, the write is in doubt (ErrInDoubt). A journal
// found removed or cut short when it is opened is errJournalLost; one lost
// later is found when the log is let go (intact), not here: a stat beside
// each fdatasync cost 25 µs, a tenth of a lifecycle, and the held
// transaction keeps every write until then.
func (j *journal) append(base journalBase, rec []byte) error {
	if j.records > 0 && base != j.base {
		return fmt.Errorf("journal %s: a record on transaction %d after records on %d", j.path, base.txid, j.base.txid)
	}
	if j.f == nil {
		perm := j.mode
		if perm == 0 {
			perm = 0o600
		}
		f, err := openJournal(j.path, os.O_RDWR|os.O_CREATE, perm) // read: intact checks the first header
		if err != nil {
			return err
		}
		j.f = f
		if j.records > 0 && !j.intact(j.size) {
			return errJournalLost
		}
		if !j.exists {
			syncDir(j.path)
			j.exists, j.mode = true, perm
		}
	}
	at := j.size
	sealRecord(rec, base)
	_, err := j.f.WriteAt(rec, at)
	if err == nil {
		err = syncJournal(j.f)
	}
	if err != nil {
		return j.takeBack(at, err)
	}
	j.last = lastRecord{at: uint64(at), length: uint32(len(rec)), crc: binary.LittleEndian.Uint32(rec[4:]), txid: base.txid}
	j.size += int64(len(rec))
	j.records++
	j.base = base
	return nil
}

// sealRecord fills in the header of rec, a record on base: its length and
// checksum.
func sealRecord(rec []byte, base journalBase) {
	le := binary.LittleEndian
	le.PutUint32(rec, uint32(len(rec)-journalHeader))
	le.PutUint64(rec[8:], base.txid)
	le.PutUint64(rec[16:], base.log)
	le.PutUint32(rec[4:], crc32c(rec[8:]))
}

// intact reports whether the journal file this holder writes is still the
// one at its path and still holds, sound, the records this holder knows
// of: size bytes of them on its base (a file cut short and written past its
// end again holds zeros in between). It reads them back: a check made once
// per hold.
func (j *journal) intact(size int64) bool {
	held, err := j.f.Stat()
	if err != nil || held.Size() < size {
		return false
	}
	if now, err := os.Stat(j.path); err != nil || !os.SameFile(held, now) {
		return false
	}
	if j.records == 0 {
		return true
	}
	data := make([]byte, size)
	if _, err := j.f.ReadAt(data, 0); err != nil {
		return false
	}
	n := 0
	for off := 0; off < len(data); n++ {
		length, base, ok := parseRecord(data[off:])
		if !ok || base != j.base {
			return false
		}
		off += length
	}
	return n == j.records
}

// takeBack removes the record written at `at` after its write or sync
// failed with cause, so that it is never replayed: the write failed, and is
// reported so. If the record cannot be taken back, it may be replayed, and
// the write is reported in doubt.
func (j *journal) takeBack(at int64, cause error) error {
	err := truncateJournal(j.f, at)
	if err == nil {
		err = syncJournal(j.f)
	}
	if err != nil {
		// Zero the record's header: a record cut short there ends the journal.
		var zero [journalHeader]byte
		if _, err = j.f.WriteAt(zero[:], at); err == nil {
			err = syncJournal(j.f)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: write journal %s: %v; the write could not be taken back (%v) and may be in the log", model.ErrInDoubt, j.path, bare(cause), bare(err))
	}
	return fmt.Errorf("write journal %s: %w", j.path, bare(cause))
}

// open opens the journal file for appends, if it exists, so that the holder
// can tell when the file it holds records in is removed or cut short. If it
// cannot, the first append opens it.
func (j *journal) open() {
	if !j.exists || j.f != nil {
		return
	}
	if f, err := openJournal(j.path, os.O_RDWR, 0); err == nil {
		j.f = f
	}
}

// openJournal opens the journal at path to write it, if what it opened is a
// regular file this user owns: in a directory others may write, another
// user may have made it, to read what is written there, or put a link there
// (since the open checked the path) to a file of this user's, for the
// journal to write over.
func openJournal(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|openNoFollow, perm)
	if err != nil {
		if kindErr := journalKindError(path); kindErr != nil {
			return nil, kindErr
		}
		return nil, fmt.Errorf("write journal %s: %w", path, bare(err))
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = notRegularJournal(path, info.Mode())
	}
	if err == nil {
		err = checkOwner(path, info)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// close lets the journal file go.
func (j *journal) close() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
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
// as they do in a compacted file, that does not hold, nor where the file is
// not the one written (errJournalLost): with reset set, the file at the path
// is cut to nothing, durably.
func (j *journal) empty(reset bool) error {
	if reset {
		j.close()
		f, err := os.OpenFile(j.path, os.O_WRONLY, 0)
		if errors.Is(err, os.ErrNotExist) {
			j.exists = false
		} else {
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
	}
	j.data, j.size, j.records, j.last = nil, 0, 0, lastRecord{}
	return nil
}

// pendingJournal reads the journal of the log at logPath for the read
// transaction tx: the records bbolt does not hold yet, which a reader lays
// over it (readView); nil when there are none. An empty journal the log does
// not need is not opened; any other is read whole, so that a reader finds
// the damage a writer would (a damaged first header hides nothing from it).
// A journal whose permission bits are not the log's gets the log's, if this
// user owns it (root too leaves another user's as it is), so that whoever
// may read the log may read the journal, as they must (a change of mode,
// never of the file's bytes).
func pendingJournal(logPath string, tx *bolt.Tx) (*journal, error) {
	path, _ := journalPath(logPath, tx)
	need := needOf(tx)
	info, err := os.Lstat(path)
	if !need.required && (errors.Is(err, os.ErrNotExist) || err == nil && info.Size() == 0) {
		return nil, nil
	}
	// Not through a link (made since the open checked the path): the mode
	// would be given to whatever it names.
	if log, err := os.Stat(logPath); err == nil && info != nil && info.Mode().IsRegular() && info.Mode().Perm() != log.Mode().Perm() {
		if _, other := ownedByOther(info); !other {
			os.Chmod(path, log.Mode().Perm())
		}
	}
	j, err := readJournal(path, baseOf(tx), need, logPath)
	if err != nil || j.records == 0 {
		return nil, err
	}
	return j, nil
}

// journalPath is where the journal of the log at logPath is in the state
// tx: before schema 7 at the old name; from 7 at its own, or at the old
// one while its move is unfinished (moving: the holder finishes it). The
// move is a rename made after the commit that moved the log to schema 7,
// so a kill at any point leaves the journal's bytes under one of the names.
func journalPath(logPath string, tx *bolt.Tx) (path string, moving bool) {
	path, old := logPath+JournalSuffix, logPath+oldJournalSuffix
	if versionOf(tx) < 7 {
		return old, false
	}
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Lstat(old); err == nil {
			return old, true
		}
	}
	return path, false
}

// moveJournal renames the journal at from to to, durably.
func moveJournal(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("move journal %s to %s: %w", from, to, bare(err))
	}
	syncDir(to)
	return nil
}

// versionOf is tx's schema version; 0 in a file that is not a log.
func versionOf(tx *bolt.Tx) uint64 {
	if meta := tx.Bucket(bMeta); meta != nil {
		return btoi(meta.Get(keySchema))
	}
	return 0
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
	ops record.Writer // room for a record header, then the operations
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
	return &writeTx{Tx: tx, ops: record.Writer{Buf: buf[:journalHeader]}}
}

// record is the journal record of the writes, its header yet to be filled
// in; nil when nothing was written.
func (w *writeTx) record() []byte {
	if len(w.ops.Buf) == journalHeader {
		return nil
	}
	return w.ops.Buf
}

func (w *writeTx) op(kind byte, bucket []byte) {
	w.ops.Buf = append(w.ops.Buf, kind)
	w.ops.Bytes(bucket)
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
	w.ops.Bytes(key)
	w.ops.Bytes(value)
	return nil
}

func (w *writeTx) delete(bucket, key []byte) error {
	if err := w.Bucket(bucket).Delete(key); err != nil {
		return err
	}
	w.op(opDelete, bucket)
	w.ops.Bytes(key)
	return nil
}

func (w *writeTx) nextSequence(bucket []byte) (uint64, error) {
	seq, err := w.Bucket(bucket).NextSequence()
	if err != nil {
		return 0, err
	}
	w.op(opSequence, bucket)
	w.ops.Uint(seq)
	return seq, nil
}

// raiseSequence makes the bucket's next sequence above n.
func (w *writeTx) raiseSequence(bucket []byte, n uint64) error {
	b := w.Bucket(bucket)
	if b.Sequence() >= n {
		return nil
	}
	if err := b.SetSequence(n); err != nil {
		return err
	}
	w.op(opSequence, bucket)
	w.ops.Uint(n)
	return nil
}
