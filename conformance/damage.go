package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// Damage writes, behind the rules and the engine's codec, a record that
// does not decode: what a damaged disk, or a role that may write the table
// directly, leaves. An engine's test gives its own (a file's bytes, a
// database's rows).
type Damage struct {
	// History makes history record seq of effect id unreadable.
	History func(t *testing.T, id uint64, seq uint32)
	// Undo makes the undo entry of effect id of session unreadable.
	Undo func(t *testing.T, session string, id uint64)
	// Effect makes effect id's own record unreadable.
	Effect func(t *testing.T, id uint64)
	// Session makes session id's record unreadable.
	Session func(t *testing.T, id string)
}

// DamagedRowStaysLocal: one record that does not decode harms only its own
// effect (or session). Listings and the other effects read as before; the damaged one is
// listed by its id as damaged (state damaged, its damage said); a read of
// it is model.ErrCorrupt with what could be read; an export of its session
// or of the whole log fails naming it, and one of another session does not.
func DamagedRowStaysLocal(t *testing.T, s effectlog.Log, damage Damage) {
	ctx := t.Context()
	committed := func(session string, n int) uint64 {
		t.Helper()
		id := intercept(t, s, session, "write", sm.Compensable, fmt.Sprintf(`{"n":%d}`, n)).Effect.ID
		must[model.Effect](t)(s.Start(ctx, id, model.Change{}))
		must[model.Effect](t)(s.Commit(ctx, id, model.Change{Result: json.RawMessage(`"ok"`)}))
		return id
	}
	mine := []uint64{committed("mine", 1), committed("mine", 2)}
	history, undo, record := committed("theirs", 3), committed("theirs", 4), committed("theirs", 5)
	intercept(t, s, "theirs", "pay", sm.Irreversible, `{"n":6}`)
	verifyClean(t, s)

	damage.History(t, history, 2)
	damage.Undo(t, "theirs", undo)

	// Everything else reads as before.
	all := must[[]model.Effect](t)(func() ([]model.Effect, error) {
		l, _, err := s.ListEffects(ctx, effectlog.EffectFilter{})
		return l, err
	}())
	if len(all) != 6 {
		t.Fatalf("list of the log: %d effects, want 6", len(all))
	}
	entries := must[map[uint64]model.UndoEntry](t)(s.UndoEntries(ctx, "theirs", []uint64{history, undo, record}))
	if entries[undo].State != model.EntryDamaged || entries[history].State != sm.EntryPending {
		t.Fatalf("undo entries of theirs: %+v; want %d's damaged, %d's pending", entries, undo, history)
	}
	stack, _, err := s.UndoStack(ctx, "theirs", 0)
	if err != nil || len(stack) != 3 || stack[1].EffectID != undo || stack[1].State != model.EntryDamaged {
		t.Fatalf("undo stack of theirs: %+v, %v; want 3 entries, %d's damaged", stack, err, undo)
	}
	if len(pending(t, s)) != 1 {
		t.Fatal("the request waiting for approval is not listed")
	}
	for _, id := range append(mine, undo, record) {
		if id == undo {
			continue // its entry is the damaged one
		}
		must[model.EffectDetail](t)(s.GetEffect(ctx, id))
	}
	d, err := s.GetEffect(ctx, history)
	if !errors.Is(err, model.ErrCorrupt) || d.Effect.ID != history || d.Effect.Tool != "write" || d.Effect.Damage == "" {
		t.Fatalf("effect %d, whose history record does not read: %+v, %v; want ErrCorrupt with the effect and its damage", history, d.Effect, err)
	}
	// An export of the log or of theirs names the damaged effect; one of
	// another session is whole.
	export := func(session string) error {
		return s.Export(ctx, session, func(effectlog.ExportRecord) error { return nil })
	}
	for _, session := range []string{"", "theirs"} {
		if err := export(session); !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("effect %d", history)) {
			t.Fatalf("export of %q: %v; want it failed naming effect %d", session, err, history)
		}
	}
	if err := export("mine"); err != nil {
		t.Fatalf("export of session mine: %v", err)
	}

	// An effect whose own record does not read is listed, by its id, as damaged.
	damage.Effect(t, record)
	all = must[[]model.Effect](t)(func() ([]model.Effect, error) {
		l, _, err := s.ListEffects(ctx, effectlog.EffectFilter{})
		return l, err
	}())
	found := false
	for _, e := range all {
		if e.ID == record {
			found = e.State == model.StateDamaged && e.Damage != ""
		}
	}
	if len(all) != 6 || !found {
		t.Fatalf("list after effect %d's record was damaged: %+v; want all 6, it damaged", record, all)
	}
	theirs, _, err := s.ListEffects(ctx, effectlog.EffectFilter{Session: "theirs"})
	if err != nil || len(theirs) != 4 {
		t.Fatalf("list of session theirs: %d effects, %v", len(theirs), err)
	}
	if d, err := s.GetEffect(ctx, record); !errors.Is(err, model.ErrCorrupt) || d.Effect.ID != record || d.Effect.State != model.StateDamaged {
		t.Fatalf("effect %d, whose record does not read: %+v, %v", record, d.Effect, err)
	}
	must[model.EffectDetail](t)(s.GetEffect(ctx, mine[0]))
	if err := export(""); !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprint(record)) {
		t.Fatalf("export of the log: %v; want it failed naming effect %d", err, record)
	}
	if err := export("mine"); err != nil {
		t.Fatalf("export of session mine: %v", err)
	}

	// A session whose record does not read is listed, by its id, as
	// damaged; the others read as before.
	damage.Session(t, "theirs")
	sessions, _, err := s.ListSessions(ctx, effectlog.SessionFilter{})
	if err != nil || len(sessions) != 2 || sessions[0].ID != "theirs" || sessions[0].State != model.SessionDamaged || sessions[0].Damage == "" {
		t.Fatalf("sessions after theirs's record was damaged: %+v, %v", sessions, err)
	}
	if _, err := s.GetSession(ctx, "theirs"); !errors.Is(err, model.ErrCorrupt) {
		t.Fatalf("session theirs, whose record does not read: %v", err)
	}
	must[model.Session](t)(s.GetSession(ctx, "mine"))
	if l, _, err := s.ListEffects(ctx, effectlog.EffectFilter{Session: "mine"}); err != nil || len(l) != 2 {
		t.Fatalf("list of session mine: %d effects, %v", len(l), err)
	}
	if err := export(""); !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "theirs") {
		t.Fatalf("export of the log: %v; want it failed naming session theirs", err)
	}
	if err := export("mine"); err != nil {
		t.Fatalf("export of session mine: %v", err)
	}

	// A listing since a time finds where to start by a search over the
	// effects' times: one it meets that does not read is listed, not a
	// failure of the listing.
	damage.Effect(t, mine[0])
	since, _, err := s.ListEffects(ctx, effectlog.EffectFilter{Since: time.Unix(0, 0)})
	if err != nil || len(since) != 6 {
		t.Fatalf("list since 1970 after effect %d's record was damaged: %d effects, %v; want all 6", mine[0], len(since), err)
	}
}
