package pgstore_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
	"github.com/undolog/undolog/storage/pgstore"
)

// An unflushed write commits without waiting for the WAL's flush; the
// writes around it wait as before.
func TestUnflushedWriteCommitsAsynchronously(t *testing.T) {
	engine := pgstore.New(pgtest.Server(t).NewDatabase(t))
	t.Cleanup(func() { engine.Close() })
	setting := func(update func(fn func(storage.WriteTx) error) error) string {
		var got string
		if err := update(func(tx storage.WriteTx) error {
			var err error
			got, err = pgstore.SynchronousCommit(tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	ctx := t.Context()
	durable := func(fn func(storage.WriteTx) error) error { return engine.Update(ctx, fn) }
	unflushed := func(fn func(storage.WriteTx) error) error { return engine.UpdateUnflushed(ctx, fn) }
	if got := setting(unflushed); got != "off" {
		t.Errorf("an unflushed write runs with synchronous_commit %q", got)
	}
	if got := setting(durable); got != "on" {
		t.Errorf("a write after an unflushed one runs with synchronous_commit %q", got)
	}
}

// A server that crashes right after answers recorded unflushed loses at
// most those answers: every acknowledged write is there, the log
// verifies, and an answer followed by a durable write is there too.
func TestServerCrashLosesOnlyUnflushedAnswers(t *testing.T) {
	server := pgtest.Own(t)
	url := server.NewDatabase(t)
	log := effectlog.New(pgstore.New(url), effectlog.Options{})
	ctx := t.Context()
	var acked []uint64
	for i := range 30 {
		res, err := log.Intercept(ctx, effectlog.InterceptRequest{Session: "s", Tool: "write", Tier: sm.Compensable,
			Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), CreateSession: true, Start: true, RunAgainAnswered: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := log.Commit(ctx, res.Effect.ID, model.Change{}); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, res.Effect.ID)
		if err := log.AnsweredUnflushed(ctx, res.Effect.ID, model.Change{Actor: "mcp:client"}); err != nil {
			t.Fatal(err)
		}
	}
	log.Close()
	server.Crash(t)
	server.Start(t)

	log = effectlog.New(pgstore.New(url), effectlog.Options{})
	t.Cleanup(func() { log.Close() })
	lost := 0
	for i, id := range acked {
		d, err := log.GetEffect(ctx, id)
		if err != nil || d.Effect.State != sm.Committed {
			t.Fatalf("acknowledged effect %d lost: %+v %v", id, d.Effect, err)
		}
		answers := 0
		for _, h := range d.History {
			if h.Kind == model.KindAnswer {
				answers++
			}
		}
		switch {
		case answers > 1:
			t.Fatalf("effect %d has %d answer records", id, answers)
		case answers == 0 && i < len(acked)-1:
			t.Errorf("the answer of effect %d was lost though a durable write followed it", id)
		case answers == 0:
			lost++
		}
	}
	t.Logf("%d calls, %d answers lost", len(acked), lost)
	rep, err := log.Verify(ctx)
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("verify after the crash: %v %v", rep.Problems, err)
	}
}
