package boltfile

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/undolog/undolog/storage"
)

// EffectsWhere joins the index buckets of the matches by leapfrogging their
// cursors: each index is id-sorted under its name, so each in turn seeks to
// the greatest id any other is at (the least, descending) until all agree.
// A walk costs a few seeks per id of the smallest index, not a read of the
// largest.
func (r txReader) EffectsWhere(m []storage.Match, asc bool, cursor uint64, fn func(id uint64) (bool, error)) error {
	if r.tx.Bucket(bUndoByState) == nil {
		// A log written before schema 6: ByUndoState may give more, so it
		// gives every effect, and the others say which.
		m = slices.DeleteFunc(slices.Clone(m), func(x storage.Match) bool { return x.Index == storage.ByUndoState })
	}
	switch len(m) {
	case 0:
		return r.Effects(storage.AllEffects, "", asc, cursor, fn)
	case 1:
		return r.Effects(m[0].Index, m[0].Name, asc, cursor, fn)
	}
	legs := make([]leg, len(m))
	for i, x := range m {
		b, ok := indexBuckets[x.Index]
		if !ok {
			return fmt.Errorf("no effect index %d", x.Index)
		}
		legs[i] = leg{c: r.tx.Bucket(b).Cursor(), prefix: namePrefix(x.Name)}
	}
	var target uint64 // the next id that may match, in the walk's direction
	switch {
	case asc && cursor == ^uint64(0), !asc && cursor == 1:
		return nil
	case asc:
		target = cursor + 1
	case cursor == 0:
		target = ^uint64(0)
	default:
		target = cursor - 1
	}
	for {
		agreed := 0
		for i := 0; agreed < len(legs); i = (i + 1) % len(legs) {
			id, ok := legs[i].seek(target, asc)
			if !ok {
				return nil
			}
			if id == target {
				agreed++
				continue
			}
			target, agreed = id, 1
		}
		more, err := fn(target)
		if err != nil || !more {
			return err
		}
		if asc {
			if target == ^uint64(0) {
				return nil
			}
			target++
		} else {
			if target == 1 {
				return nil
			}
			target--
		}
	}
}

// leg is one index of a join: a cursor over the keys under prefix.
type leg struct {
	c      *readCursor
	prefix []byte
	key    []byte
}

// seek returns the first id under the leg's prefix at or after target
// (at or before, descending); ok is false when there is none.
func (l *leg) seek(target uint64, asc bool) (uint64, bool) {
	l.key = append(append(l.key[:0], l.prefix...), itob(target)...)
	k, _ := l.c.Seek(l.key)
	if !asc && !bytes.Equal(k, l.key) {
		if k == nil {
			k, _ = l.c.Last()
		} else {
			k, _ = l.c.Prev()
		}
	}
	for k != nil && bytes.HasPrefix(k, l.prefix) {
		if len(k) == len(l.prefix)+8 {
			return btoi(k[len(l.prefix):]), true
		}
		// Not an index key (scan skips none either way; this only keeps
		// the join from stopping on one).
		k = step(l.c, asc)
	}
	return 0, false
}
