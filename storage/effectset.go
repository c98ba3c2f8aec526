package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"

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
	hint   int // the position Pos last found
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
	if s.sorted && s.n > 0 {
		// Most lookups walk ids in order: the one after the last found
		// first.
		for _, h := range [2]int{s.hint, s.hint + 1} {
			if h < s.n && s.at(h).id == id {
				s.hint = h
				return h, true
			}
		}
		if first, last := s.at(0).id, s.at(s.n-1).id; last-first == uint64(s.n-1) {
			// Ids without a gap (a log gc never ran on): the position is
			// the id's distance from the first.
			if id < first || id > last {
				return 0, false
			}
			s.hint = int(id - first)
			return s.hint, true
		}
		lo, hi := 0, s.n
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if s.at(m).id < id {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo < s.n && s.at(lo).id == id {
			s.hint = lo
			return lo, true
		}
		return lo, false
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

// Repeats calls fn with each effect that is not a replay and has the
// signature of an earlier one that is not (by position, in Add order), and
// the latest such earlier one: the pairs a signature's history of owners
// is made of. It keeps a number a signature, not the signatures.
func (s *EffectSet) Repeats(fn func(earlier, pos int)) {
	// By the signature's first 8 bytes; prefixes two signatures share are
	// told apart by the whole signature.
	last := make(map[uint64]int32, s.Len())
	shared := map[uint64]bool{}
	exact := map[string]int32{}
	for i := 0; i < s.Len(); i++ {
		if s.at(i).replay {
			continue
		}
		k := s.SignatureKey(i)
		p := prefix(k)
		if shared[p] {
			if e, ok := exact[s.exactKey(i)]; ok {
				fn(int(e), i)
			}
			exact[s.exactKey(i)] = int32(i)
			continue
		}
		e, ok := last[p]
		switch {
		case !ok:
		case s.sameSignature(int(e), i):
			fn(int(e), i)
		default:
			shared[p] = true
			exact[s.exactKey(int(e))] = e
			exact[s.exactKey(i)] = int32(i)
			delete(last, p)
			continue
		}
		last[p] = int32(i)
	}
}

// exactKey tells signatures apart whole (an odd one from a hex one of the
// same bytes too).
func (s *EffectSet) exactKey(pos int) string {
	if s.at(pos).oddSig {
		return "o" + s.odd[pos]
	}
	return "h" + string(s.at(pos).sig[:])
}

func (s *EffectSet) sameSignature(a, b int) bool {
	pa, pb := s.at(a), s.at(b)
	return pa.oddSig == pb.oddSig && bytes.Equal(s.SignatureKey(a), s.SignatureKey(b))
}

// SignatureKey is the signature of the effect at pos as a signature index
// keys it: its 32 bytes, or as it is stored if it is not a SHA-256 in hex.
func (s *EffectSet) SignatureKey(pos int) []byte {
	if p := s.at(pos); !p.oddSig {
		return p.sig[:]
	}
	return []byte(s.odd[pos])
}

// prefix is a signature key's first 8 bytes (zero-padded) as a number.
func prefix(k []byte) uint64 {
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

// Signature is the call signature of the effect at pos.
func (s *EffectSet) Signature(pos int) string {
	if p := s.at(pos); !p.oddSig {
		return hex.EncodeToString(p.sig[:])
	}
	return s.odd[pos]
}

// SignatureIs says whether the effect at pos has the signature a
// signature index key k names (32 bytes, or the signature as stored).
func (s *EffectSet) SignatureIs(pos int, k []byte) bool {
	p := s.at(pos)
	if len(k) == 32 {
		return !p.oddSig && bytes.Equal(p.sig[:], k)
	}
	if p.oddSig {
		return s.odd[pos] == string(k)
	}
	return len(k) == 64 && hex.EncodeToString(p.sig[:]) == string(k)
}

// ID is the id of the effect at pos.
func (s *EffectSet) ID(pos int) uint64 { return s.at(pos).id }

// Replay says whether the effect at pos is a replay.
func (s *EffectSet) Replay(pos int) bool { return s.at(pos).replay }

// Keys is the keys of the effect at pos.
func (s *EffectSet) Keys(pos int) EffectKeys { return s.keys(pos) }
