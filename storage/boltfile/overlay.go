package boltfile

// A read of the log: bbolt as last committed, with the records of the
// journal (writes made durable but not yet checkpointed into bbolt) laid over
// it in memory. A reader opens bbolt read-only under the shared lock, reads
// the journal under that lock (no writer moves either file meanwhile),
// applies its records to an overlay, and reads through it: it takes no
// exclusive lock, writes nothing and syncs nothing, so it works on a full
// disk, on a read-only file system and as a user who may not write the log.
//
// The journal's operations are puts, deletes and sequences on top-level
// buckets, so an overlay is, per bucket, the keys the records put (with
// their last value) or deleted, and the last sequence set. The records are
// checked and parsed by the code a writer replays them with (journal.go),
// and an operation a writer's bbolt would refuse is refused here with the
// same error, so a reader reads exactly what the next writer would hold.

import (
	"bytes"
	"os"
	"slices"
	"sort"
	"sync"
	"unsafe"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// readTx is a read transaction as the rules' reads see it: a bbolt
// transaction, and the journal's records over it when bbolt does not hold
// them. Its methods have bbolt's names and shapes.
type readTx struct {
	tx      *bolt.Tx
	ov      *overlay // nil: bbolt holds everything (the committer's transaction, or no journal)
	buckets map[string]*readBucket
	walked  int // records a long walk (verify) has read since it last dropped its pages
}

// walkDropEvery is how many records a walk reads between drops of its
// pages (a variable for the test that drops them after every record).
var walkDropEvery = 1 << 14

// walk counts a record read by a walk of the whole log, and every so many
// gives back the file's pages (dropPages), so that such a walk's memory
// stays flat however large the log.
func (t *readTx) walk() {
	if t.walked++; t.walked >= walkDropEvery {
		t.walked = 0
		t.dropPages()
	}
}

// plainTx reads tx alone: the committer's transaction, which holds what the
// journal holds.
func plainTx(tx *bolt.Tx) *readTx { return &readTx{tx: tx} }

// Bucket is the top-level bucket name, or nil if there is none.
func (t *readTx) Bucket(name []byte) *readBucket {
	if b, ok := t.buckets[string(name)]; ok {
		return b
	}
	bb := t.tx.Bucket(name)
	if bb == nil {
		return nil
	}
	b := &readBucket{b: bb, name: string(name)}
	if t.ov != nil {
		b.o = t.ov.buckets[string(name)]
	}
	if t.buckets == nil {
		t.buckets = make(map[string]*readBucket, len(allBuckets))
	}
	t.buckets[b.name] = b
	return b
}

// readBucket is a bucket of a readTx.
type readBucket struct {
	b    *bolt.Bucket
	name string
	o    *bucketOverlay // nil: the journal holds nothing for it
}

// Get returns the value of key, or nil if there is none (or it is a
// nested bucket, as bbolt's Get does).
func (b *readBucket) Get(key []byte) []byte {
	if b.o != nil {
		if e := b.o.get(key); e != nil {
			return e.value // nil when deleted
		}
	}
	return b.b.Get(key)
}

// Sequence is the bucket's sequence number.
func (b *readBucket) Sequence() uint64 {
	if b.o != nil && b.o.hasSeq {
		return b.o.seq
	}
	return b.b.Sequence()
}

// Cursor walks the bucket's keys in order: bbolt's, merged with the
// overlay's.
func (b *readBucket) Cursor() *readCursor {
	return &readCursor{c: b.b.Cursor(), o: b.o}
}

// ForEach calls fn with every key and value of the bucket, in key order,
// until fn returns an error.
func (b *readBucket) ForEach(fn func(k, v []byte) error) error {
	if b.o == nil {
		return b.b.ForEach(fn)
	}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// readCursor is bbolt's cursor, merged with the overlay's keys: a key the
// overlay puts reads with its value, one it deletes is skipped. It moves as
// bbolt's cursor does, also where bbolt's is quirky: after Next (Prev) finds
// nothing it stays at the last (first) key, so that Prev (Next) goes on
// from there; after Seek, First or Last finds nothing it is past the end,
// and Prev goes to the last key.
type readCursor struct {
	c *bolt.Cursor
	o *bucketOverlay // nil: bbolt's cursor alone

	at   []byte // the key the cursor is at; nil before a move, or past the end
	past bool   // Seek, First or Last found nothing
	// bk, bv is bbolt's side: the first key (in direction dir from at) that
	// the overlay does not hide, nil if there is none; c is at it.
	bk, bv []byte
	dir    int8 // +1, -1; 0: c is nowhere known
}

func (c *readCursor) First() ([]byte, []byte) {
	if c.o == nil {
		return c.c.First()
	}
	c.bk, c.bv = c.c.First()
	c.skip(+1)
	return c.landed(c.pick(+1, 0))
}

func (c *readCursor) Last() ([]byte, []byte) {
	if c.o == nil {
		return c.c.Last()
	}
	c.bk, c.bv = c.c.Last()
	c.skip(-1)
	return c.landed(c.pick(-1, len(c.o.puts)-1))
}

// Seek moves to the first key at or after seek.
func (c *readCursor) Seek(seek []byte) ([]byte, []byte) {
	if c.o == nil {
		return c.c.Seek(seek)
	}
	c.bk, c.bv = c.c.Seek(seek)
	c.skip(+1)
	return c.landed(c.pick(+1, c.o.ceil(seek)))
}

func (c *readCursor) Next() ([]byte, []byte) {
	if c.o == nil {
		return c.c.Next()
	}
	if c.at == nil {
		return nil, nil
	}
	if c.dir != +1 {
		c.bk, c.bv = c.c.Seek(c.at)
		if c.bk != nil && bytes.Equal(c.bk, c.at) {
			c.bk, c.bv = c.c.Next()
		}
		c.skip(+1)
	} else if c.bk != nil && bytes.Equal(c.bk, c.at) {
		c.bk, c.bv = c.c.Next()
		c.skip(+1)
	}
	return c.moved(c.pick(+1, c.o.ceil(c.at)+c.o.has(c.at)))
}

func (c *readCursor) Prev() ([]byte, []byte) {
	if c.o == nil {
		return c.c.Prev()
	}
	if c.at == nil {
		if c.past {
			return c.Last()
		}
		return nil, nil
	}
	if c.dir != -1 {
		c.c.Seek(c.at) // at it or after it, or past the end: the key before is before it
		c.bk, c.bv = c.c.Prev()
		c.skip(-1)
	} else if c.bk != nil && bytes.Equal(c.bk, c.at) {
		c.bk, c.bv = c.c.Prev()
		c.skip(-1)
	}
	return c.moved(c.pick(-1, c.o.ceil(c.at)-1))
}

// skip moves bbolt's side past the keys the overlay holds (its puts come
// from the overlay's side; its deletes hide them).
func (c *readCursor) skip(dir int8) {
	c.dir = dir
	for c.bk != nil {
		if _, ok := c.o.index[string(c.bk)]; !ok {
			return
		}
		if dir > 0 {
			c.bk, c.bv = c.c.Next()
		} else {
			c.bk, c.bv = c.c.Prev()
		}
	}
}

// pick is the nearer, in direction dir, of bbolt's side and the overlay's
// put at index i.
func (c *readCursor) pick(dir int8, i int) ([]byte, []byte) {
	if i < 0 || i >= len(c.o.puts) {
		return c.bk, c.bv
	}
	e := c.o.puts[i]
	if c.bk == nil || (bytes.Compare(e.key, c.bk) < 0) == (dir > 0) {
		return e.key, e.value
	}
	return c.bk, c.bv
}

// landed sets the position after Seek, First or Last.
func (c *readCursor) landed(k, v []byte) ([]byte, []byte) {
	c.at, c.past = k, k == nil
	return k, v
}

// moved sets the position after Next or Prev: one that finds nothing stays
// where it was.
func (c *readCursor) moved(k, v []byte) ([]byte, []byte) {
	if k != nil {
		c.at = k
	}
	return k, v
}

// overlay is the journal's records over bbolt, by bucket.
type overlay struct {
	buckets map[string]*bucketOverlay
	hint    int // keys a bucket is made room for: most records touch most buckets once
	ops     int // operations applied, to order them
	record  int // the offset in the journal of the record being applied
}

// bucketOverlay is what the journal's records did to one bucket.
type bucketOverlay struct {
	b       *bolt.Bucket // bbolt's bucket under it, until finished
	ov      *overlay
	index   map[string]int32 // every key put or deleted, to its entry
	entries []overlayEntry
	puts    []*overlayEntry // the keys put, in order (once finished)
	seq     uint64
	hasSeq  bool
}

type overlayEntry struct {
	key, value []byte // value is nil for a key deleted
	first      int    // the operation that first touched the key
	record     int    // the offset of its record in the journal
}

// newOverlay is an overlay for the given number of records.
func newOverlay(records int) *overlay {
	return &overlay{buckets: make(map[string]*bucketOverlay, len(allBuckets)), hint: records}
}

// bucket is the overlay of bbolt's bucket name in tx, made on first use;
// nil if tx has no such bucket.
func (o *overlay) bucket(tx *bolt.Tx, name []byte) *bucketOverlay {
	if b, ok := o.buckets[string(name)]; ok {
		return b
	}
	bb := tx.Bucket(name)
	if bb == nil {
		return nil
	}
	b := &bucketOverlay{b: bb, ov: o, index: make(map[string]int32, o.hint), entries: make([]overlayEntry, 0, o.hint)}
	o.buckets[string(name)] = b
	return b
}

// entry is the overlay's entry for key, made on first use by the
// operation being applied. The index's strings are the journal's bytes,
// which stay as they are for the read: no copy per key.
func (b *bucketOverlay) entry(key []byte) *overlayEntry {
	i, ok := b.index[string(key)]
	if !ok {
		i = int32(len(b.entries))
		b.entries = append(b.entries, overlayEntry{key: key, first: b.ov.ops, record: b.ov.record})
		b.index[unsafe.String(unsafe.SliceData(key), len(key))] = i
	}
	return &b.entries[i]
}

// get is the entry for key, or nil.
func (b *bucketOverlay) get(key []byte) *overlayEntry {
	if i, ok := b.index[string(key)]; ok {
		return &b.entries[i]
	}
	return nil
}

// Put, Delete and SetSequence are bbolt's, with its refusals. bbolt also
// refuses a put or delete of a key that is a nested bucket; the overlay
// cannot tell without a seek per key, so finish checks that for all the
// keys at once.
func (b *bucketOverlay) Put(key, value []byte) error {
	switch {
	case len(key) == 0:
		return berrors.ErrKeyRequired
	case len(key) > bolt.MaxKeySize:
		return berrors.ErrKeyTooLarge
	case int64(len(value)) > bolt.MaxValueSize:
		return berrors.ErrValueTooLarge
	}
	if value == nil { // bbolt's Get reads nil as no key; the journal's values are never nil
		value = []byte{}
	}
	b.entry(key).value = value
	b.ov.ops++
	return nil
}

func (b *bucketOverlay) Delete(key []byte) error {
	b.entry(key).value = nil
	b.ov.ops++
	return nil
}

func (b *bucketOverlay) SetSequence(seq uint64) error {
	b.seq, b.hasSeq = seq, true
	b.ov.ops++
	return nil
}

// has is 1 if the overlay puts key, else 0.
func (b *bucketOverlay) has(key []byte) int {
	if e := b.get(key); e != nil && e.value != nil {
		return 1
	}
	return 0
}

// ceil is the index of the first put at or after key.
func (b *bucketOverlay) ceil(key []byte) int {
	return sort.Search(len(b.puts), func(i int) bool { return bytes.Compare(b.puts[i].key, key) >= 0 })
}

// finish sorts the overlay's keys, and finds the first operation that
// touched a key bbolt holds as a nested bucket, which bbolt would have
// refused: it returns that operation's entry, or nil.
func (o *overlay) finish() *overlayEntry {
	var refused *overlayEntry
	for _, b := range o.buckets {
		all := make([]*overlayEntry, len(b.entries))
		for i := range b.entries {
			all[i] = &b.entries[i]
		}
		// Mostly in order already: the journal's keys are mostly new ids.
		slices.SortFunc(all, func(x, y *overlayEntry) int { return bytes.Compare(x.key, y.key) })
		b.puts = make([]*overlayEntry, 0, len(all))
		for _, e := range all {
			if e.value != nil {
				b.puts = append(b.puts, e)
			}
		}
		// One walk of bbolt's keys beside the sorted ones: a seek only
		// where bbolt has a key at or before the next one (the journal's
		// keys are mostly new ids past bbolt's last: one seek for them all).
		c := b.b.Cursor()
		var k, v []byte
		sought := false
		for _, e := range all {
			if !sought || bytes.Compare(k, e.key) < 0 {
				k, v = c.Seek(e.key)
				sought = true
			}
			if k == nil {
				break
			}
			if v == nil && bytes.Equal(k, e.key) && (refused == nil || e.first < refused.first) {
				refused = e
			}
		}
		b.b = nil // of this transaction: the overlay may serve later ones (overlayCache)
	}
	return refused
}

// overlayCache keeps the last overlay a process made of a log, for the
// reads that follow while neither bbolt nor the journal changes (an export's
// pages, the view's refreshes): each still reads and checks the journal, and
// lays the same records over the same bbolt state. A finished overlay is
// only read, so reads share it.
type overlayCache struct {
	mu   sync.Mutex
	file os.FileInfo // the log file it was made on
	base journalBase
	data []byte // the journal's records
	ov   *overlay
}

// overlay is the overlay of j's records on tx, a read transaction of the
// log file at path, made or reused.
func (c *overlayCache) overlay(j *journal, tx *bolt.Tx, path string) (*overlay, error) {
	file, err := os.Stat(path) // the file this reader locked: no writer can replace it meanwhile
	if err != nil {
		return j.overlay(tx)
	}
	c.mu.Lock()
	hit := c.ov != nil && c.base == j.base && os.SameFile(c.file, file) && bytes.Equal(c.data, j.data)
	ov := c.ov
	c.mu.Unlock()
	if hit {
		return ov, nil
	}
	if ov, err = j.overlay(tx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.file, c.base, c.data, c.ov = file, j.base, j.data, ov
	c.mu.Unlock()
	return ov, nil
}
