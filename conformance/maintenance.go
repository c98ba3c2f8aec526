package conformance

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

func testGCKeepsSessionsWithACallExecuting(t *testing.T, newStore opener) {
	s, clk := newStore(t)
	for _, id := range []string{"running", "done"} {
		res := intercept(t, s, id, "w", sm.Compensable, `{"s":"`+id+`"}`)
		must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{Owner: model.NewOwner(clk.now())}))
		if id == "done" {
			must[model.Effect](t)(s.Commit(t.Context(), res.Effect.ID, model.Change{}))
		}
		must[model.Session](t)(s.SetSessionState(t.Context(), id, sm.SessionFailed, model.Change{}))
	}
	clk.add(48 * time.Hour)
	rep := must[effectlog.GCReport](t)(s.GC(t.Context(), clk.now(), []sm.SessionState{sm.SessionFailed}))
	if len(rep.Sessions) != 1 || rep.Sessions[0] != "done" {
		t.Fatalf("%+v", rep)
	}
	if e := must[model.EffectDetail](t)(s.GetEffect(t.Context(), 1)); e.Effect.State != sm.Executing || e.Undo == nil {
		t.Fatalf("%+v", e)
	}
	verifyClean(t, s)
}

// GC drops the sessions in the given states whose last change is older than
// its bound, with all of their records, and nothing else.
func testGCDropsOnlyOldSessionsInTheGivenStates(t *testing.T, newStore opener) {
	s, clk := newStore(t)
	run := func(session string, end sm.SessionState) {
		res := intercept(t, s, session, "w", sm.Compensable, `{"s":"`+session+`"}`)
		must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{}))
		must[model.Effect](t)(s.Commit(t.Context(), res.Effect.ID, model.Change{Result: json.RawMessage(`1`)}))
		intercept(t, s, session, "w", sm.Compensable, `{"s":"`+session+`"}`) // a replay
		intercept(t, s, session, "pay", sm.Irreversible, `{}`)
		if end != sm.SessionActive {
			must[model.Session](t)(s.SetSessionState(t.Context(), session, end, model.Change{}))
		}
	}
	run("old-done", sm.SessionCompleted)
	run("old-failed", sm.SessionFailed)
	run("old-live", sm.SessionActive)
	clk.add(48 * time.Hour)
	run("new-done", sm.SessionCompleted)

	rep := must[effectlog.GCReport](t)(s.GC(t.Context(), clk.now().Add(-24*time.Hour), []sm.SessionState{sm.SessionCompleted, sm.SessionCompensated}))
	if len(rep.Sessions) != 1 || rep.Sessions[0] != "old-done" || rep.Effects != 3 {
		t.Fatalf("%+v", rep)
	}
	if _, err := s.GetSession(t.Context(), "old-done"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("dropped session still there: %v", err)
	}
	if hist, err := s.SessionHistory(t.Context(), "old-done"); len(hist) != 0 {
		t.Fatalf("dropped session's history: %v %v", hist, err)
	}
	for id := uint64(1); id <= 3; id++ {
		if _, err := s.GetEffect(t.Context(), id); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("dropped effect %d still there: %v", id, err)
		}
	}
	if list, _, _ := s.ListEffects(t.Context(), effectlog.EffectFilter{Session: "old-done"}); len(list) != 0 {
		t.Fatalf("dropped effects listed: %+v", list)
	}
	if stack, _, _ := s.UndoStack(t.Context(), "old-done", 0); len(stack) != 0 {
		t.Fatalf("dropped undo entries listed: %+v", stack)
	}
	for _, id := range []string{"old-failed", "old-live", "new-done"} {
		if sess := must[model.Session](t)(s.GetSession(t.Context(), id)); sess.Effects != 3 {
			t.Fatalf("%s: %+v", id, sess)
		}
	}
	if p := pending(t, s); len(p) != 1 || p[0].Session != "old-live" {
		t.Fatalf("approvals %+v", p)
	}
	if again := must[effectlog.GCReport](t)(s.GC(t.Context(), clk.now().Add(-24*time.Hour), []sm.SessionState{sm.SessionCompleted})); len(again.Sessions) != 0 || again.Effects != 0 {
		t.Fatalf("second gc: %+v", again)
	}
	rep2 := verifyClean(t, s)
	if rep2.Sessions != 3 || rep2.Effects != 9 {
		t.Fatalf("after gc: %+v", rep2)
	}
}

// GC moves the change feed's position, so that a viewer that looks only at
// it sees the sessions it showed are gone; the feed's readers skip what GC
// appended, as they skip the records it dropped.
func testGCMovesTheChangeFeed(t *testing.T, newStore opener) {
	s, clk := newStore(t)
	for _, id := range []string{"old", "kept"} {
		res := intercept(t, s, id, "w", sm.Compensable, `{"s":"`+id+`"}`)
		must[model.Effect](t)(s.Start(t.Context(), res.Effect.ID, model.Change{}))
		must[model.Effect](t)(s.Commit(t.Context(), res.Effect.ID, model.Change{}))
		if id == "old" {
			must[model.Session](t)(s.SetSessionState(t.Context(), id, sm.SessionCompleted, model.Change{}))
			clk.add(48 * time.Hour)
		}
	}
	before := must[uint64](t)(s.LastChange(t.Context()))
	if rep := must[effectlog.GCReport](t)(s.GC(t.Context(), clk.now().Add(-24*time.Hour), []sm.SessionState{sm.SessionCompleted})); len(rep.Sessions) != 1 {
		t.Fatalf("%+v", rep)
	}
	after := must[uint64](t)(s.LastChange(t.Context()))
	if after <= before {
		t.Fatalf("gc left the feed at %d (it was %d): a viewer sees no change", after, before)
	}
	if recs, _, err := s.Changes(t.Context(), before, 0); err != nil || len(recs) != 0 {
		t.Fatalf("changes after gc: %+v %v", recs, err)
	}
	all, _, err := s.Changes(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if r.Record.Session == "old" {
			t.Fatalf("a dropped session's change read: %+v", r)
		}
	}
	verifyClean(t, s)
}

// Export gives every record, of the log or of one session, in an order
// that rebuilds it: meta first, each session before its effects, each
// effect followed by its history, undo entry and approval, and an end
// record that counts them.
func testExport(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	c := intercept(t, s, "a", "write", sm.Compensable, `{"n":1}`).Effect.ID
	must[model.Effect](t)(s.Start(t.Context(), c, model.Change{}))
	must[model.Effect](t)(s.Commit(t.Context(), c, model.Change{Result: json.RawMessage(`"ok"`)}))
	i := intercept(t, s, "a", "pay", sm.Irreversible, `{"n":2}`).Effect.ID
	intercept(t, s, "b", "write", sm.Compensable, `{}`)

	export := func(session string) (types []string, recs []effectlog.ExportRecord) {
		t.Helper()
		err := s.Export(t.Context(), session, func(r effectlog.ExportRecord) error {
			types, recs = append(types, r.Type), append(recs, r)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return types, recs
	}
	types, recs := export("a")
	var want []string
	want = append(want, "meta", "session")
	for range must[[]model.HistoryRecord](t)(s.SessionHistory(t.Context(), "a")) {
		want = append(want, "session_history")
	}
	for _, id := range []uint64{c, i} {
		d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
		want = append(want, "effect")
		for range d.History {
			want = append(want, "history")
		}
		if d.Undo != nil {
			want = append(want, "undo")
		}
		if d.Approval != nil {
			want = append(want, "approval")
		}
	}
	want = append(want, "end")
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("export of a:\n%s\nwant\n%s", strings.Join(types, " "), strings.Join(want, " "))
	}
	// The records are the log's, as it reads them.
	for _, r := range recs {
		if r.Type != "effect" {
			continue
		}
		b, _ := json.Marshal(r.Record)
		var e model.Effect
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(must[model.EffectDetail](t)(s.GetEffect(t.Context(), e.ID)).Effect)
		if e.Session != "a" || string(b) != string(got) {
			t.Fatalf("exported %s, the log has %s", b, got)
		}
	}
	all, allRecs := export("")
	sessions, effects, records := 0, 0, 0
	for _, ty := range all {
		sessions += b2i(ty == "session")
		effects += b2i(ty == "effect")
		records += b2i(ty == "history" || ty == "session_history")
	}
	end, _ := allRecs[len(allRecs)-1].Record.(*effectlog.ExportEnd)
	if all[0] != "meta" || sessions != 2 || effects != 3 || end == nil || *end != (effectlog.ExportEnd{Sessions: 2, Effects: 3, Records: records}) {
		t.Fatalf("export of the log: %v, its end %+v", all, end)
	}
	if err := s.Export(t.Context(), "nosuch", func(effectlog.ExportRecord) error { return nil }); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("export of an unknown session: %v", err)
	}
	stop := errors.New("enough")
	calls := 0
	if err := s.Export(t.Context(), "", func(effectlog.ExportRecord) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("a consumer's error: %v after %d records", err, calls)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// An import that a writer gets ahead of (the log was empty when it began;
// a writer makes a session the export holds, or an effect, before the
// import writes it) is refused and taken out whole, never merged with what
// the writer made: the writer's session stays as it wrote it, and the log
// verifies.
// A refused import with no writer leaves the log empty, also when the
// export spells a session's times in another zone (the same instants, which
// the log keeps in its own): the take-out compares a session with what the
// log kept of it, not with the export's spelling.
func testRefusedImportInAnotherZoneLeavesNothing(t *testing.T, newStore opener) {
	src, _ := newStore(t)
	intercept(t, src, "a", "write", sm.Compensable, `{"n":1}`)
	intercept(t, src, "b", "write", sm.Compensable, `{"n":2}`)
	var recs []effectlog.ExportRecord
	must[struct{}](t)(struct{}{}, src.Export(t.Context(), "", func(r effectlog.ExportRecord) error { recs = append(recs, r); return nil }))
	zone := time.FixedZone("X", 3600)
	for i, r := range recs {
		switch v := r.Record.(type) {
		case model.Session:
			if v.ID == "a" {
				v.CreatedAt, v.UpdatedAt = v.CreatedAt.In(zone), v.UpdatedAt.In(zone)
				recs[i].Record = v
			}
		case model.Effect:
			if v.Session == "b" {
				v.Args = json.RawMessage(`{"n":999}`) // refused: its history does not cover it
				recs[i].Record = v
			}
		}
	}
	into, _ := newStore(t)
	i := 0
	_, err := into.Import(t.Context(), func() (effectlog.ExportRecord, bool, error) {
		if i == len(recs) {
			return effectlog.ExportRecord{}, false, nil
		}
		i++
		return pointed(recs[i-1]), true, nil
	})
	if !errors.Is(err, model.ErrInvalidInput) || strings.Contains(err.Error(), "meanwhile") {
		t.Fatalf("import of a changed effect: %v; want it refused as invalid, blaming no writer", err)
	}
	if sessions, _, serr := into.ListSessions(t.Context(), effectlog.SessionFilter{}); serr != nil || len(sessions) != 0 {
		t.Fatalf("after the refused import: %+v %v; want no session", sessions, serr)
	}
}

func testImportRefusesWhatAWriterMadeMeanwhile(t *testing.T, newStore opener) {
	// a holds effects 1 and 3, b effect 2: once a is imported, a writer's
	// effect takes an id past a's, not b's, and only b's session collides.
	src, _ := newStore(t)
	intercept(t, src, "a", "write", sm.Compensable, `{"n":1}`)
	intercept(t, src, "b", "write", sm.Compensable, `{"n":2}`)
	intercept(t, src, "a", "write", sm.Compensable, `{"n":3}`)
	var recs []effectlog.ExportRecord
	must[struct{}](t)(struct{}{}, src.Export(t.Context(), "", func(r effectlog.ExportRecord) error { recs = append(recs, r); return nil }))
	for _, writer := range []string{"b", "w"} { // the export's own session b, or another
		t.Run("writer makes "+writer, func(t *testing.T) {
			into, _ := newStore(t)
			i, wrote := 0, false
			_, err := into.Import(t.Context(), func() (effectlog.ExportRecord, bool, error) {
				if i == len(recs) {
					return effectlog.ExportRecord{}, false, nil
				}
				if s, ok := recs[max(i-1, 0)].Record.(model.Session); ok && s.ID == "b" && !wrote {
					// b's session record was read, so a's transaction is
					// written; b's is not yet.
					wrote = true
					intercept(t, into, writer, "own", sm.Compensable, `{"mine":true}`)
				}
				i++
				return pointed(recs[i-1]), true, nil
			})
			if !errors.Is(err, model.ErrConflict) || !strings.Contains(err.Error(), "writer") {
				t.Fatalf("import while a writer made session %s: %v; want a conflict naming the writer", writer, err)
			}
			sessions, _, serr := into.ListSessions(t.Context(), effectlog.SessionFilter{})
			if serr != nil || len(sessions) != 1 || sessions[0].ID != writer || sessions[0].Effects != 1 {
				t.Fatalf("after the refused import: %+v %v; want only the writer's session %s with its one effect", sessions, serr, writer)
			}
			list, _, _ := into.ListEffects(t.Context(), effectlog.EffectFilter{})
			if len(list) != 1 || list[0].Tool != "own" {
				t.Fatalf("after the refused import the log holds %+v; want only the writer's effect", list)
			}
			verifyClean(t, into)
		})
	}
	// A writer that writes into a session the import wrote already (its
	// effect takes the id of one the export holds further on): the import
	// is refused, and that session stays as the writer left it, with what
	// was imported; nothing the writer was told it wrote is taken out.
	t.Run("writer writes into an imported session", func(t *testing.T) {
		src, _ := newStore(t)
		intercept(t, src, "a", "write", sm.Compensable, `{"n":1}`)
		intercept(t, src, "b", "write", sm.Compensable, `{"n":2}`)
		var recs []effectlog.ExportRecord
		must[struct{}](t)(struct{}{}, src.Export(t.Context(), "", func(r effectlog.ExportRecord) error { recs = append(recs, r); return nil }))
		into, _ := newStore(t)
		i, mine := 0, uint64(0)
		_, err := into.Import(t.Context(), func() (effectlog.ExportRecord, bool, error) {
			if i == len(recs) {
				return effectlog.ExportRecord{}, false, nil
			}
			if s, ok := recs[max(i-1, 0)].Record.(model.Session); ok && s.ID == "b" && mine == 0 {
				mine = intercept(t, into, "a", "own", sm.Compensable, `{"mine":true}`).Effect.ID
			}
			i++
			return pointed(recs[i-1]), true, nil
		})
		if !errors.Is(err, model.ErrConflict) || !strings.Contains(err.Error(), "a, which another process wrote to meanwhile") {
			t.Fatalf("import while a writer wrote into imported session a: %v", err)
		}
		if _, gerr := into.GetEffect(t.Context(), mine); gerr != nil {
			t.Fatalf("the writer's effect %d was taken out: %v", mine, gerr)
		}
		if sess := must[model.Session](t)(into.GetSession(t.Context(), "a")); sess.Effects != 2 {
			t.Fatalf("session a after the refused import: %d effects, want the imported one and the writer's", sess.Effects)
		}
		if _, gerr := into.GetSession(t.Context(), "b"); !errors.Is(gerr, model.ErrNotFound) {
			t.Fatalf("session b after the refused import: %v", gerr)
		}
		verifyClean(t, into)
	})
}
