package storage

import (
	"slices"
	"strings"
	"testing"

	"github.com/undolog/undolog/model"
)

// The set gives back what it was given, finds ids in and out of order, and
// groups signatures exactly: equal ones together (in id order), whether or
// not they are SHA-256s in hex, and no two different ones.
func TestEffectSetKeepsKeysAndGroupsSignatures(t *testing.T) {
	hexSig := func(c string) string { return strings.Repeat(c, 64) }
	one := uint64(1)
	effects := []model.Effect{
		{ID: 1, Session: "a", Tool: "w", Tier: "compensable", State: "pending", CallSignature: hexSig("a")},
		{ID: 3, Session: "a", Tool: "w", Tier: "compensable", State: "committed", CallSignature: hexSig("b")},
		{ID: 4, Session: "b", Tool: "x", Tier: "irreversible", State: "pending", CallSignature: hexSig("a")},
		{ID: 7, Session: "b", Tool: "x", Tier: "read", State: "committed", CallSignature: hexSig("a"), ReplayOf: &one},
		{ID: 9, Session: "b", Tool: "x", Tier: "read", State: "committed", CallSignature: "odd"},
		{ID: 10, Session: "b", Tool: "x", Tier: "read", State: "committed", CallSignature: "odd"},
		{ID: 11, Session: "b", Tool: "x", Tier: "read", State: "committed", CallSignature: strings.ToUpper(hexSig("a"))},
		{ID: 12, Session: "b", Tool: "x", Tier: "read", State: "committed", CallSignature: ""},
	}
	s := NewEffectSet()
	for i := range effects {
		s.Add(&effects[i])
	}
	for i, e := range effects {
		k, ok := s.Get(e.ID)
		want := EffectKeys{ID: e.ID, Session: e.Session, Tool: e.Tool, Tier: string(e.Tier), State: string(e.State), CallSignature: e.CallSignature}
		if e.ReplayOf != nil {
			want.Replay, want.ReplayOf = true, *e.ReplayOf
		}
		if !ok || k != want {
			t.Fatalf("effect %d: %+v %v, want %+v", e.ID, k, ok, want)
		}
		if pos, _ := s.Pos(e.ID); pos != i || s.Field(pos, "tool") != e.Tool {
			t.Fatalf("effect %d at %d", e.ID, pos)
		}
	}
	for _, id := range []uint64{0, 2, 5, 8, 13} {
		if _, ok := s.Get(id); ok {
			t.Fatalf("effect %d found", id)
		}
	}
	var pairs [][2]uint64
	s.Repeats(func(earlier, pos int) {
		if s.Signature(earlier) != s.Signature(pos) || earlier >= pos {
			t.Fatalf("pair %d, %d", earlier, pos)
		}
		pairs = append(pairs, [2]uint64{s.ID(earlier), s.ID(pos)})
	})
	// 7 is a replay; 11's signature is not hex, and not 1's.
	if want := [][2]uint64{{1, 4}, {9, 10}}; !slices.Equal(pairs, want) {
		t.Fatalf("repeats %v, want %v", pairs, want)
	}
	// Out of order, a lookup still finds each.
	u := NewEffectSet()
	for _, i := range []int{2, 0, 1} {
		u.Add(&effects[i])
	}
	if k, ok := u.Get(1); !ok || k.CallSignature != hexSig("a") {
		t.Fatalf("unsorted: %+v %v", k, ok)
	}
	// Ids without a gap are found by their distance from the first.
	d := NewEffectSet()
	for id := uint64(5); id <= 7; id++ {
		d.Add(&model.Effect{ID: id, CallSignature: hexSig("c")})
	}
	for id, want := range map[uint64]bool{4: false, 5: true, 6: true, 7: true, 8: false} {
		if k, ok := d.Get(id); ok != want || ok && k.ID != id {
			t.Fatalf("dense: %d: %+v %v", id, k, ok)
		}
	}
	// Signatures that share their first 8 bytes are told apart.
	c := NewEffectSet()
	a, b := strings.Repeat("a", 16)+strings.Repeat("b", 48), strings.Repeat("a", 16)+strings.Repeat("c", 48)
	for i, sig := range []string{a, b, a, b, a} {
		c.Add(&model.Effect{ID: uint64(i + 1), CallSignature: sig})
	}
	pairs = nil
	c.Repeats(func(earlier, pos int) { pairs = append(pairs, [2]uint64{c.ID(earlier), c.ID(pos)}) })
	if want := [][2]uint64{{1, 3}, {2, 4}, {3, 5}}; !slices.Equal(pairs, want) {
		t.Fatalf("shared prefix: repeats %v, want %v", pairs, want)
	}
}
