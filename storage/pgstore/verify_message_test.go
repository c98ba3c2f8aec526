package pgstore_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	sm "github.com/undolog/undolog/statemachine"
)

// A column beside a record changed to a lookalike of what the record says
// (a Cyrillic letter) is a verify problem whose two sides read apart: the
// difference is escaped, not printed as a letter that looks the same.
func TestVerifyShowsColumnsThatLookAlikeApart(t *testing.T) {
	owner := pgtest.Server(t).NewDatabase(t)
	log := open(owner)
	defer log.Close()
	if _, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "pay", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatal(err)
	}
	exec(t, owner, "UPDATE undolog_effects SET tool = 'p\u0430y' WHERE id = 1; UPDATE undolog_sessions SET state = '\u0430ctive' WHERE id = 's'")
	rep, err := log.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, p := range rep.Problems {
		details = append(details, p.Detail)
	}
	got := strings.Join(details, "\n")
	for _, want := range []string{
		`tool index entry "p\u0430y" disagrees with the record's "pay"`,
		`the session's row says "\u0430ctive", its record "active"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verify does not say %s; it says:\n%s", want, got)
		}
	}
}
