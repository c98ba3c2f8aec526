package conformance

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

func testSameSignatureFromManyGoroutines(t *testing.T, newStore opener) {
	s, _ := newStore(t)
	const n = 32
	var wg sync.WaitGroup
	results := make([]effectlog.InterceptResult, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "race", Tool: "charge", Tier: sm.Compensable,
				Args: json.RawMessage(`{"amount":5}`), CreateSession: true})
		}(i)
	}
	wg.Wait()
	owners := map[uint64]bool{}
	count := map[model.Outcome]int{}
	for i := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		count[results[i].Outcome]++
		owners[results[i].Effect.ID] = true
	}
	// One call creates the owner; the rest find it registered, never started.
	if count[model.OutcomeNew] != 1 || count[model.OutcomePending] != n-1 || len(owners) != 1 {
		t.Fatalf("outcomes %v, owners %v", count, owners)
	}

	// Now full lifecycles racing on one signature: exactly one execution.
	var executed sync.Map
	var mu sync.Mutex
	count = map[model.Outcome]int{}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "race", Tool: "ship", Tier: sm.Compensable, CreateSession: true})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			count[res.Outcome]++
			mu.Unlock()
			if res.Outcome == model.OutcomeNew || res.Outcome == model.OutcomeRetry {
				if _, err := s.Start(t.Context(), res.Effect.ID, model.Change{}); err != nil {
					return // another goroutine claimed it first: the state machine refused the second start
				}
				executed.Store(i, true)
				if _, err := s.Commit(t.Context(), res.Effect.ID, model.Change{Result: json.RawMessage(`"shipped"`)}); err != nil {
					t.Error(err)
				}
			}
		}(i)
	}
	wg.Wait()
	runs := 0
	executed.Range(func(_, _ any) bool { runs++; return true })
	list, _, _ := s.ListEffects(t.Context(), effectlog.EffectFilter{Session: "race", Tool: "ship"})
	replays := 0
	for _, e := range list {
		if e.State == sm.Replayed {
			replays++
		}
	}
	if runs != 1 || count[model.OutcomeNew] != 1 || replays != count[model.OutcomeReplayed] || len(list) != 1+replays {
		t.Fatalf("runs %d, outcomes %v, %d effects, %d replays", runs, count, len(list), replays)
	}
	verifyClean(t, s)
}
