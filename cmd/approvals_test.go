package cmd

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
)

// TestApprovalsShowWhatTheEffectDoes: an approver is shown the effect's tool
// and args, which its history covers, not a request that says otherwise.
func TestApprovalsShowWhatTheEffectDoes(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	f := &Factory{Out: &out, ErrOut: &out, Getenv: func(string) string { return "" }, Now: func() time.Time { return now }}
	list := []effectlog.PendingApproval{{
		Approval: model.Approval{EffectID: 7, Session: "s", Tool: "notify", Args: json.RawMessage(`{"env":"staging"}`), ApprovalRound: model.ApprovalRound{RequestedAt: now}},
		Effect:   model.Effect{ID: 7, Session: "s", Tool: "deploy", Args: json.RawMessage(`{"env":"prod"}`)},
	}}
	if err := renderApprovals(f, list); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "deploy") || !strings.Contains(got, `{"env":"prod"}`) || strings.Contains(got, "staging") || strings.Contains(got, "notify") {
		t.Fatalf("approvals shows:\n%s", got)
	}
}
