package boltfile

// A writer walks the log's pages before it writes. bbolt meets a damaged page
// only where a transaction goes, and a writer goes little further than the
// end of each tree: it would take writes into a file every reader refuses,
// and its commit moves pages about (a split, a merge, the freelist), which
// may carry the damage on or drop the records a damaged page held. So the
// first open to write of each state of the file walks every page its trees
// reach, through a read-only map of its own of the pages the meta page
// names (a read per page, into a page of its own, would cost a writer more
// than the write), and checks what bbolt reads without checks: the page's id and type, the room its
// entries and their keys and values take, each page reached once and none
// also free, the keys of each tree in order (bbolt finds a key by halving:
// one out of order hides others, and a write would add a call it holds
// again). Damage inside a record, which the pages hold soundly (a
// changed byte, a history that does not hold), is verify's to find: the
// rules refuse such a record where they use it.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
)

const (
	// Page entries: a branch's position, key size and child page id; a leaf's
	// flags, position, key size and value size. A position counts from the
	// entry itself.
	pageEntrySize = 16
	// bucketEntryFlag marks a leaf entry whose value is a bucket: its root
	// page id and sequence, then, when the root is 0, the bucket's one page.
	bucketEntryFlag  = 0x01
	bucketHeaderSize = 16
)

// pageWalk checks the pages of one state of the log, reading the file.
type pageWalk struct {
	pageChecker
	pages   []byte   // the file's pages below highWater
	reached []uint64 // a bit per page
}

// checkPages walks the pages of the log file f (open, under the log's lock)
// unless this process has walked this state of it before, or wrote it.
func (s *Engine) checkPages(f *os.File) error {
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read log %s: %w", s.path, bare(err))
	}
	m, err := s.newestMeta(f, info.Size())
	if err != nil {
		return err
	}
	state := walkedState{info: info, txid: m.txid}
	if s.group.walked.same(state) {
		return nil
	}
	if hasWalkedMark(s.journalPath(), info, m.txid) {
		s.group.walked.set(state, true)
		return nil
	}
	pages, unmap, err := mapPages(f, m.pgid*m.pageSize)
	if err != nil {
		return fmt.Errorf("read log %s: %w", s.path, bare(err))
	}
	defer unmap()
	w := pageWalk{pageChecker{f: f, path: s.path, pageSize: m.pageSize, highWater: m.pgid}, pages, make([]uint64, (m.pgid+63)/64)}
	// Every page read is inside the map; a file cut short under it (by what
	// ignores the lock) faults, which guard reports as damage.
	err = s.guard(func() error {
		if err := w.tree("root", m.root, keyRange{}); err != nil {
			return err
		}
		if m.freelist != noFreelist {
			return w.freelist(m.freelist)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.group.walks.Add(1)
	s.group.walked.set(state, false) // marked once a write goes through (markWalked)
	return nil
}

// page reads page id, of the kinds flags allows, and marks it and its
// overflow reached.
func (w *pageWalk) page(what string, id uint64, flags uint16) ([]byte, error) {
	if id < 2 || id >= w.highWater {
		return nil, w.damaged(what, id, "outside the file's pages")
	}
	p := w.pages[id*w.pageSize : (id+1)*w.pageSize]
	le := binary.LittleEndian
	if got := le.Uint64(p); got != id {
		return nil, w.damaged(what, id, fmt.Sprintf("it says it is page %d", got))
	}
	if err := w.checkHeader(what, id, flags, p); err != nil {
		return nil, err
	}
	overflow := uint64(le.Uint32(p[12:]))
	for n := id; n <= id+overflow; n++ {
		if w.reached[n/64]&(1<<(n%64)) != 0 {
			return nil, w.damaged(what, id, fmt.Sprintf("page %d is reached twice", n))
		}
		w.reached[n/64] |= 1 << (n % 64)
	}
	return w.pages[id*w.pageSize : (id+1+overflow)*w.pageSize], nil
}

// keyRange is where the keys of a page must lie, as the branch entries
// above it say: from low (each page's first key may equal it; bbolt leaves a
// branch's key as it was when the key it copied is deleted) up to, not
// including, high. Nil is no bound.
type keyRange struct{ low, high []byte }

// tree walks the tree whose root is page id, and the buckets it holds.
func (w *pageWalk) tree(what string, id uint64, keys keyRange) error {
	p, err := w.page(what, id, branchPageFlag|leafPageFlag)
	if err != nil {
		return err
	}
	return w.entries(what, id, p, keys)
}

// entries checks the entries of page p (page id, or a bucket's inline page
// when id is 0), their keys in order within keys, and walks what they lead
// to.
func (w *pageWalk) entries(what string, id uint64, p []byte, keys keyRange) error {
	le := binary.LittleEndian
	count := uint64(le.Uint16(p[10:]))
	if count == 0 && id != 0 {
		// bbolt keeps no empty page in a tree but a bucket's empty root
		// leaf; an empty branch has nowhere to go.
		if le.Uint16(p[8:])&branchPageFlag != 0 {
			return w.damaged(what, id, "a branch without entries")
		}
		return nil
	}
	if pageHeaderSize+count*pageEntrySize > uint64(len(p)) {
		return w.damaged(what, id, "more entries than the page holds")
	}
	branch := le.Uint16(p[8:])&branchPageFlag != 0
	// A branch's entries are checked, and their keys, before a page below
	// is: each entry's tree lies between its key and the next one's.
	type child struct {
		id  uint64
		key []byte
	}
	var children []child
	var prev []byte
	for i := uint64(0); i < count; i++ {
		at := pageHeaderSize + i*pageEntrySize
		e := p[at : at+pageEntrySize]
		var key, value []byte
		var flags uint32
		if branch {
			pos, ksize := uint64(le.Uint32(e)), uint64(le.Uint32(e[4:]))
			if at+pos+ksize > uint64(len(p)) {
				return w.damaged(what, id, fmt.Sprintf("entry %d runs past the page", i))
			}
			key = p[at+pos : at+pos+ksize]
		} else {
			pos := uint64(le.Uint32(e[4:]))
			ksize, vsize := uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
			end := at + pos + ksize + vsize
			if end > uint64(len(p)) {
				return w.damaged(what, id, fmt.Sprintf("entry %d runs past the page", i))
			}
			flags, key, value = le.Uint32(e), p[at+pos:at+pos+ksize], p[at+pos+ksize:end]
		}
		switch {
		case i == 0 && keys.low != nil && bytes.Compare(key, keys.low) < 0:
			return w.damaged(what, id, "entry 0's key is before where its branch puts the page")
		case i > 0 && bytes.Compare(key, prev) <= 0:
			return w.damaged(what, id, fmt.Sprintf("entry %d's key is not after the one before it", i))
		case keys.high != nil && bytes.Compare(key, keys.high) >= 0:
			return w.damaged(what, id, fmt.Sprintf("entry %d's key is past where its branch ends the page", i))
		}
		prev = key
		if branch {
			children = append(children, child{le.Uint64(e[8:]), key})
			continue
		}
		if flags&bucketEntryFlag == 0 {
			continue
		}
		name := fmt.Sprintf("%q bucket", key)
		if len(value) < bucketHeaderSize {
			return w.damaged(what, id, fmt.Sprintf("the %s's entry is cut short", name))
		}
		if root := le.Uint64(value); root != 0 {
			if err := w.tree(name, root, keyRange{}); err != nil {
				return err
			}
			continue
		}
		inline := value[bucketHeaderSize:]
		if len(inline) < pageHeaderSize || le.Uint16(inline[8:])&leafPageFlag == 0 {
			return w.damaged(what, id, fmt.Sprintf("the %s's own page is damaged", name))
		}
		if err := w.entries(name, 0, inline, keyRange{}); err != nil {
			return err
		}
	}
	for i, c := range children {
		below := keyRange{c.key, keys.high}
		if i+1 < len(children) {
			below.high = children[i+1].key
		}
		if err := w.tree(what, c.id, below); err != nil {
			return err
		}
	}
	return nil
}

// freelist checks the free pages' list: each inside the file, none reached
// from a tree.
func (w *pageWalk) freelist(id uint64) error {
	p, err := w.page("freelist", id, freelistPageFlag)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	count, ids := uint64(le.Uint16(p[10:])), p[pageHeaderSize:]
	if count == 0xFFFF { // a large count sits in the first id slot
		count, ids = le.Uint64(ids), ids[8:]
	}
	if count > uint64(len(ids))/8 {
		return w.damaged("freelist", id, "more entries than the page holds")
	}
	for i := uint64(0); i < count; i++ {
		free := le.Uint64(ids[i*8:])
		if free < 2 || free >= w.highWater {
			return w.damaged("freelist", id, fmt.Sprintf("free page %d is outside the file's pages", free))
		}
		if w.reached[free/64]&(1<<(free%64)) != 0 {
			return w.damaged("freelist", id, fmt.Sprintf("page %d is both free and in use", free))
		}
	}
	return nil
}

// walkedState is a state of the log file: the file, its size, its
// modification and change times (what writes to the file leaves the
// modification time as it was, a change time it cannot set moves), and the
// transaction its meta page names.
type walkedState struct {
	info os.FileInfo
	txid uint64
}

// walkedFile remembers the last state of the file this process walked or
// wrote itself.
type walkedFile struct {
	mu     sync.Mutex
	state  walkedState
	ok     bool
	marked bool // the journal carries the state's mark
}

func (w *walkedFile) same(s walkedState) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ok && w.state.txid == s.txid && os.SameFile(w.state.info, s.info) &&
		w.state.info.Size() == s.info.Size() && w.state.info.ModTime().Equal(s.info.ModTime()) &&
		changeTime(w.state.info) == changeTime(s.info)
}

func (w *walkedFile) set(s walkedState, marked bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.state, w.ok, w.marked = s, true, marked
}

// markWalked marks the journal with the state walked, once, after a write
// went through: a write refused after the walk (a damaged journal) leaves
// the journal as it was, its change time too.
func (s *Engine) markWalked() {
	w := &s.group.walked
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ok && !w.marked {
		setWalkedMark(s.journalPath(), w.state.info, w.state.txid)
		w.marked = true
	}
}

// wrote records the state that a commit of transaction txid by this
// process left the file held in: its pages are the walked ones and those
// the commit wrote.
func (s *Engine) wrote(held os.FileInfo, txid uint64) {
	if info, err := os.Stat(s.path); err == nil && os.SameFile(info, held) {
		s.group.walked.set(walkedState{info: info, txid: txid}, false)
		s.markWalked()
	}
}
