package boltfile

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// clock is a settable time source for tests.
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

func newStore(t *testing.T) (*testLog, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	s := newTestLog(filepath.Join(t.TempDir(), "state", "undolog.db"), testOptions{LockTimeout: 2 * time.Second, Now: clk.now})
	t.Cleanup(func() { s.pause() }) // the committer lets the log go before the directory goes
	return s, clk
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// pending lists every waiting approval request and checks the count agrees.
func pending(t *testing.T, s *testLog) []effectlog.PendingApproval {
	t.Helper()
	list, waiting, err := s.PendingApprovals(t.Context(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if waiting != len(list) {
		t.Fatalf("%d requests listed, %d counted as waiting", len(list), waiting)
	}
	return list
}

func intercept(t *testing.T, s *testLog, session, tool string, tier sm.Tier, args string) effectlog.InterceptResult {
	t.Helper()
	return must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: session, Tool: tool, Tier: tier,
		Args: json.RawMessage(args), CreateSession: true, Actor: "tester"}))
}

func verifyClean(t *testing.T, s *testLog) effectlog.VerifyReport {
	t.Helper()
	rep := must[effectlog.VerifyReport](t)(s.Verify(t.Context()))
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

func TestCreateFileModeAndSchema(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "s1", "write", sm.Compensable, `{}`)
	info, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", info.Mode().Perm())
	}
	db, err := bolt.Open(s.Path(), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bMeta).Get(keySchema); btoi(v) != SchemaVersion {
			t.Errorf("schema record %x", v)
		}
		return nil
	})
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(s.Path()), ".undolog-new-*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestReadsDoNotCreateTheLog(t *testing.T) {
	s, _ := newStore(t)
	if list, _, err := s.ListEffects(t.Context(), effectlog.EffectFilter{}); err != nil || len(list) != 0 {
		t.Fatalf("%v %v", list, err)
	}
	if _, err := s.GetEffect(t.Context(), 1); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("GetEffect on no log: %v", err)
	}
	if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read created the log: %v", err)
	}
}

// The suite (conformance) checks what a safe call answers; here, that it
// does not even create the file.
func TestSafeCallsWriteNothing(t *testing.T) {
	s, _ := newStore(t)
	must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s1", Tool: "read", Tier: sm.Safe, Args: json.RawMessage(`{"a":1}`)}))
	if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a safe call touched the log: %v", err)
	}
}

// The suite checks that bad input is refused; here, that it creates no file.
func TestBadInterceptInputCreatesNoLog(t *testing.T) {
	s, _ := newStore(t)
	for _, req := range []effectlog.InterceptRequest{
		{Session: "s", Tool: "t", Tier: "maybe", CreateSession: true},
		{Session: "s", Tool: "t", Tier: sm.Compensable, Args: json.RawMessage(`{"a":`), CreateSession: true},
	} {
		if _, err := s.Intercept(t.Context(), req); !errors.Is(err, model.ErrInvalidInput) {
			t.Errorf("%+v: %v", req, err)
		}
	}
	if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bad input created the log")
	}
}

func TestBusyLog(t *testing.T) {
	s, _ := newStore(t)
	intercept(t, s, "s", "t", sm.Compensable, `{}`)
	held, err := bolt.Open(s.Path(), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	quick := newTestLog(s.Path(), testOptions{LockTimeout: 100 * time.Millisecond})
	_, err = quick.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "t2", Tier: sm.Compensable})
	if !errors.Is(err, model.ErrBusy) || !strings.Contains(err.Error(), s.Path()) {
		t.Fatalf("want ErrBusy naming the file, got %v", err)
	}
	if _, err := quick.GetEffect(t.Context(), 1); !errors.Is(err, model.ErrBusy) {
		t.Fatalf("read while held: %v", err)
	}
	// Released within the timeout: the write gets through.
	go func() { time.Sleep(150 * time.Millisecond); held.Close() }()
	patient := newTestLog(s.Path(), testOptions{LockTimeout: 3 * time.Second})
	if _, err := patient.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "t2", Tier: sm.Compensable}); err != nil {
		t.Fatal(err)
	}
}

// A lifecycle that starts with the intercept is two write transactions.
func TestInterceptAndStartIsOneTransaction(t *testing.T) {
	s, _ := newStore(t)
	must[model.Session](t)(s.CreateSession(t.Context(), effectlog.NewSession{ID: "two"}))
	before := s.group.durableWrites()
	res := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "two", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`1`), Start: true, Owner: &model.Owner{PID: 7, Host: "h"}}))
	if res.Outcome != model.OutcomeNew || res.Effect.State != sm.Executing || res.Effect.Owner == nil || res.Effect.Owner.PID != 7 {
		t.Fatalf("%+v", res)
	}
	must[model.Effect](t)(s.Commit(t.Context(), res.Effect.ID, model.Change{}))
	if n := s.group.durableWrites() - before; n != 2 {
		t.Fatalf("a lifecycle took %d durable writes", n)
	}
	// A retry starts in its intercept too.
	again := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "two", Tool: "w", Tier: sm.Compensable, Args: json.RawMessage(`2`), Start: true}))
	must[model.Effect](t)(s.Fail(t.Context(), again.Effect.ID, model.Change{Error: "boom"}))
	retry := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "two", Tool: "w", Tier: sm.Compensable, Args: json.RawMessage(`2`), Start: true}))
	if retry.Outcome != model.OutcomeRetry || retry.Effect.ID != again.Effect.ID || retry.Effect.State != sm.Executing {
		t.Fatalf("%+v", retry)
	}
	// An irreversible call is not started by its intercept: it waits for approval.
	irr := must[effectlog.InterceptResult](t)(s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "two", Tool: "pay", Tier: sm.Irreversible, Start: true}))
	if irr.Effect.State != sm.Pending {
		t.Fatalf("%+v", irr.Effect)
	}
	verifyClean(t, s)
}
