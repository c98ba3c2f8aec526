package pgstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/conformance"
	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage/pgstore"
)

// One row that does not decode, as a role that may write the tables could
// leave it (a history record of another team's effect, a blanked undo
// record, an effect's record), harms only its own effect.
func TestDamagedRowStaysLocal(t *testing.T) {
	url := pgtest.Server(t).NewDatabase(t)
	engine := pgstore.New(url)
	t.Cleanup(func() { engine.Close() })
	clock := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	log := effectlog.New(engine, effectlog.Options{Now: func() time.Time { return clock }})
	// The rows are written as the tables' owner, past the triggers that
	// guard them: what a damaged row is, not who may write one.
	damage := func(t *testing.T, sql string) {
		t.Helper()
		exec(t, url, `SET session_replication_role = replica; `+sql)
	}
	conformance.DamagedRowStaysLocal(t, log, conformance.Damage{
		History: func(t *testing.T, id uint64, seq uint32) {
			damage(t, fmt.Sprintf(`UPDATE undolog_history SET rec = '\xff00'::bytea WHERE effect_id = %d AND seq = %d`, id, seq))
		},
		Undo: func(t *testing.T, session string, id uint64) {
			damage(t, fmt.Sprintf(`UPDATE undolog_undo SET rec = ''::bytea WHERE effect_id = %d`, id))
		},
		Effect: func(t *testing.T, id uint64) {
			damage(t, fmt.Sprintf(`UPDATE undolog_effects SET rec = '\xff00'::bytea WHERE id = %d`, id))
		},
		Session: func(t *testing.T, id string) {
			damage(t, fmt.Sprintf(`UPDATE undolog_sessions SET rec = '\xff00'::bytea WHERE id = '%s'`, id))
		},
	})
}

// An open request's row for an effect that has no request (a call that
// never asked for approval) disagrees with the records: verify finds it,
// and an export of the log fails naming it instead of ending clean.
func TestAnOpenRequestOfNoRequestFailsExport(t *testing.T) {
	owner := pgtest.Server(t).NewDatabase(t)
	log := open(owner)
	defer log.Close()
	if _, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "write", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatal(err)
	}
	exec(t, owner, "SET session_replication_role = replica; INSERT INTO undolog_approvals_open VALUES (1, 's', 0)")
	const want = "pending approval entry names no request"
	rep, err := log.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		found = found || p.Kind == "index" && p.Effect == 1 && p.Detail == want
	}
	if !found {
		t.Errorf("verify does not say %s; it says %v", want, rep.Problems)
	}
	err = log.Export(t.Context(), "", func(effectlog.ExportRecord) error { return nil })
	if !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), want) {
		t.Fatalf("export of the log: %v; want it failed saying %s", err, want)
	}
}
