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
	var groups [][]uint64
	s.BySignature(func(group []int) {
		var ids []uint64
		for _, pos := range group {
			ids = append(ids, s.ID(pos))
			if s.Signature(pos) != s.Signature(group[0]) {
				t.Fatalf("group %v mixes signatures", group)
			}
		}
		groups = append(groups, ids)
	})
	slices.SortFunc(groups, func(a, b []uint64) int { return int(a[0]) - int(b[0]) })
	want := [][]uint64{{1, 4}, {3}, {9, 10}, {11}, {12}}
	if !slices.EqualFunc(groups, want, slices.Equal) {
		t.Fatalf("groups %v, want %v", groups, want)
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
}
