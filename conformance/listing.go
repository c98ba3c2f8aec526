package conformance

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// testEveryFilterCombination lists a small log of effects that differ in
// every field a filter reads, with every combination of the filters, in
// both directions and in pages of 2, and checks the pages against the
// effects read one by one: what an engine's index join gives must be
// exactly what the filters say, page boundaries and next cursors included.
func testEveryFilterCombination(t *testing.T, newStore opener) {
	s, clk := newStore(t)
	ctx := t.Context()
	tools := []string{"write", "mail", "pay"}
	var ids []uint64
	for i := 0; i < 24; i++ {
		session := []string{"a", "b", "c"}[i%3]
		tool := tools[(i/3)%3]
		tier := sm.Compensable
		if i%4 == 3 {
			tier = sm.Irreversible
		}
		ids = append(ids, intercept(t, s, session, tool, tier, fmt.Sprintf(`{"i":%d}`, i)).Effect.ID)
		clk.add(time.Minute)
	}
	// States: some run and committed, some running, some failed; one
	// irreversible approved, one rejected (which halts session c).
	for i, id := range ids {
		switch {
		case i%4 == 3 && i == 3:
			must[model.Effect](t)(s.Approve(ctx, id, model.Change{Actor: "ops"}))
		case i%4 == 3 && i == 23:
			must[model.Effect](t)(s.Reject(ctx, id, model.Change{Actor: "ops"}))
		case i%4 == 3:
		case i%5 == 0:
			must[model.Effect](t)(s.Start(ctx, id, model.Change{}))
			must[model.Effect](t)(s.Commit(ctx, id, model.Change{}))
		case i%5 == 1:
			must[model.Effect](t)(s.Start(ctx, id, model.Change{}))
		case i%5 == 2:
			must[model.Effect](t)(s.Start(ctx, id, model.Change{}))
			must[model.Effect](t)(s.Fail(ctx, id, model.Change{Error: "boom"}))
		}
	}
	// Undo entries in several states: session a is undone in part.
	must[model.Session](t)(s.SetSessionState(ctx, "a", sm.SessionCompensating, model.Change{}))
	must[model.UndoEntry](t)(s.UndoStep(ctx, ids[0], sm.EntryCompensating, model.Change{}))
	must[model.UndoEntry](t)(s.UndoStep(ctx, ids[0], sm.EntryCompensated, model.Change{}))
	must[model.UndoEntry](t)(s.UndoStep(ctx, ids[9], sm.EntrySkipped, model.Change{}))

	// Each effect as read alone, with its undo entry.
	type row struct {
		e    model.Effect
		undo sm.EntryState
	}
	var rows []row
	for _, id := range ids {
		d := must[model.EffectDetail](t)(s.GetEffect(ctx, id))
		r := row{e: d.Effect}
		if d.Undo != nil {
			r.undo = d.Undo.State
		}
		rows = append(rows, r)
	}
	since := rows[10].e.CreatedAt
	filters := []effectlog.EffectFilter{{}}
	grow := func(set func(*effectlog.EffectFilter, int), n int) {
		var out []effectlog.EffectFilter
		for _, f := range filters {
			out = append(out, f)
			for i := 0; i < n; i++ {
				g := f
				set(&g, i)
				out = append(out, g)
			}
		}
		filters = out
	}
	grow(func(f *effectlog.EffectFilter, i int) { f.Session = []string{"a", "c", "none"}[i] }, 3)
	grow(func(f *effectlog.EffectFilter, i int) { f.Tool = tools[i] }, 2)
	grow(func(f *effectlog.EffectFilter, i int) {
		f.State = []sm.State{sm.Committed, sm.Pending, sm.Compensated}[i]
	}, 3)
	grow(func(f *effectlog.EffectFilter, i int) { f.Tier = []sm.Tier{sm.Compensable, sm.Irreversible}[i] }, 2)
	grow(func(f *effectlog.EffectFilter, i int) {
		f.Undo = []sm.EntryState{sm.EntryPending, sm.EntryCompensated}[i]
	}, 2)
	grow(func(f *effectlog.EffectFilter, _ int) { f.Since = since }, 1)
	nonEmpty := 0
	for _, f := range filters {
		var want []uint64
		for _, r := range rows {
			if (f.Session == "" || r.e.Session == f.Session) && (f.Tool == "" || r.e.Tool == f.Tool) &&
				(f.State == "" || r.e.State == f.State) && (f.Tier == "" || r.e.Tier == f.Tier) &&
				(f.Undo == "" || r.undo == f.Undo) && (f.Since.IsZero() || !r.e.CreatedAt.Before(f.Since)) {
				want = append(want, r.e.ID)
			}
		}
		if len(want) > 0 {
			nonEmpty++
		}
		for _, asc := range []bool{false, true} {
			f := f
			f.Ascending = asc
			want := slices.Clone(want)
			if !asc {
				slices.Reverse(want)
			}
			what := fmt.Sprintf("%+v", f)
			all := must[[]model.Effect](t)(listAll(s, f))
			if got := effectIDs(all); !slices.Equal(got, want) {
				t.Fatalf("%s: listed %v, want %v", what, got, want)
			}
			f.Limit = 2
			var got []uint64
			for pages := 0; ; pages++ {
				page, next, err := s.ListEffects(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				pageIDs := effectIDs(page)
				got = append(got, pageIDs...)
				rest := len(want) - len(got)
				if len(page) > 2 || (rest > 0 && (len(page) != 2 || next != pageIDs[1])) || (rest <= 0 && next != 0) {
					t.Fatalf("%s: page %d is %v with next %d, %d effects to follow", what, pages, pageIDs, next, rest)
				}
				if next == 0 {
					break
				}
				f.Cursor = next
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: pages give %v, want %v", what, got, want)
			}
		}
	}
	if nonEmpty < len(filters)/8 {
		t.Fatalf("only %d of %d filters match anything: the log does not exercise them", nonEmpty, len(filters))
	}
}

func listAll(s effectlog.Log, f effectlog.EffectFilter) ([]model.Effect, error) {
	list, next, err := s.ListEffects(context.Background(), f)
	if err == nil && next != 0 {
		err = fmt.Errorf("no limit, but a next page at %d", next)
	}
	return list, err
}

func effectIDs(list []model.Effect) []uint64 {
	out := []uint64{}
	for _, e := range list {
		out = append(out, e.ID)
	}
	return out
}
