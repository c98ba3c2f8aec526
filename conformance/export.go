package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// An export of a log that a writer appends to meanwhile completes, every
// time: it holds each session as one transaction read it, which imports
// into an empty log and verifies clean there.
func testExportWhileWritten(t *testing.T, open opener) { exportWhileWritten(t, open, 10) }

// exportWhileWritten exports a log while a writer writes to it, exports
// times. -short exports three times at most: each export is imported into a
// new log, which on PostgreSQL is a database of its own.
func exportWhileWritten(t *testing.T, open opener, exports int) {
	s, _ := open(t)
	ctx := t.Context()
	const seeded = 1000
	if testing.Short() {
		exports = min(exports, 3)
	}
	call := func(session string, n int) effectlog.InterceptRequest {
		return effectlog.InterceptRequest{Session: session, Tool: "write", Tier: sm.Compensable,
			Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), CreateSession: true, Actor: "tester"}
	}
	var batch []effectlog.InterceptRequest
	for n := range seeded {
		if batch = append(batch, call("busy", n)); len(batch) == 200 {
			must[[]effectlog.InterceptResult](t)(s.InterceptMany(ctx, batch))
			batch = batch[:0]
		}
	}
	intercept(t, s, "quiet", "write", sm.Compensable, `{}`)

	// While an export runs, the writer appends calls to the session, up to
	// a hundred an export: it grows while it is exported, not beyond what
	// ten exports of it read in a test's time.
	const perExport = 100
	var wrote, allowed atomic.Int64
	stop, done := make(chan struct{}), make(chan error, 1)
	go func(stop <-chan struct{}) {
		for n := seeded; ; {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if wrote.Load() >= allowed.Load() {
				time.Sleep(time.Millisecond)
				continue
			}
			if _, err := s.Intercept(context.WithoutCancel(ctx), call("busy", n)); err != nil {
				done <- err
				return
			}
			n++
			wrote.Add(1)
		}
	}(stop)
	stopWriter := func() {
		t.Helper()
		if stop != nil {
			close(stop)
			stop = nil
			if err := <-done; err != nil {
				t.Fatalf("the writer: %v", err)
			}
		}
	}
	defer stopWriter()

	overlapped := 0
	for i := range exports {
		before := wrote.Load()
		allowed.Store(before + perExport)
		var recs []effectlog.ExportRecord
		// The export waits, between its check and its sessions and after
		// each session's read, for a write: every export runs while the
		// session grows, however fast it reads.
		awaitWrite := func() {
			w, deadline := wrote.Load(), time.Now().Add(10*time.Second)
			for wrote.Load() == w && wrote.Load() < allowed.Load() && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		err := s.Export(ctx, "", func(r effectlog.ExportRecord) error {
			if r.Type == "meta" || r.Type == "session" {
				awaitWrite()
			}
			recs = append(recs, r)
			return nil
		})
		if allowed.Store(0); wrote.Load() > before {
			overlapped++
		}
		if err != nil {
			t.Fatalf("export %d of %d, while a writer appends (%d writes so far): %v", i+1, exports, wrote.Load(), err)
		}
		busy := 0
		for _, r := range recs {
			if e, ok := r.Record.(model.Effect); ok && e.Session == "busy" {
				busy++
			}
		}
		if busy < seeded {
			t.Fatalf("export %d holds %d of session busy's effects, want at least %d", i+1, busy, seeded)
		}
		into, _ := open(t)
		next := 0
		rep, err := into.Import(ctx, func() (effectlog.ExportRecord, bool, error) {
			if next == len(recs) {
				return effectlog.ExportRecord{}, false, nil
			}
			next++
			return pointed(recs[next-1]), true, nil
		})
		if err != nil {
			t.Fatalf("import of export %d: %v", i+1, err)
		}
		if rep.Sessions != 2 || rep.Effects != busy+1 {
			t.Fatalf("import of export %d wrote %+v, want 2 sessions and %d effects", i+1, rep, busy+1)
		}
		verifyClean(t, into)
	}
	stopWriter()
	if overlapped != exports {
		t.Fatalf("the writer wrote while only %d of the %d exports ran", overlapped, exports)
	}
	t.Logf("%d of %d exports ran while the writer wrote; it wrote %d effects", overlapped, exports, wrote.Load())
	verifyClean(t, s)
}
