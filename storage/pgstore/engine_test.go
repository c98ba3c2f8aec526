package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/pgstore"
)

func open(url string) effectlog.Log { return effectlog.New(pgstore.New(url), effectlog.Options{}) }

// A server that is not there is one line, naming the log without its
// password, and nothing panics.
func TestUnreachableServerIsOneLine(t *testing.T) {
	log := open("postgres://agent:hunter2@127.0.0.1:1/undolog?connect_timeout=2")
	defer log.Close()
	for name, op := range map[string]func() error{
		"write": func() error { _, err := log.CreateSession(t.Context(), effectlog.NewSession{ID: "s"}); return err },
		"read":  func() error { _, _, err := log.ListEffects(t.Context(), effectlog.EffectFilter{}); return err },
	} {
		err := op()
		if err == nil || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "hunter2") ||
			!strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "agent:xxxxx@127.0.0.1:1") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A database of a newer schema is refused, for reads and writes, with a
// clear error; nothing is written to it.
func TestNewerSchemaIsRefused(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	log := open(url)
	if _, err := log.CreateSession(t.Context(), effectlog.NewSession{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	log.Close()
	exec(t, url, `UPDATE undolog_meta SET value = 99 WHERE key = 'schema_version'`)
	log = open(url)
	defer log.Close()
	if _, _, err := log.ListEffects(t.Context(), effectlog.EffectFilter{}); !errors.Is(err, model.ErrNewerSchema) || !strings.Contains(err.Error(), "schema version 99") {
		t.Fatalf("read: %v", err)
	}
	if _, err := log.CreateSession(t.Context(), effectlog.NewSession{ID: "t"}); !errors.Is(err, model.ErrNewerSchema) {
		t.Fatalf("write: %v", err)
	}
	if n := count(t, url, `SELECT count(*) FROM undolog_sessions`); n != 1 {
		t.Fatalf("%d sessions", n)
	}
}

// Processes that meet an empty database at once migrate it once, and all
// of their writes land.
func TestFirstUseByManyAtOnceMigratesOnce(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log := open(url)
			defer log.Close()
			_, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: fmt.Sprintf("s%d", i), Tool: "w",
				Tier: sm.Compensable, Args: json.RawMessage(`{}`), CreateSession: true})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, url, `SELECT count(*) FROM undolog_effects`); n != 8 {
		t.Fatalf("%d effects", n)
	}
}

// History rows are never updated: the database refuses it, whoever asks.
func TestHistoryIsAppendOnly(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	log := open(url)
	defer log.Close()
	if _, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatal(err)
	}
	// The write's changes are in the feed (published after its commit, at
	// once or a moment later): each table has a row to refuse to update.
	if _, err := log.LastChange(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"undolog_history", "undolog_session_history", "undolog_changes"} {
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(t.Context(), `UPDATE `+table+` SET seq = seq`)
		conn.Close(context.Background())
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: an update was let through: %v", table, err)
		}
	}
}

func exec(t *testing.T, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, url, sql string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A write that finds another giving change positions commits without
// waiting for it, and its changes stay out of the feed until they have
// positions: then they follow every change before them, without a gap.
func TestChangesQueuedBehindAPublisherComeAfterWithoutAGap(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	log := open(url)
	defer log.Close()
	intercept := func(session string) model.Effect {
		t.Helper()
		res, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: session, Tool: "w", Tier: sm.Compensable,
			Args: json.RawMessage(`{}`), CreateSession: true, Start: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.Effect
	}
	intercept("a")
	// a's changes are published after its commit: wait for them, or they
	// land while b's are queued and read as b's.
	if _, err := log.LastChange(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := count(t, url, `SELECT count(*) FROM undolog_changes`)
	waiter := pgstore.New(url)
	defer waiter.Close()
	pgstore.RecordHeard(waiter)
	listening(t, waiter)

	tx := holdPublishLock(t, url)
	e := intercept("b") // returns: it does not wait for the lock
	if n := count(t, url, `SELECT count(*) FROM undolog_changes_pending`); n == 0 {
		t.Fatal("the write found the lock taken but queued nothing")
	}
	// Another process sees the effect but not yet its changes.
	other := open(url)
	defer other.Close()
	if _, err := other.GetEffect(t.Context(), e.ID); err != nil {
		t.Fatal(err)
	}
	if got, _, err := other.Changes(t.Context(), 0, 0); err != nil || len(got) != before {
		t.Fatalf("while queued: %d changes (%v), want %d", len(got), err, before)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, _, err := log.Changes(t.Context(), 0, 0) // waits for this engine's publish
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, url, `SELECT count(*) FROM undolog_changes_pending`); n != 0 || len(got) <= before {
		t.Fatalf("after the lock: %d queued, %d changes (had %d)", n, len(got), before)
	}
	var last uint32
	for i, c := range got {
		if c.Position != uint64(i+1) {
			t.Fatalf("change %d at position %d", i+1, c.Position)
		}
		if i < before {
			continue
		}
		if c.Record.Session != "b" || c.Record.Kind == model.KindEffect && c.Record.Seq <= last && c.Record.EffectID == e.ID {
			t.Fatalf("change %d: %+v", c.Position, c.Record)
		}
		if c.Record.Kind == model.KindEffect {
			last = c.Record.Seq
		}
	}
	if last != 2 {
		t.Fatalf("effect %d's records in the feed end at seq %d, want 2 (pending, executing)", e.ID, last)
	}
	// Waiters hear of the queued changes once they are in the feed, from the
	// publish: the write that queued them told nobody.
	end := uint64(len(got))
	waitUntil(t, "notification of the publish", func() bool { return slices.Contains(pgstore.Heard(waiter), end) })
	if heard := pgstore.Heard(waiter); !slices.Equal(heard, []uint64{end}) {
		t.Fatalf("heard %v; want only the publish's position %d", heard, end)
	}
}

// A database of schema 1 (ids from counter rows) goes on from its counters
// once migrated: no id is given twice.
func TestIDsGoOnFromSchemaOnesCounters(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	exec(t, url, pgstore.Migrations[0])
	exec(t, url, `INSERT INTO undolog_meta (key, value) VALUES ('schema_version', 1);
		UPDATE undolog_counters SET n = 41 WHERE name = 'effect';
		UPDATE undolog_counters SET n = 7 WHERE name = 'session'`)
	log := open(url)
	defer log.Close()
	res, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := log.GetSession(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if res.Effect.ID != 42 || sess.Seq != 8 {
		t.Fatalf("effect %d, session seq %d; want 42 and 8", res.Effect.ID, sess.Seq)
	}
	if v := count(t, url, `SELECT value FROM undolog_meta WHERE key = 'schema_version'`); v != pgstore.SchemaVersion {
		t.Fatalf("schema %d", v)
	}
}

// One engine that has read an empty database (its connections looked for
// the tables and found none) and then writes from many goroutines at once
// migrates once, and every write lands: a migration that waited for
// another's sees the tables that one made (it failed with "relation
// undolog_meta already exists": the connection's catalog cache still said
// there were none).
func TestFirstWritesOfOneEngineAfterReadsMigrateOnce(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	log := open(url)
	defer log.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := log.ListEffects(t.Context(), effectlog.EffectFilter{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: fmt.Sprintf("s%d", i), Tool: "w",
				Tier: sm.Compensable, Args: json.RawMessage(`{}`), CreateSession: true})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, url, `SELECT count(*) FROM undolog_effects`); n != 8 {
		t.Fatalf("%d effects", n)
	}
}

// A server that takes the connection and never answers (a hung server, a
// proxy whose database is gone) fails a command within the default connect
// timeout, in one line naming the log: it does not hold it for minutes.
func TestSilentServerTimesOut(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, say nothing
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	log := open("postgres://agent:hunter2@" + l.Addr().String() + "/undolog?sslmode=disable")
	defer log.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*pgstore.DefaultConnectTimeout)
	defer cancel()
	_, _, err = log.ListEffects(ctx, effectlog.EffectFilter{})
	if ctx.Err() != nil {
		t.Fatalf("still connecting after %v: the connect timeout did not end it", 3*pgstore.DefaultConnectTimeout)
	}
	if err == nil || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "hunter2") ||
		!strings.Contains(err.Error(), "agent:xxxxx@"+l.Addr().String()) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("%v", err)
	}
}

// The signature look-up takes the new effect id only when it finds no
// owner: a repeated call takes none, so the next new effect's id follows
// the last one's.
func TestARepeatTakesNoEffectID(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	log := open(url)
	defer log.Close()
	call := func(args string) uint64 {
		t.Helper()
		res, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
			Args: json.RawMessage(args), CreateSession: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.Effect.ID
	}
	first := call(`{"n":1}`)
	if again := call(`{"n":1}`); again != first {
		t.Fatalf("the repeat is effect %d, not %d", again, first)
	}
	if next := call(`{"n":2}`); next != first+1 {
		t.Fatalf("the next new effect is %d after %d", next, first)
	}
}

// holdPublishLock takes, in a transaction of the test's own on the database
// at url, the lock under which writes publish their change positions: a
// write then queues its changes. Ending tx lets it go.
func holdPublishLock(t *testing.T, url string) pgx.Tx {
	t.Helper()
	holder, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close(context.Background()) })
	tx, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM undolog_feed_floor FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	return tx
}
