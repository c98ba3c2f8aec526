package pgstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// started intercepts and starts a call in session s of log.
func started(t *testing.T, log effectlog.Log, s string, n int) uint64 {
	t.Helper()
	res, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: s, Tool: "write_file", Tier: sm.Compensable,
		Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), CreateSession: true, Start: true})
	if err != nil {
		t.Fatal(err)
	}
	return res.Effect.ID
}

// A process decides a commit on the rows it wrote last, with no read. Rows
// another process changed since are not trusted: the commit is decided again
// on a read, and says what a process that read them says.
func TestACommitOnRowsAnotherChangedDecidesAgain(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	a, b, c := open(url), open(url), open(url)
	defer a.Close()
	defer b.Close()
	defer c.Close()
	ok := model.Change{Result: json.RawMessage(`{"ok":true}`)}

	// The session changed: b's intercepts in it moved its counts.
	first := started(t, a, "s", 1)
	started(t, b, "s", 2)
	started(t, b, "s", 3)
	if _, err := a.Commit(t.Context(), first, ok); err != nil {
		t.Fatal(err)
	}
	sess, err := c.GetSession(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if sess.Effects != 3 || sess.Counts[sm.Committed] != 1 || sess.Counts[sm.Executing] != 2 {
		t.Fatalf("session s after b's two intercepts and a's commit: %d effects, counts %v; want 3, 1 committed and 2 executing",
			sess.Effects, sess.Counts)
	}

	// The effect changed: b failed it, then started it again and
	// committed it. a's commit is refused as c's is.
	second := started(t, a, "s", 4)
	for _, step := range []func() (model.Effect, error){
		func() (model.Effect, error) { return b.Fail(t.Context(), second, model.Change{Error: "lost"}) },
		func() (model.Effect, error) {
			return b.Start(t.Context(), second, model.Change{})
		},
		func() (model.Effect, error) { return b.Commit(t.Context(), second, ok) },
	} {
		if _, err := step(); err != nil {
			t.Fatal(err)
		}
	}
	_, want := c.Commit(t.Context(), second, model.Change{Result: json.RawMessage(`{"again":true}`)})
	_, got := a.Commit(t.Context(), second, model.Change{Result: json.RawMessage(`{"again":true}`)})
	if want == nil || got == nil || got.Error() != want.Error() {
		t.Fatalf("a's commit of an effect b committed: %v; a process that read it: %v", got, want)
	}
	d, err := c.GetEffect(t.Context(), second)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.History) != 5 || string(d.Effect.Result) != `{"ok":true}` { // intercept, start, fail, start, commit
		t.Fatalf("effect %d has %d history records, want 5, and result %s: %+v", second, len(d.History), d.Effect.Result, d.History)
	}
	report, err := c.Verify(t.Context())
	if err != nil || len(report.Problems) != 0 {
		t.Fatalf("verify: %v %+v", err, report.Problems)
	}
}

// A row changed behind the log's back after this process wrote it is read,
// and its damage found, not written over from what the process remembers.
func TestARowDamagedSinceTheProcessWroteItIsRead(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	a := open(url)
	defer a.Close()
	id := started(t, a, "s", 1)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), `UPDATE undolog_effects SET rec = '\x00ff'::bytea WHERE id = $1`, int64(id)); err != nil {
		t.Fatal(err)
	}
	_, err = a.Commit(t.Context(), id, model.Change{Result: json.RawMessage(`{"ok":true}`)})
	if !errors.Is(err, model.ErrCorrupt) {
		t.Fatalf("commit of an effect whose record was damaged: %v, want %v", err, model.ErrCorrupt)
	}
	var rec []byte
	if err := conn.QueryRow(t.Context(), `SELECT rec FROM undolog_effects WHERE id = $1`, int64(id)).Scan(&rec); err != nil {
		t.Fatal(err)
	}
	if string(rec) != "\x00\xff" {
		t.Fatalf("the damaged record was written over: %q", rec)
	}
}
