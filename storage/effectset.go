package storage

import (
	"bytes"
	"encoding/hex"
	"slices"

	"github.com/undolog/undolog/model"
)

// EffectKeys is what verify keeps of an effect once it has checked its
// records: the fields the indexes are by. A whole record (args, result)
// is not kept: on a log of a million effects those would be gigabytes.
type EffectKeys struct {
	ID                         uint64
	Session, Tool, Tier, State string
	CallSignature              string
	// ReplayOf is the effect this one replays, if Replay.
	ReplayOf uint64
	Replay   bool
}

// EffectSet holds the EffectKeys of the effects Records read, added in
// ascending id order, in about 72 bytes each: names are kept once, a
// signature as its 32 bytes, and entries in fixed chunks (no slice that
// doubles, and nothing for the garbage collector to scan).
type EffectSet struct {
	names  []string
	nameOf map[string]uint32
	chunks [][]packedKeys
	n      int
	odd    map[int]string // signatures that are not 64 lower-case hex digits, by position
	sorted bool
}

type packedKeys struct {
	id, replayOf               uint64
	sig                        [32]byte
	session, tool, tier, state uint32
	replay, oddSig             bool
}

const chunkBits = 16

// NewEffectSet returns an empty set.
func NewEffectSet() *EffectSet {
	return &EffectSet{nameOf: map[string]uint32{}, odd: map[int]string{}, sorted: true}
}

func (s *EffectSet) name(n string) uint32 {
	if i, ok := s.nameOf[n]; ok {
		return i
	}
	i := uint32(len(s.names))
	s.names = append(s.names, n)
	s.nameOf[n] = i
	return i
}

// Add keeps e's keys. Effects come in ascending id order (Records' order);
// one that does not still is found, at a cost.
func (s *EffectSet) Add(e *model.Effect) {
	p := packedKeys{id: e.ID, session: s.name(e.Session), tool: s.name(e.Tool), tier: s.name(string(e.Tier)), state: s.name(string(e.State))}
	if e.ReplayOf != nil {
		p.replay, p.replayOf = true, *e.ReplayOf
	}
	if b, err := hex.DecodeString(e.CallSignature); err == nil && len(b) == 32 && hex.EncodeToString(b) == e.CallSignature {
		copy(p.sig[:], b)
	} else {
		p.oddSig = true
		s.odd[s.n] = e.CallSignature
	}
	if s.n > 0 && s.at(s.n-1).id >= e.ID {
		s.sorted = false
	}
	if s.n>>chunkBits == len(s.chunks) {
		s.chunks = append(s.chunks, make([]packedKeys, 0, 1<<chunkBits))
	}
	c := &s.chunks[s.n>>chunkBits]
	*c = append(*c, p)
	s.n++
}

func (s *EffectSet) at(i int) *packedKeys { return &s.chunks[i>>chunkBits][i&(1<<chunkBits-1)] }

// Len is how many effects the set holds.
func (s *EffectSet) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

func (s *EffectSet) keys(i int) EffectKeys {
	p := s.at(i)
	k := EffectKeys{ID: p.id, Session: s.names[p.session], Tool: s.names[p.tool], Tier: s.names[p.tier],
		State: s.names[p.state], ReplayOf: p.replayOf, Replay: p.replay}
	if p.oddSig {
		k.CallSignature = s.odd[i]
	} else {
		k.CallSignature = hex.EncodeToString(p.sig[:])
	}
	return k
}

// Pos is the position of effect id in the set (its place in Add order).
func (s *EffectSet) Pos(id uint64) (int, bool) {
	if s == nil {
		return 0, false
	}
	if s.sorted {
		lo, hi := 0, s.n
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if s.at(m).id < id {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo, lo < s.n && s.at(lo).id == id
	}
	for i := 0; i < s.n; i++ {
		if s.at(i).id == id {
			return i, true
		}
	}
	return 0, false
}

// Get returns effect id's keys.
func (s *EffectSet) Get(id uint64) (EffectKeys, bool) {
	i, ok := s.Pos(id)
	if !ok {
		return EffectKeys{}, false
	}
	return s.keys(i), true
}

// Each calls fn with each effect's keys and position, in Add order.
func (s *EffectSet) Each(fn func(pos int, k EffectKeys)) {
	for i := 0; i < s.Len(); i++ {
		fn(i, s.keys(i))
	}
}

// Field is one field ("session", "tool", "tier", "state") of the effect
// at pos, without building its keys.
func (s *EffectSet) Field(pos int, field string) string {
	p := s.at(pos)
	switch field {
	case "session":
		return s.names[p.session]
	case "tool":
		return s.names[p.tool]
	case "tier":
		return s.names[p.tier]
	case "state":
		return s.names[p.state]
	}
	return ""
}

// BySignature calls fn with the effects that are not replays grouped by
// call signature, each group's in ascending id order, the groups in the
// order of their signatures' bytes: lookups made in that order walk a
// signature index from one end to the other.
func (s *EffectSet) BySignature(fn func(sig string, group []EffectKeys)) {
	var order []int32
	for i := 0; i < s.Len(); i++ {
		if !s.at(i).replay {
			order = append(order, int32(i))
		}
	}
	key := func(i int32) []byte {
		if p := s.at(int(i)); !p.oddSig {
			return p.sig[:]
		}
		return []byte(s.odd[int(i)])
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := bytes.Compare(key(a), key(b)); c != 0 {
			return c
		}
		pa, pb := s.at(int(a)), s.at(int(b))
		if pa.oddSig != pb.oddSig {
			if pa.oddSig {
				return 1
			}
			return -1
		}
		switch {
		case pa.id < pb.id:
			return -1
		case pa.id > pb.id:
			return 1
		}
		return 0
	})
	var group []EffectKeys
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && s.at(int(order[j])).oddSig == s.at(int(order[i])).oddSig && bytes.Equal(key(order[j]), key(order[i])) {
			j++
		}
		group = group[:0]
		for _, o := range order[i:j] {
			group = append(group, s.keys(int(o)))
		}
		fn(group[0].CallSignature, group)
		i = j
	}
}
