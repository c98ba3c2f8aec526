package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// One row that does not decode, as a role that may write the tables leaves
// it (a history record of another team's effect, its undo record blanked),
// harms only that effect: list, show and session show of everything else
// work and exit 0, the damaged one is listed as damaged by its id (text and
// JSON), show of it prints it as damaged and exits 1, and export names it
// and exits 1. So with a session's record: listed as damaged, session show
// of it exits 1.
func TestDamagedRowHarmsOnlyItsEffect(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	store := logaddr.Open(url, logaddr.Options{})
	mine := committedCall(t, store, "write", `{"n":1}`, nil)
	theirs := committedCall(t, store, "write", `{"n":2}`, nil)
	if _, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "t", Tool: "write", Tier: sm.Compensable,
		Args: json.RawMessage(`{"n":3}`), CreateSession: true}); err != nil {
		t.Fatal(err)
	}
	// Session u: an irreversible call that ran, and a compensable one.
	paid, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "u", Tool: "pay", Tier: sm.Irreversible,
		Args: json.RawMessage(`{"n":4}`), CreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func(context.Context, uint64, model.Change) (model.Effect, error){store.Approve, store.Start, store.Commit} {
		if _, err := step(t.Context(), paid.Effect.ID, model.Change{Actor: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "u", Tool: "write", Tier: sm.Compensable,
		Args: json.RawMessage(`{"n":5}`)}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), fmt.Sprintf(`SET session_replication_role = replica;
		UPDATE undolog_history SET rec = '\xff00'::bytea WHERE effect_id = %d AND seq = 2;
		UPDATE undolog_undo SET rec = ''::bytea WHERE effect_id = %d`, theirs, theirs))
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatUint(theirs, 10)

	code, out, stderr := undolog(t, url, "list")
	if code != 0 || !strings.Contains(out, "damaged") || !strings.Contains(out, "committed") {
		t.Fatalf("list: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = undolog(t, url, "list", "-o", "json")
	var listed []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 5 {
		t.Fatalf("list -o json: exit %d\n%s%s", code, out, stderr)
	}
	for _, e := range listed {
		if uint64(e["id"].(float64)) == theirs && e["undo_state"] != "damaged" {
			t.Fatalf("list -o json shows effect %d's undo entry as %v, want damaged", theirs, e["undo_state"])
		}
	}
	if code, out, stderr = undolog(t, url, "show", strconv.FormatUint(mine, 10)); code != 0 {
		t.Fatalf("show of an effect left alone: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = undolog(t, url, "session", "show", "s")
	if code != 0 || !strings.Contains(out, "damaged") {
		t.Fatalf("session show: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = undolog(t, url, "show", strconv.FormatUint(mine, 10), id)
	if code != ExitError || !strings.Contains(out, "effect "+strconv.FormatUint(mine, 10)+"  committed") ||
		!strings.Contains(out, "damage:") || !strings.Contains(stderr, "effect "+id+" is damaged") {
		t.Fatalf("show of it and another: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = undolog(t, url, "show", id, "-o", "json")
	var shown map[string]map[string]any
	if code != ExitError || json.Unmarshal([]byte(out), &shown) != nil || shown["effect"]["damage"] == nil {
		t.Fatalf("show -o json of it: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = undolog(t, url, "export")
	if code != ExitError || !strings.Contains(stderr, "effect "+id) {
		t.Fatalf("export: exit %d\n%.300s%s", code, out, stderr)
	}
	t.Logf("export: %s", stderr)

	// A session whose record does not read is listed as damaged; session
	// show of it fails, of another works.
	if _, err := conn.Exec(t.Context(), `SET session_replication_role = replica;
		UPDATE undolog_sessions SET rec = '\xff00'::bytea WHERE id = 't'`); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = undolog(t, url, "session", "list")
	if code != 0 || !strings.Contains(out, "t\tdamaged") || !strings.Contains(stderr, "session t is damaged") {
		t.Fatalf("session list: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr = undolog(t, url, "session", "show", "t"); code != ExitError {
		t.Fatalf("session show of the damaged session: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr = undolog(t, url, "session", "show", "s"); code != 0 {
		t.Fatalf("session show of another: exit %d\n%s%s", code, out, stderr)
	}

	// Undo plans nothing around a damaged effect, though listings show it:
	// it cannot tell what that effect did (an irreversible call that ran).
	if _, err := conn.Exec(t.Context(), fmt.Sprintf(`SET session_replication_role = replica;
		UPDATE undolog_effects SET rec = '\xff00'::bytea WHERE id = %d`, paid.Effect.ID)); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = undolog(t, url, "undo", "u", "--dry-run")
	if code != ExitError || !strings.Contains(stderr, fmt.Sprintf("effect %d of session u is damaged", paid.Effect.ID)) {
		t.Fatalf("undo --dry-run of a session with a damaged effect: exit %d\n%s%s", code, out, stderr)
	}
}
