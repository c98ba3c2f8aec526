package conformance

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// historyOwner names the history a record is in: its effect's or its session's.
func historyOwner(r model.HistoryRecord) string {
	if r.Kind == model.KindSession {
		return "session " + r.Session
	}
	return fmt.Sprintf("effect %d", r.EffectID)
}

// changeKey names one history record: its history and seq.
func changeKey(r model.HistoryRecord) string { return fmt.Sprintf("%s seq %d", historyOwner(r), r.Seq) }

// A follower that polls Changes from its last position while many writers
// commit at once sees every change exactly once, positions strictly
// increasing, each effect's and session's history in its order: what it saw
// is the feed read whole afterwards, record for record, and as many records
// as the log's history holds.
//
// This fails on positions taken when a record is inserted rather than in
// commit order (a PostgreSQL sequence's nextval in the INSERT): writer A
// takes position 5, writer B position 6, B commits first, the follower reads
// 6 and asks for what is after 6, then A commits 5 behind it, and the
// follower never sees it (the final whole read then holds a record the
// follower did not, and the comparison below names it). With eight writers
// on many sessions that interleaving happens within a few hundred commits.
func testFeedUnderConcurrentWritersNeverSkips(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	const writers, calls = 8, 25
	ctx := t.Context()

	type seen struct {
		pos uint64
		key string
	}
	var (
		got     []seen
		done    atomic.Bool
		follow  = make(chan error, 1)
		lastSeq = map[string]uint32{} // per effect or session: the last seq the follower saw
	)
	go func() {
		var after uint64
		// One more read once the writers are done: it sees what they wrote last.
		for final := false; ; {
			if done.Load() {
				final = true
			}
			for {
				// A small page: the follower goes on from a position inside a batch too.
				changes, last, err := s.Changes(ctx, after, 7)
				if err != nil {
					follow <- err
					return
				}
				for _, ch := range changes {
					r := ch.Record
					if ch.Position <= after {
						follow <- fmt.Errorf("position %d read after %d", ch.Position, after)
						return
					}
					owner := historyOwner(r)
					if prev, ok := lastSeq[owner]; ok && r.Seq != prev+1 || !ok && r.Seq != 1 {
						follow <- fmt.Errorf("position %d: %s seq %d after seq %d: out of its history's order", ch.Position, owner, r.Seq, prev)
						return
					}
					lastSeq[owner] = r.Seq
					after = ch.Position
					got = append(got, seen{ch.Position, changeKey(r)})
				}
				if last != after {
					follow <- fmt.Errorf("Changes said %d was the last position, its records end at %d", last, after)
					return
				}
				if len(changes) < 7 {
					break
				}
			}
			if final {
				follow <- nil
				return
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				// Two sessions per writer: several writers' transactions touch no
				// row in common, so nothing but the feed orders their commits.
				session := fmt.Sprintf("w%d-%d", w, i%2)
				res, err := s.Intercept(ctx, effectlog.InterceptRequest{Session: session, Tool: "step", Tier: sm.Compensable,
					Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), CreateSession: true, Actor: "tester"})
				if err == nil {
					_, err = s.Start(ctx, res.Effect.ID, model.Change{Actor: "tester"})
				}
				if err == nil && i%3 == 0 {
					_, err = s.Fail(ctx, res.Effect.ID, model.Change{Actor: "tester", Error: "boom"})
				} else if err == nil {
					_, err = s.Commit(ctx, res.Effect.ID, model.Change{Actor: "tester", Result: json.RawMessage(`"ok"`)})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	done.Store(true)
	if err := <-follow; err != nil {
		t.Fatal(err)
	}

	all, _, err := s.Changes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	followed := map[string]bool{}
	for _, g := range got {
		if followed[g.key] {
			t.Fatalf("the follower saw %s twice", g.key)
		}
		followed[g.key] = true
	}
	for i, ch := range all {
		if i >= len(got) || got[i].pos != ch.Position || got[i].key != changeKey(ch.Record) {
			key := changeKey(ch.Record)
			t.Fatalf("the whole feed's change %d is %s at position %d; the follower saw it: %v (it saw %d changes, the feed holds %d)",
				i, key, ch.Position, followed[key], len(got), len(all))
		}
	}
	if len(got) != len(all) {
		t.Fatalf("the follower saw %d changes, the feed holds %d", len(got), len(all))
	}

	// Every history record the log holds is in the feed; effect ids stay
	// small integers (the writers made writers*calls effects).
	history := 0
	var maxID uint64
	err = s.Export(ctx, "", func(r effectlog.ExportRecord) error {
		switch r.Type {
		case "history", "session_history":
			history++
		case "effect":
			if e, ok := r.Record.(model.Effect); ok {
				maxID = max(maxID, e.ID)
			} else if e, ok := r.Record.(*model.Effect); ok {
				maxID = max(maxID, e.ID)
			}
		}
		return nil
	})
	if maxID == 0 || maxID > 2*writers*calls {
		t.Fatalf("effect ids up to %d for %d effects", maxID, writers*calls)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Each call: created, started, committed or failed; each session: created.
	if want := writers*calls*3 + writers*2; history != want || len(all) != want {
		t.Fatalf("%d history records, %d changes, want %d", history, len(all), want)
	}
	if last, err := s.LastChange(ctx); err != nil || last != all[len(all)-1].Position {
		t.Fatalf("LastChange %d (%v), the feed ends at %d", last, err, all[len(all)-1].Position)
	}
	verifyClean(t, s)
}
