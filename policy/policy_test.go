package policy

import (
	"errors"
	"strings"
	"testing"

	sm "github.com/undolog/undolog/statemachine"
)

func TestParsePolicyAndClassify(t *testing.T) {
	p, err := ParsePolicy([]byte(`
tools:
  create_*:
    compensate: {tool: "delete", args: {names: "{{ .args.names }}"}}
  create_special: {tier: irreversible}
  read_*: {tier: safe}
  snapshot_then_write:
    tier: compensable
    capture: {tool: read, args: {id: "{{ .args.id }}"}}
    compensate: {tool: restore, args: {to: "{{ .capture }}"}}
redact: ["*.password"]
`))
	if err != nil {
		t.Fatal(err)
	}
	none := func() (bool, bool) { return false, false }
	ro := func() (bool, bool) { return true, true }
	cases := []struct {
		tool string
		ann  func() (bool, bool)
		tier sm.Tier
	}{
		{"create_user", none, sm.Compensable},
		{"create_special", none, sm.Irreversible}, // an exact name wins over an earlier glob
		{"read_file", none, sm.Safe},
		{"unknown", ro, sm.Safe},
		{"unknown", none, sm.Irreversible},
		{"snapshot_then_write", none, sm.Compensable},
	}
	for _, c := range cases {
		if got := p.Classify(c.tool, c.ann); got.Tier != c.tier || got.Reason == "" {
			t.Errorf("%s: %+v, want %s", c.tool, got, c.tier)
		}
	}
	if r := p.Classify("snapshot_then_write", none).Rule; r.Capture == nil || r.Capture.Tool != "read" || r.Compensate.Tool != "restore" {
		t.Fatalf("%+v", r)
	}
	if len(p.Redact) != 1 {
		t.Fatal("redact list lost")
	}
}

// approve_in_client is off unless a rule says it, and only for a rule
// whose calls can be irreversible.
func TestPolicyApproveInClient(t *testing.T) {
	p, err := ParsePolicy([]byte(`
tools:
  launch: {tier: irreversible, approve_in_client: true}
  deploy: {tier: irreversible, approve_in_client: false}
  drop: {tier: irreversible}
  maybe:
    tier:
      - {when: .args.force, tier: irreversible}
      - {tier: safe}
    approve_in_client: true
`))
	if err != nil {
		t.Fatal(err)
	}
	none := func() (bool, bool) { return false, false }
	for tool, want := range map[string]bool{"launch": true, "deploy": false, "drop": false, "maybe": true} {
		if got := p.Classify(tool, none).Rule.ApproveInClient; got != want {
			t.Errorf("%s: approve in client %v, want %v", tool, got, want)
		}
	}
}

func TestBadPolicies(t *testing.T) {
	for bad, why := range map[string]string{
		"tools: [1, 2]":              "must map",
		"tools:\n  x: {}":            "needs a tier",
		"tools:\n  x: {tier: maybe}": "unknown tier",
		"tools:\n  x: {tier: safe, compensate: {tool: y}}":                   "for compensable tools",
		"tools:\n  x: {compensate: {args: {}}}":                              "needs a tool",
		"tools:\n  x: {compensate: {tool: y, args: {a: \"{{ .args | }}\"}}}": "compensate args",
		"tools:\n  x: {tier: compensable, capture: {tool: y}}":               "capture",
		"tools:\n  '[': {tier: safe}":                                        "bad glob",
		"tools: {x: {tier: safe}, x: {tier: safe}}":                          "",
		"::: not yaml": "",
		"tools:\n  x: {tier: compensable, compensate: {tool: y}, approve_in_client: true}": "approve_in_client is for irreversible tools",
		"tools:\n  x: {tier: irreversible, approve_in_client: maybe}":                      "unmarshal",
	} {
		_, err := ParsePolicy([]byte(bad))
		if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), why) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v (want %q)", bad, err, why)
		}
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte("tools:\n  a: {tier: safe}\n"))
	f.Add([]byte("tools:\n  b*: {compensate: {tool: c, args: {x: \"{{ .args }}\"}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			if !errors.Is(err, ErrPolicy) {
				t.Fatalf("error %v is not ErrPolicy", err)
			}
			return
		}
		for _, r := range p.Rules {
			if !r.Tier.Valid() {
				t.Fatalf("rule %+v has no valid tier", r)
			}
		}
	})
}
