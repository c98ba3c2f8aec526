package pgstore_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// What the role checks cost: one call (intercept, start, commit: three
// transactions) as the owner, as the owner with the role triggers off, and
// as an agent.
func BenchmarkCallByRole(b *testing.B) {
	for _, mode := range []string{"owner", "owner-no-triggers", "agent"} {
		b.Run(mode, func(b *testing.B) {
			owner, agent, _, _ := withRoles(b)
			addr := owner
			if mode == "agent" {
				addr = agent
			}
			if mode == "owner-no-triggers" {
				execTB(b, owner, `ALTER TABLE undolog_history DISABLE TRIGGER undolog_history_role;
					ALTER TABLE undolog_session_history DISABLE TRIGGER undolog_session_history_role;
					ALTER TABLE undolog_effects DISABLE TRIGGER undolog_effects_role;
					ALTER TABLE undolog_effects DISABLE TRIGGER undolog_effects_role_insert;
					ALTER TABLE undolog_sessions DISABLE TRIGGER undolog_sessions_written;
					ALTER TABLE undolog_effects DISABLE TRIGGER undolog_effects_written;
					ALTER TABLE undolog_history DISABLE TRIGGER undolog_history_written;
					ALTER TABLE undolog_session_history DISABLE TRIGGER undolog_session_history_written;
					ALTER TABLE undolog_undo DISABLE TRIGGER undolog_undo_written;
					ALTER TABLE undolog_undo DISABLE TRIGGER undolog_undo_moves_insert;
					ALTER TABLE undolog_undo DISABLE TRIGGER undolog_undo_moves`)
			}
			log := open(addr)
			defer log.Close()
			b.ResetTimer()
			for i := range b.N {
				res, err := log.Intercept(b.Context(), effectlog.InterceptRequest{Session: "s", Tool: fmt.Sprint("w", i), Tier: sm.Compensable,
					Args: json.RawMessage(`{}`), CreateSession: true})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := log.Start(b.Context(), res.Effect.ID, model.Change{}); err != nil {
					b.Fatal(err)
				}
				if _, err := log.Commit(b.Context(), res.Effect.ID, model.Change{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
