// Package conformance is the effect log's semantic test suite, written only
// against the effectlog.Log interface and the statemachine tables: every engine
// runs it (go test in the engine's package calls Run), so that all of them
// keep the same rules.
package conformance

import (
	"context"
	"encoding/json"
	"flag"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"pgregory.net/rapid"
)

// NewLog returns an empty log for one test, reading the time from now. The
// engine cleans it up with t.Cleanup.
type NewLog func(t *testing.T, now func() time.Time) effectlog.Log

// opener gives a test a fresh log and the clock it reads.
type opener func(t *testing.T) (effectlog.Log, *clock)

// Run runs the whole suite against logs made by newLog, each test in a
// subtest of its own with a fresh log.
func Run(t *testing.T, newLog NewLog) { RunWith(t, newLog, Options{}) }

// Options bound what the suite spends on an engine whose logs are dear to
// make: its tests that make many logs make fewer.
type Options struct {
	// RandomChecks, if not zero, is at most how many random operation
	// sequences RandomOperationsAgreeWithTheModel checks (each on a fresh
	// log), in place of rapid's -rapid.checks when that is more; -short
	// divides it by five as it does the flag.
	RandomChecks int
	// Exports, if not zero, is how many times ExportWhileWritten exports
	// (each export imported into a fresh log) in place of ten; -short
	// makes it three at most.
	Exports int
}

// RunWith is Run within opts.
func RunWith(t *testing.T, newLog NewLog, opts Options) {
	open := func(t *testing.T) (effectlog.Log, *clock) {
		t.Helper()
		clk := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
		return newLog(t, clk.now), clk
	}
	for _, c := range suite {
		run := c.run
		if c.name == exportsWhileWritten && opts.Exports > 0 {
			run = func(t *testing.T, open opener) { exportWhileWritten(t, open, opts.Exports) }
		}
		t.Run(c.name, func(t *testing.T) {
			if c.name == randomOperations && opts.RandomChecks > 0 {
				defer limitRandomChecks(t, opts.RandomChecks)()
			}
			run(t, open)
		})
	}
}

// The names of the suite's tests that Options bound.
const (
	randomOperations    = "RandomOperationsAgreeWithTheModel"
	exportsWhileWritten = "ExportWhileWritten"
)

// limitRandomChecks lowers rapid's number of checks to at most n until the
// function it returns is called. rapid reads it from its flag, the only
// setting it has; the suite's tests run one at a time.
func limitRandomChecks(t *testing.T, n int) (restore func()) {
	checks := flag.Lookup("rapid.checks")
	if checks == nil {
		t.Fatal("conformance: rapid has no -rapid.checks flag")
	}
	was := checks.Value.String()
	if current, err := strconv.Atoi(was); err == nil && current <= n {
		return func() {}
	}
	if err := checks.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	return func() { checks.Value.Set(was) }
}

var suite = []struct {
	name string
	run  func(*testing.T, opener)
}{
	{"SafeCallsWriteNothing", testSafeCallsWriteNothing},
	{"CompensableLifecycleAndReplay", testCompensableLifecycleAndReplay},
	{"NumbersAreExact", testNumbersAreExact},
	{"LoneSurrogatesAndNULsAreKept", testLoneSurrogatesAndNULsAreKept},
	{"NULsInActorsAndErrors", testNULsInActorsAndErrors},
	{"RetryAfterFail", testRetryAfterFail},
	{"SameCallAnotherTierIsRefused", testSameCallAnotherTierIsRefused},
	{"EveryEffectTransition", testEveryEffectTransition},
	{"InvalidTransitionsChangeNothing", testInvalidTransitionsChangeNothing},
	{"BadInterceptInput", testBadInterceptInput},
	{"InterceptManyIsOneAllOrNothingTransaction", testInterceptManyIsOneAllOrNothingTransaction},
	{"ClockGoingBackwards", testClockGoingBackwards},
	{"IrreversibleApprovePath", testIrreversibleApprovePath},
	{"RejectHaltsSession", testRejectHaltsSession},
	{"ApprovalExpiry", testApprovalExpiry},
	{"SecondDecisionIsInvalidTransition", testSecondDecisionIsInvalidTransition},
	{"FailedIrreversibleNeedsNewDecision", testFailedIrreversibleNeedsNewDecision},
	{"SessionMoveClosesApprovals", testSessionMoveClosesApprovals},
	{"DecisionOnTheCallShown", testDecisionOnTheCallShown},
	{"RejectionClosesOtherRequests", testRejectionClosesOtherRequests},
	{"FailInClosedSessionClosesNewRequest", testFailInClosedSessionClosesNewRequest},
	{"Sessions", testSessions},
	{"UpstreamDir", testUpstreamDir},
	{"UpstreamStateEnv", testUpstreamStateEnv},
	{"NoNewEffect", testNoNewEffect},
	{"EverySessionTransition", testEverySessionTransition},
	{"ListEffectsFiltersAndPages", testListEffectsFiltersAndPages},
	{"EveryFilterCombination", testEveryFilterCombination},
	{"ReadLimits", testReadLimits},
	{"UndoSteps", testUndoSteps},
	{"EveryUndoEntryTransition", testEveryUndoEntryTransition},
	{"GCKeepsSessionsWithACallExecuting", testGCKeepsSessionsWithACallExecuting},
	{"GCDropsOnlyOldSessionsInTheGivenStates", testGCDropsOnlyOldSessionsInTheGivenStates},
	{"Export", testExport},
	{exportsWhileWritten, testExportWhileWritten},
	{"ImportRefusesWhatAWriterMadeMeanwhile", testImportRefusesWhatAWriterMadeMeanwhile},
	{"RefusedImportInAnotherZoneLeavesNothing", testRefusedImportInAnotherZoneLeavesNothing},
	{"SameSignatureFromManyGoroutines", testSameSignatureFromManyGoroutines},
	{randomOperations, testRandomOperations},
	{"CloseKeepsWhatWasWritten", testCloseKeepsWhatWasWritten},
	{"ReclaimOfAnOwnerThatChangedIsRefused", testReclaimOfAnOwnerThatChangedIsRefused},
	{"CompensationOwnerIsTakenOnlyByReclaim", testCompensationOwnerIsTakenOnlyByReclaim},
	{"RenewLeaseOnlyWhileOwned", testRenewLeaseOnlyWhileOwned},
	{"VerifyFindsWhatChangedBehindTheRules", testVerifyFindsWhatChangedBehindTheRules},
	{"VerifyTellsTheSidesApart", testVerifyTellsTheSidesApart},
	{"FeedUnderConcurrentWritersNeverSkips", testFeedUnderConcurrentWritersNeverSkips},
	{"ApprovalTimeoutPastTheLastTimeIsRefused", testApprovalTimeoutPastTheLastTimeIsRefused},
	{"ReopenedApprovalPastTheLastTime", testReopenedApprovalPastTheLastTime},
	{"RepeatAfterTheAnswerRunsAgain", testRepeatAfterTheAnswerRunsAgain},
	{"AnswersOfCommittedCallsOnly", testAnswersOfCommittedCallsOnly},
	{"UnflushedAnswerComesBeforeLaterWrites", testUnflushedAnswerComesBeforeLaterWrites},
	{"RepeatsOfAnAnsweredCallRace", testRepeatsOfAnAnsweredCallRace},
	{"InputRoundsOfTheOwnerOnly", testInputRoundsOfTheOwnerOnly},
	{"ResumeAHaltedSession", testResumeAHaltedSession},
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func must[T any](t rapid.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// pending lists every waiting approval request and checks the count agrees.
func pending(t rapid.TB, s effectlog.Log) []effectlog.PendingApproval {
	t.Helper()
	list, waiting, err := s.PendingApprovals(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if waiting != len(list) {
		t.Fatalf("%d requests listed, %d counted as waiting", len(list), waiting)
	}
	return list
}

// undoStack lists a session's whole undo stack and checks the count agrees.
func undoStack(t rapid.TB, s effectlog.Log, session string) []model.UndoEntry {
	t.Helper()
	stack, total, err := s.UndoStack(context.Background(), session, 0)
	if err != nil {
		t.Fatal(err)
	}
	if total != len(stack) {
		t.Fatalf("%d entries listed, %d counted", len(stack), total)
	}
	return stack
}

func intercept(t rapid.TB, s effectlog.Log, session, tool string, tier sm.Tier, args string) effectlog.InterceptResult {
	t.Helper()
	return must[effectlog.InterceptResult](t)(s.Intercept(context.Background(), effectlog.InterceptRequest{Session: session, Tool: tool, Tier: tier,
		Args: json.RawMessage(args), CreateSession: true, Actor: "tester"}))
}

func verifyClean(t rapid.TB, s effectlog.Log) effectlog.VerifyReport {
	t.Helper()
	rep := must[effectlog.VerifyReport](t)(s.Verify(context.Background()))
	if len(rep.Problems) != 0 {
		t.Fatalf("verify found problems: %v", rep.Problems)
	}
	return rep
}

func states(h []model.HistoryRecord) string {
	var out []string
	for _, r := range h {
		out = append(out, r.Kind+":"+r.From+">"+r.To)
	}
	return strings.Join(out, " ")
}
