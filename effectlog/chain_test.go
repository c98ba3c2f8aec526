package effectlog

import (
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// The digests a record's hash covers are part of every log written since
// model.HashWithContent: these were taken by the undolog that first wrote
// them (logstore, before the rules and the engine parted), and a change of
// form would make every such log fail verify.
func TestContentDigestsKeepTheirForm(t *testing.T) {
	one := uint64(7)
	want := map[string]string{
		"command": "8a90d44309a09677582972c4857c6b6d65c1095ff3bc1cb4f4ae85bcabf5a141",
		"mcp":     "7f5a841c90b50949e4338df5b1b3ab38d5bf0769fe05543dd93d00084bcc542f",
		"manual":  "af5791027a82638635069aa0a1350319c42a49f56be7cb4b310a919b01faad74",
		"weird":   "32a0886f7f079f5bb38a70e4d61bb7f0d65a227a11ab8cb9f88e05d6af6ad45f",
	}
	for kind, digest := range want {
		e := model.Effect{ID: 9, Session: "s-1", Tool: "deploy", Tier: sm.Compensable, CallSignature: "abc", Args: json.RawMessage(`{"a":1}`),
			Key: "k", ReplayOf: &one, Compensation: &model.Compensation{Kind: kind, Argv: []string{"rm", "-f", "x"}, Dir: "/tmp", Tool: "t",
				Args: json.RawMessage(`{}`), Note: "n", MaxRetries: 3, InitialBackoffMS: 100},
			Redact: []string{"*.password"}, Result: json.RawMessage(`{"ok":true}`)}
		if got := hex.EncodeToString([]byte(effectContent(&e, contentPoint{result: true, err: "boom"}))); got != digest {
			t.Errorf("effect with a %s compensation: digest %s, want %s", kind, got, digest)
		}
	}
	plain := model.Effect{ID: 2, Session: "s", Tool: "w", Tier: sm.Irreversible, Args: json.RawMessage(`null`)}
	if got := hex.EncodeToString([]byte(effectContent(&plain, contentPoint{}))); got != "5807996f15b42b600531b32ebba4f129c0281c468676b60a45a3cb90da699696" {
		t.Errorf("plain effect: digest %s", got)
	}
	s := model.Session{ID: "s", Meta: map[string]string{"b": "2", "a": "1"}}
	if got := hex.EncodeToString([]byte(sessionContent(&s))); got != "f527c409097d05419fbbf45774b03239568b23703a4f9e70004a7186d3c1c9f8" {
		t.Errorf("session: digest %s", got)
	}
	r := model.HistoryRecord{Seq: 3, Kind: "effect", EffectID: 9, Session: "s-1", From: "pending", To: "executing", Trigger: "x",
		Actor: "a", Reason: "r", Error: "e", At: time.Date(2026, 12, 1, 10, 0, 0, 5, time.UTC), PrevHash: "ph", HashVersion: model.HashWithContent}
	if got := recordHash(&r, effectContent(&plain, contentPoint{})); got != "0214342757ab5bc09c10e640bb979f29e79c84d987006158a88de467c221b8cf" {
		t.Errorf("record hash %s", got)
	}
	// A role is covered: one more field, so a record without one hashes as
	// above, as records did before roles.
	r.Role = "ci"
	if got := recordHash(&r, effectContent(&plain, contentPoint{})); got == "0214342757ab5bc09c10e640bb979f29e79c84d987006158a88de467c221b8cf" ||
		got != model.FieldsHash("undolog-history-v2", "effect", "3", "9", "s-1", "pending", "executing", "x", "a", "r", "e",
			"2026-12-01T10:00:00.000000005Z", "ph", effectContent(&plain, contentPoint{}), "ci") {
		t.Errorf("record hash with a role %s", got)
	}
}
