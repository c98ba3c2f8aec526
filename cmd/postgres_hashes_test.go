package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// nsClock is a clock whose times have nanoseconds that a microsecond
// (PostgreSQL's timestamptz) would drop: each reading 1.000123457 s after
// the last.
type nsClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *nsClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second + 123457*time.Nanosecond)
	return c.t
}

// exportLines is the export of log as its JSON lines, less the first (meta).
func exportLines(t *testing.T, log effectlog.Log) []byte {
	t.Helper()
	var buf bytes.Buffer
	err := log.Export(t.Context(), "", func(r effectlog.ExportRecord) error {
		if r.Type == "meta" {
			return nil
		}
		return writeJSONLine(&buf, r)
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withMeta is an export of exportLines' records: its meta record first.
func withMeta(lines []byte) io.Reader {
	return io.MultiReader(strings.NewReader(`{"type":"meta","record":{"schema_version":1}}`+"\n"), bytes.NewReader(lines))
}

// A log written on a file with times to the nanosecond, exported and
// imported into PostgreSQL (as `undolog import` reads an export), holds the
// same records with the same times and hashes, verifies clean there, goes
// on verifying clean as it is written to with such times, and comes back
// to a file the same.
func TestNanosecondTimesKeepTheirHashesAcrossEngines(t *testing.T) {
	clk := &nsClock{t: time.Date(2026, 12, 1, 9, 0, 0, 987654321, time.UTC)}
	ctx := t.Context()
	file := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{Now: clk.now})
	defer file.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := file.CreateSession(ctx, effectlog.NewSession{ID: "build", Meta: map[string]string{"pipeline": "api"}, Actor: "ci"}); err != nil {
		t.Fatal(err)
	}
	req := effectlog.InterceptRequest{Session: "build", Tool: "deploy", Tier: sm.Compensable, Args: json.RawMessage(`{"env":"staging"}`),
		Compensation: &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"true"}}, Actor: "ci"}
	res, err := file.Intercept(ctx, req)
	must(err)
	_, err = file.Start(ctx, res.Effect.ID, model.Change{Actor: "ci"})
	must(err)
	_, err = file.Commit(ctx, res.Effect.ID, model.Change{Actor: "ci", Result: json.RawMessage(`{"url":"https://x"}`)})
	must(err)
	_, err = file.Intercept(ctx, req) // a replay
	must(err)
	wire, err := file.Intercept(ctx, effectlog.InterceptRequest{Session: "build", Tool: "wire", Tier: sm.Irreversible,
		Args: json.RawMessage(`{"amount":5}`), ApprovalTimeout: time.Hour, Actor: "ci", Reason: "pay"})
	must(err)
	_, err = file.Approve(ctx, wire.Effect.ID, model.Change{Actor: "alice", Reason: "ok"})
	must(err)
	_, err = file.UndoStep(ctx, res.Effect.ID, sm.EntryCompensating, model.Change{Actor: "ci"})
	must(err)
	_, err = file.UndoStep(ctx, res.Effect.ID, sm.EntryCompensated, model.Change{Actor: "ci"})
	must(err)

	d, err := file.GetEffect(ctx, res.Effect.ID)
	must(err)
	if d.Effect.UpdatedAt.Nanosecond()%1000 == 0 || d.History[2].At.Nanosecond()%1000 == 0 {
		t.Fatalf("the clock's times have no nanoseconds: %v %v", d.Effect.UpdatedAt, d.History[2].At)
	}
	src := exportLines(t, file)

	pg := logaddr.Open(pgtest.Server(t).NewDatabase(t), logaddr.Options{Now: clk.now})
	defer pg.Close()
	if _, err := pg.Import(ctx, exportReader(ctx, withMeta(src))); err != nil {
		t.Fatal(err)
	}
	if rep, err := pg.Verify(ctx); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("verify on PostgreSQL: %v %v", rep.Problems, err)
	}
	if got := exportLines(t, pg); !bytes.Equal(got, src) {
		t.Fatalf("PostgreSQL's export differs from the file's:\n%s\nfile:\n%s", got, src)
	}
	back, err := pg.GetEffect(ctx, res.Effect.ID)
	must(err)
	if !back.Effect.UpdatedAt.Equal(d.Effect.UpdatedAt) || back.History[2].Hash != d.History[2].Hash || !back.History[2].At.Equal(d.History[2].At) {
		t.Fatalf("PostgreSQL holds %v %s, the file %v %s", back.History[2].At, back.History[2].Hash, d.History[2].At, d.History[2].Hash)
	}

	// Written to on PostgreSQL with nanosecond times, it verifies clean.
	next, err := pg.Intercept(ctx, effectlog.InterceptRequest{Session: "build", Tool: "notify", Tier: sm.Compensable, Args: json.RawMessage(`{}`), Actor: "ci"})
	must(err)
	_, err = pg.Start(ctx, next.Effect.ID, model.Change{Actor: "ci"})
	must(err)
	_, err = pg.Commit(ctx, next.Effect.ID, model.Change{Actor: "ci"})
	must(err)
	// The approved wire runs first: a session with an approved call left does not complete.
	_, err = pg.Start(ctx, wire.Effect.ID, model.Change{Actor: "ci"})
	must(err)
	_, err = pg.Commit(ctx, wire.Effect.ID, model.Change{Actor: "ci"})
	must(err)
	_, err = pg.SetSessionState(ctx, "build", sm.SessionCompleted, model.Change{Actor: "ci"})
	must(err)
	if rep, err := pg.Verify(ctx); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("verify on PostgreSQL after writes: %v %v", rep.Problems, err)
	}

	// And back to a file: the same export, clean.
	onPG := exportLines(t, pg)
	again := logaddr.File(filepath.Join(t.TempDir(), "again.db"), logaddr.Options{Now: clk.now})
	defer again.Close()
	if _, err := again.Import(ctx, exportReader(ctx, withMeta(onPG))); err != nil {
		t.Fatal(err)
	}
	if rep, err := again.Verify(ctx); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("verify on the file again: %v %v", rep.Problems, err)
	}
	if got := exportLines(t, again); !bytes.Equal(got, onPG) {
		t.Fatalf("the file's export differs from PostgreSQL's:\n%s\nPostgreSQL:\n%s", got, onPG)
	}
}

// verify on PostgreSQL finds a record changed in the database behind
// undolog's back (by a superuser, with SQL), as it does in a file, with the
// same report and exit code (1), and undo then runs nothing.
func TestVerifyOnPostgresFindsATamperedRow(t *testing.T) {
	server := pgtest.Server(t)
	addr := server.NewDatabase(t)
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := runWithLog(t, addr, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("intercept", "--session", "s", "--tool", "a", "--tier", "compensable", "--args", `{"n":1}`, "--compensate-cmd", "touch first-ran")
	run("intercept", "--session", "s", "--tool", "b", "--tier", "compensable", "--args", `{"n":2}`, "--compensate-cmd", "touch ran-original")
	for _, id := range []string{"1", "2"} {
		run("start", id)
		run("commit", id, "--result", `{"ok":true}`)
	}
	if out := run("verify"); !strings.HasPrefix(out, "ok: 1 session, 2 effects") {
		t.Fatalf("verify: %s", out)
	}

	// What a superuser can do: change bytes inside a record.
	replace := func(table, where, from, to string) {
		t.Helper()
		tag, err := adminConn(t, addr).Exec(t.Context(), `UPDATE `+table+` SET rec = overlay(rec placing convert_to($2, 'UTF8')
			from position(convert_to($1, 'UTF8') in rec)) WHERE `+where+` AND position(convert_to($1, 'UTF8') in rec) > 0`, from, to)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("change %s in %s: %v %v", from, table, tag, err)
		}
	}
	replace("undolog_effects", "id = 2", "ran-original", "ran-tampered")
	verify := runWithLog(t, addr, "verify")
	out, err := verify.CombinedOutput()
	if code := exitCodeOf(err); code != ExitError || !strings.Contains(string(out), "history: effect 2: records 1, 2, 3 were altered, or what the effect says") {
		t.Fatalf("verify of a tampered effect row: exit %d\n%s", code, out)
	}
	undo := runWithLog(t, addr, "undo", "s", "--yes")
	undo.Dir = dir
	out, err = undo.CombinedOutput()
	if code := exitCodeOf(err); code != ExitError || !strings.Contains(string(out), "damaged or tampered") {
		t.Fatalf("undo of a tampered effect: exit %d\n%s", code, out)
	}
	for _, f := range []string{"ran-original", "ran-tampered", "first-ran"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Fatalf("undo ran a compensation (%s) of a tampered log", f)
		}
	}
	replace("undolog_effects", "id = 2", "ran-tampered", "ran-original")
	run("verify")

	// A history row: the append-only trigger keeps undolog's own writes
	// from it; a superuser who turns triggers off is found by the hashes.
	conn := adminConn(t, addr)
	if _, err := conn.Exec(t.Context(), `SET session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	tag, err := conn.Exec(t.Context(), `UPDATE undolog_history SET rec = overlay(rec placing convert_to('xester', 'UTF8')
		from position(convert_to('tester', 'UTF8') in rec)) WHERE effect_id = 1 AND seq = 2`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("update the history row: %v %v", tag, err)
	}
	verify = runWithLog(t, addr, "verify")
	out, err = verify.CombinedOutput()
	if code := exitCodeOf(err); code != ExitError || !strings.Contains(string(out), "history: effect 1:") {
		t.Fatalf("verify of a tampered history row: exit %d\n%s", code, out)
	}
}

// adminConn is a connection to the database at u, closed when t ends.
func adminConn(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
