package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/undolog/undolog/conformance"
	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
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
