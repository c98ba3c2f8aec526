package boltfile

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// BenchmarkLifecycle is one durable lifecycle as exec and the proxy make
// it: intercept-and-start, then commit; two write transactions, each opening
// and closing the log and made durable by a journal append, with a
// checkpoint every few dozen.
func BenchmarkLifecycle(b *testing.B) {
	s := newTestLog(filepath.Join(b.TempDir(), "u.db"), testOptions{})
	b.Cleanup(func() { s.pause() })
	for i := 0; b.Loop(); i++ {
		res, err := s.Intercept(b.Context(), effectlog.InterceptRequest{Session: "bench", Tool: "write", Tier: sm.Compensable, CreateSession: true,
			Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Start: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Commit(b.Context(), res.Effect.ID, model.Change{Result: json.RawMessage(`{"ok":true}`)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetEffect reads one effect with its history from a log of 10,000.
func BenchmarkGetEffect(b *testing.B) {
	s := newTestLog(filepath.Join(b.TempDir(), "u.db"), testOptions{})
	b.Cleanup(func() { s.pause() })
	const n = 10000
	for i := 0; i < n; i++ {
		if _, err := s.Intercept(b.Context(), effectlog.InterceptRequest{Session: fmt.Sprintf("s%d", i%50), Tool: "write", Tier: sm.Compensable,
			CreateSession: true, Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; b.Loop(); i++ {
		if _, err := s.GetEffect(b.Context(), uint64(i%n+1)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadBesideJournal is a reading command's way into a log whose
// journal holds a checkpoint's worth of records bbolt already has, as a log
// in use mostly does: open, see that nothing is pending, read, close.
func BenchmarkReadBesideJournal(b *testing.B) {
	s := newTestLog(filepath.Join(b.TempDir(), "u.db"), testOptions{})
	for i := 0; i < journalMaxRecords-1; i++ {
		if _, err := s.Intercept(b.Context(), effectlog.InterceptRequest{Session: "bench", Tool: "write", Tier: sm.Compensable, CreateSession: true,
			Args: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":"%0900d"}`, i, 0))}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.checkpoint(); err != nil {
		b.Fatal(err)
	}
	s.pause()() // reads then go the way another process's do
	for b.Loop() {
		if _, err := s.GetEffect(b.Context(), 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadWithPendingJournal is a process's repeated reads of a log
// whose journal holds records bbolt does not (a checkpoint's worth less
// one, of 1 KiB effects, after 10,000 in bbolt): open read-only, read and
// check the journal, lay it over bbolt (the overlay made by the first read
// and reused while nothing changes), list 50 effects, close; beside the
// same reads once the journal is checkpointed.
func BenchmarkReadWithPendingJournal(b *testing.B) {
	s := newTestLog(filepath.Join(b.TempDir(), "u.db"), testOptions{})
	var batch []effectlog.InterceptRequest
	for i := 0; i < 10000; i++ {
		batch = append(batch, effectlog.InterceptRequest{Session: fmt.Sprintf("s%d", i%50), Tool: "write", Tier: sm.Compensable,
			CreateSession: true, Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
	}
	if _, err := s.InterceptMany(b.Context(), batch); err != nil {
		b.Fatal(err)
	}
	if err := s.checkpoint(); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < journalMaxRecords-1; i++ {
		if _, err := s.Intercept(b.Context(), effectlog.InterceptRequest{Session: "bench", Tool: "write", Tier: sm.Compensable, CreateSession: true,
			Args: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":"%0900d"}`, i, 0))}); err != nil {
			b.Fatal(err)
		}
	}
	s.pause()() // reads then go the way another process's do
	list := func(b *testing.B) {
		for b.Loop() {
			if list, _, err := s.ListEffects(b.Context(), effectlog.EffectFilter{Limit: 50}); err != nil || len(list) != 50 {
				b.Fatal(len(list), err)
			}
		}
	}
	b.Run("pending", list)
	if err := s.checkpoint(); err != nil {
		b.Fatal(err)
	}
	s.pause()()
	b.Run("checkpointed", list)
}
