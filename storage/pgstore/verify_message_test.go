package pgstore_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
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

// A request whose outcome is a lookalike of pending (a Cyrillic letter) is
// reported with the outcome escaped: "approval is pending but pending index
// entry=true" read as a contradiction with no difference to see.
func TestVerifyShowsALookalikeOutcomeApart(t *testing.T) {
	owner := pgtest.Server(t).NewDatabase(t)
	log := open(owner)
	defer log.Close()
	if _, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "wire", Tier: sm.Irreversible,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatal(err)
	}
	exec(t, owner, `UPDATE undolog_approvals SET rec = convert_to('{"effect_id":1,"session":"s","tool":"wire","args":{},"requested_at":"2026-01-01T00:00:00Z","outcome":"p\u0435nding"}', 'UTF8') WHERE effect_id = 1`)
	rep, err := log.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := `approval is "p\u0435nding" but pending index entry=true`
	for _, p := range rep.Problems {
		if p.Kind == "index" && p.Detail == want {
			return
		}
	}
	t.Errorf("verify does not say %s; it says %v", want, rep.Problems)
}

// An open request's row under a lookalike of its effect's session shows
// both names, escaped apart, where it said only that the entry dangles.
func TestVerifyShowsALookalikeOpenRequestSessionApart(t *testing.T) {
	owner := pgtest.Server(t).NewDatabase(t)
	log := open(owner)
	defer log.Close()
	if _, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "wire", Tier: sm.Irreversible,
		Args: json.RawMessage(`{}`), CreateSession: true}); err != nil {
		t.Fatal(err)
	}
	exec(t, owner, "UPDATE undolog_approvals_open SET session = '\u0455' WHERE effect_id = 1")
	rep, err := log.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := `pending approval entry is under session "\u0455", the effect's "s"`
	for _, p := range rep.Problems {
		if p.Kind == "index" && p.Detail == want {
			return
		}
	}
	t.Errorf("verify does not say %s; it says %v", want, rep.Problems)
}

// An undo entry's state column written apart from its record (an
// approver may write the column) is reported: a listing by undo state reads
// the column, and would leave the entry out.
func TestVerifyComparesTheUndoStateColumn(t *testing.T) {
	owner := pgtest.Server(t).NewDatabase(t)
	log := open(owner)
	defer log.Close()
	res, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "write", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true, Start: true,
		Compensation: &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.Commit(t.Context(), res.Effect.ID, model.Change{}); err != nil {
		t.Fatal(err)
	}
	exec(t, owner, "UPDATE undolog_undo SET state = 'compensated' WHERE effect_id = 1")
	rep, err := log.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, p := range rep.Problems {
		details = append(details, p.Detail)
	}
	if want := `undo state index entry "compensated" disagrees with the undo entry's "pending"`; !strings.Contains(strings.Join(details, "\n"), want) {
		t.Fatalf("verify does not say %s; it says: %q", want, details)
	}
}
