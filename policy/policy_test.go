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

// compensate: files leaves the undo to the door (undolog hook's file
// snapshots): a compensable rule with no call of its own, which a door
// that captures no files can find and refuse.
func TestPolicyCompensateFiles(t *testing.T) {
	p, err := ParsePolicy([]byte(`
tools:
  Write: {compensate: files}
  Bash:
    shell: command
    compensate: files
    tier:
      - when: .args.name == "ls"
        tier: safe
      - tier: compensable
  create: {compensate: {tool: delete}}
`))
	if err != nil {
		t.Fatal(err)
	}
	w, b, c := &p.Rules[0], &p.Rules[1], &p.Rules[2]
	if !w.Files || w.Tier != sm.Compensable || w.HasCompensation() || !b.Files || c.Files {
		t.Fatalf("Write %+v, Bash %+v, create %+v", w, b, c)
	}
	if p.FilesRule() != w {
		t.Fatalf("FilesRule: %+v", p.FilesRule())
	}
	if none, _ := ParsePolicy([]byte("tools:\n  create: {compensate: {tool: delete}}\n")); none.FilesRule() != nil {
		t.Fatal("a policy with no compensate: files has a files rule")
	}
	for bad, want := range map[string]string{
		"tools:\n  Write: {compensate: file}\n":                         "or files",
		"tools:\n  Write: {tier: safe, compensate: files}\n":            "for compensable tools",
		"tools:\n  Write: {compensate: files, capture: {tool: read}}\n": "a capture is only useful",
		"tools:\n  Write: {tier: irreversible, compensate: files}\n":    "for compensable tools",
	} {
		if _, err := ParsePolicy([]byte(bad)); err == nil || !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", bad, err, want)
		}
	}
}

// The reason a person reads names the tier case a call met: its condition
// when it reads in a line, else the case's number (a shell rule's
// conditions run to pages).
func TestReasonNamesTheCaseShortly(t *testing.T) {
	long := "(.args.path | startswith(\"/etc\")) or " + strings.Repeat("(.args.path | endswith(\".conf\")) or ", 5) + "false"
	p, err := ParsePolicy([]byte(`
tools:
  write:
    tier:
      - {when: '.args.path == "/x"', tier: irreversible}
      - {when: '` + long + `', tier: irreversible}
      - {tier: compensable}
`))
	if err != nil {
		t.Fatal(err)
	}
	none := func() (bool, bool) { return false, false }
	for args, want := range map[string]string{
		`{"path":"/x"}`:         `policy: write (when .args.path == "/x")`,
		`{"path":"/etc/hosts"}`: "policy: write (tier case 2)",
		`{"path":"a"}`:          "policy: write",
	} {
		cls, err := p.Classify("write", none).ForArgs([]byte(args))
		if err != nil {
			t.Fatal(err)
		}
		if cls.Reason != want {
			t.Errorf("%s: reason %q, want %q", args, cls.Reason, want)
		}
	}
}
