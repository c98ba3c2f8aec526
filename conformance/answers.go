package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// proxyCall is a call under the proxy's replay rule, started in its
// intercept.
func proxyCall(t *testing.T, s effectlog.Log, session, tool string, tier sm.Tier, args string) effectlog.InterceptResult {
	t.Helper()
	return must[effectlog.InterceptResult](t)(s.Intercept(context.Background(), proxyRequest(session, tool, tier, args)))
}

func proxyRequest(session, tool string, tier sm.Tier, args string) effectlog.InterceptRequest {
	return effectlog.InterceptRequest{Session: session, Tool: tool, Tier: tier, Args: json.RawMessage(args), CreateSession: true,
		Actor: "mcp:client", Reason: "policy: " + tool, Start: true, RunAgainAnswered: true, Owner: &model.Owner{PID: 1, Host: "h"}}
}

// Under the proxy's rule a repeat is a retry (answered from the log) until
// the answer reached the client; after that it is the call made again, a
// new effect that runs and owns the signature. Write A, write B, write A:
// the third runs.
func testRepeatAfterTheAnswerRunsAgain(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	ctx := t.Context()
	a1 := proxyCall(t, s, "p", "write", sm.Compensable, `{"path":"f","content":"A"}`)
	if a1.Outcome != model.OutcomeNew || a1.Effect.State != sm.Executing {
		t.Fatalf("first call: %+v", a1)
	}
	must[model.Effect](t)(s.Commit(ctx, a1.Effect.ID, model.Change{Result: json.RawMessage(`"wrote A"`)}))
	// Its answer never reached the client (a crash, a cancel): a retry.
	retry := proxyCall(t, s, "p", "write", sm.Compensable, `{"content":"A","path":"f"}`)
	if retry.Outcome != model.OutcomeReplayed || *retry.Effect.ReplayOf != a1.Effect.ID || string(retry.Effect.Result) != `"wrote A"` {
		t.Fatalf("a repeat before the answer: %+v", retry)
	}
	// The replay's answer reached it: recorded on the call, once.
	got := must[model.Effect](t)(s.Answered(ctx, retry.Effect.ID, model.Change{Actor: "mcp:client"}))
	if got.ID != a1.Effect.ID {
		t.Fatalf("the answer of a replay was recorded on effect %d, not the call's %d", got.ID, a1.Effect.ID)
	}
	d := must[model.EffectDetail](t)(s.GetEffect(ctx, a1.Effect.ID))
	last := d.History[len(d.History)-1]
	if last.Kind != model.KindAnswer || last.From != "committed" || last.To != "committed" || last.Trigger != effectlog.TriggerAnswered ||
		last.Actor != "mcp:client" || !strings.Contains(last.Reason, "replay") {
		t.Fatalf("answer record %+v", last)
	}
	n := len(d.History)
	must[model.Effect](t)(s.Answered(ctx, a1.Effect.ID, model.Change{}))
	if d := must[model.EffectDetail](t)(s.GetEffect(ctx, a1.Effect.ID)); len(d.History) != n {
		t.Fatalf("a second answer was recorded: %s", states(d.History))
	}

	b := proxyCall(t, s, "p", "write", sm.Compensable, `{"path":"f","content":"B"}`)
	must[model.Effect](t)(s.Commit(ctx, b.Effect.ID, model.Change{Result: json.RawMessage(`"wrote B"`)}))
	must[model.Effect](t)(s.Answered(ctx, b.Effect.ID, model.Change{}))
	a2 := proxyCall(t, s, "p", "write", sm.Compensable, `{"path":"f","content":"A"}`)
	if a2.Outcome != model.OutcomeNew || a2.Effect.State != sm.Executing || a2.Effect.ReplayOf != nil || a2.Signature != a1.Signature {
		t.Fatalf("write A after write B: %+v", a2)
	}
	// Ids stay consecutive: the look-up that found the owner took none.
	if a2.Effect.ID != b.Effect.ID+1 {
		t.Fatalf("the call made again is effect %d, after %d", a2.Effect.ID, b.Effect.ID)
	}
	first := must[model.EffectDetail](t)(s.GetEffect(ctx, a2.Effect.ID)).History[0]
	if !strings.Contains(first.Reason, "answer of effect 1") || !strings.Contains(first.Reason, "policy: write") {
		t.Fatalf("first record of the call made again: %+v", first)
	}
	// It is undone on its own: three undo entries, last in first out.
	if stack := undoStack(t, s, "p"); len(stack) != 3 {
		t.Fatalf("undo stack %+v", stack)
	}
	// Running, it is the one a retry finds; once committed and not answered,
	// a retry replays it, not the first A.
	if r := proxyCall(t, s, "p", "write", sm.Compensable, `{"path":"f","content":"A"}`); r.Outcome != model.OutcomeInProgress || r.Effect.ID != a2.Effect.ID {
		t.Fatalf("a retry while the call made again runs: %+v", r)
	}
	must[model.Effect](t)(s.Commit(ctx, a2.Effect.ID, model.Change{Result: json.RawMessage(`"wrote A again"`)}))
	r := proxyCall(t, s, "p", "write", sm.Compensable, `{"path":"f","content":"A"}`)
	if r.Outcome != model.OutcomeReplayed || *r.Effect.ReplayOf != a2.Effect.ID || string(r.Effect.Result) != `"wrote A again"` {
		t.Fatalf("a retry of the call made again: %+v", r)
	}
	// exec's rule: the same call for good, answered or not.
	if r := intercept(t, s, "p", "write", sm.Compensable, `{"path":"f","content":"B"}`); r.Outcome != model.OutcomeReplayed || *r.Effect.ReplayOf != b.Effect.ID {
		t.Fatalf("a repeat without the proxy's rule: %+v", r)
	}
	sess := must[model.Session](t)(s.GetSession(ctx, "p"))
	if sess.Effects != 6 || sess.Counts[sm.Committed] != 3 || sess.Counts[sm.Replayed] != 3 {
		t.Fatalf("session %+v", sess)
	}
	verifyClean(t, s)

	// An export of it imports into an empty log: the same records, the
	// signature owned by the newest, and verify clean there.
	var recs []effectlog.ExportRecord
	must[struct{}](t)(struct{}{}, s.Export(ctx, "", func(r effectlog.ExportRecord) error { recs = append(recs, r); return nil }))
	into, _ := newStore(t)
	i := 0
	must[effectlog.ImportReport](t)(into.Import(ctx, func() (effectlog.ExportRecord, bool, error) {
		if i == len(recs) {
			return effectlog.ExportRecord{}, false, nil
		}
		i++
		return pointed(recs[i-1]), true, nil
	}))
	verifyClean(t, into)
	if r := proxyCall(t, into, "p", "write", sm.Compensable, `{"path":"f","content":"A"}`); r.Outcome != model.OutcomeReplayed || *r.Effect.ReplayOf != a2.Effect.ID {
		t.Fatalf("a retry in the imported log: %+v", r)
	}
	verifyClean(t, into)
}

// pointed gives an exported record as import takes it, by pointer (as
// undolog import reads them).
func pointed(r effectlog.ExportRecord) effectlog.ExportRecord {
	switch v := r.Record.(type) {
	case model.Session:
		r.Record = &v
	case model.HistoryRecord:
		r.Record = &v
	case model.Effect:
		r.Record = &v
	case model.UndoEntry:
		r.Record = &v
	case model.Approval:
		r.Record = &v
	}
	return r
}

// Only a committed call's answer is recorded; an irreversible call made
// again after its answer asks a person again.
func testAnswersOfCommittedCallsOnly(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	ctx := t.Context()
	p := proxyCall(t, s, "q", "write", sm.Compensable, `{"n":1}`)
	for _, id := range []uint64{p.Effect.ID, 999} {
		before := must[model.EffectDetail](t)(s.GetEffect(ctx, p.Effect.ID))
		_, err := s.Answered(ctx, id, model.Change{})
		if id == 999 && !errors.Is(err, model.ErrNotFound) || id != 999 && !errors.Is(err, model.ErrConflict) {
			t.Fatalf("answer of effect %d: %v", id, err)
		}
		if after := must[model.EffectDetail](t)(s.GetEffect(ctx, p.Effect.ID)); len(after.History) != len(before.History) {
			t.Fatal("a refused answer wrote a record")
		}
	}
	must[model.Effect](t)(s.Fail(ctx, p.Effect.ID, model.Change{Error: "tool error"}))
	if _, err := s.Answered(ctx, p.Effect.ID, model.Change{}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("answer of a failed call: %v", err)
	}

	send := proxyCall(t, s, "q", "send", sm.Irreversible, `{"to":"x"}`)
	must[model.Effect](t)(s.Approve(ctx, send.Effect.ID, model.Change{Actor: "alice"}))
	must[model.Effect](t)(s.Start(ctx, send.Effect.ID, model.Change{}))
	must[model.Effect](t)(s.Commit(ctx, send.Effect.ID, model.Change{Result: json.RawMessage(`"sent"`)}))
	must[model.Effect](t)(s.Answered(ctx, send.Effect.ID, model.Change{}))
	again := proxyCall(t, s, "q", "send", sm.Irreversible, `{"to":"x"}`)
	if again.Outcome != model.OutcomeNew || again.Effect.State != sm.Pending || again.Effect.ID == send.Effect.ID {
		t.Fatalf("an irreversible call made again: %+v", again)
	}
	if list := pending(t, s); len(list) != 1 || list[0].EffectID != again.Effect.ID {
		t.Fatalf("waiting requests %+v", list)
	}
	verifyClean(t, s)
}

// Many repeats of an answered call at once: one runs it again, the others
// find it running.
func testRepeatsOfAnAnsweredCallRace(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	ctx := t.Context()
	first := proxyCall(t, s, "r", "append", sm.Compensable, `{"line":"x"}`)
	must[model.Effect](t)(s.Commit(ctx, first.Effect.ID, model.Change{Result: json.RawMessage(`"ok"`)}))
	must[model.Effect](t)(s.Answered(ctx, first.Effect.ID, model.Change{}))
	const n = 16
	var wg sync.WaitGroup
	outcomes := make([]model.Outcome, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			res, err := s.Intercept(ctx, effectlog.InterceptRequest{Session: "r", Tool: "append", Tier: sm.Compensable,
				Args: json.RawMessage(`{"line":"x"}`), Start: true, RunAgainAnswered: true, Owner: &model.Owner{PID: 1, Host: "h"}})
			outcomes[i], errs[i] = res.Outcome, err
		})
	}
	wg.Wait()
	count := map[model.Outcome]int{}
	for i := range outcomes {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		count[outcomes[i]]++
	}
	if count[model.OutcomeNew] != 1 || count[model.OutcomeInProgress] != n-1 {
		t.Fatalf("outcomes %v", count)
	}
	verifyClean(t, s)
}

// An answer recorded without waiting for its flush is seen by the writes
// that follow it: the call made again right after runs again, and the
// record, carried to disk by those writes, is there once.
func testUnflushedAnswerComesBeforeLaterWrites(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	ctx := t.Context()
	a := proxyCall(t, s, "u", "write", sm.Compensable, `{"content":"A"}`)
	must[model.Effect](t)(s.Commit(ctx, a.Effect.ID, model.Change{Result: json.RawMessage(`"wrote A"`)}))
	if err := s.AnsweredUnflushed(ctx, a.Effect.ID, model.Change{Actor: "mcp:client"}); err != nil {
		t.Fatal(err)
	}
	again := proxyCall(t, s, "u", "write", sm.Compensable, `{"content":"A"}`)
	if again.Outcome != model.OutcomeNew || again.Effect.ID == a.Effect.ID {
		t.Fatalf("the call made again after its unflushed answer: %+v", again)
	}
	// A replay's answer is recorded on the call it replays.
	must[model.Effect](t)(s.Commit(ctx, again.Effect.ID, model.Change{Result: json.RawMessage(`"wrote A again"`)}))
	retry := proxyCall(t, s, "u", "write", sm.Compensable, `{"content":"A"}`)
	if retry.Outcome != model.OutcomeReplayed {
		t.Fatalf("a retry: %+v", retry)
	}
	must[struct{}](t)(struct{}{}, s.AnsweredUnflushed(ctx, retry.Effect.ID, model.Change{}))
	third := proxyCall(t, s, "u", "write", sm.Compensable, `{"content":"A"}`)
	if third.Outcome != model.OutcomeNew {
		t.Fatalf("the call made again after its replay's unflushed answer: %+v", third)
	}
	// The answer of a call that did not commit writes nothing.
	before := must[model.EffectDetail](t)(s.GetEffect(ctx, third.Effect.ID))
	if err := s.AnsweredUnflushed(ctx, third.Effect.ID, model.Change{}); err != nil && !errors.Is(err, model.ErrConflict) {
		t.Fatalf("unflushed answer of an executing call: %v", err)
	}
	must[model.Effect](t)(s.Commit(ctx, third.Effect.ID, model.Change{Result: json.RawMessage(`"wrote A a third time"`)}))
	after := must[model.EffectDetail](t)(s.GetEffect(ctx, third.Effect.ID))
	if len(after.History) != len(before.History)+1 || after.History[len(after.History)-1].Kind == model.KindAnswer {
		t.Fatalf("history after an unflushed answer of an executing call: %s", states(after.History))
	}
	for _, id := range []uint64{a.Effect.ID, again.Effect.ID} {
		answers := 0
		for _, h := range must[model.EffectDetail](t)(s.GetEffect(ctx, id)).History {
			if h.Kind == model.KindAnswer {
				answers++
			}
		}
		if answers != 1 {
			t.Fatalf("effect %d has %d answer records, want 1", id, answers)
		}
	}
	verifyClean(t, s)
}
