package policy

import (
	"encoding/json"
	"errors"
	"testing"

	sm "github.com/undolog/undolog/statemachine"
)

// shell: asks the tier cases of each command of the script, and the worst
// counts; it is only for tier cases.
func TestShellRuleTakesTheWorstCommand(t *testing.T) {
	p, err := ParsePolicy([]byte(`
tools:
  run:
    shell: script
    tier:
      - {when: '.args.name == null', tier: irreversible}
      - {when: '.args.name == "deploy"', tier: irreversible}
      - {when: '.args.name == "ls"', tier: safe}
      - {tier: compensable}
`))
	if err != nil {
		t.Fatal(err)
	}
	for script, want := range map[string]sm.Tier{"ls": sm.Safe, "ls | ls": sm.Safe, "ls; touch x": sm.Compensable,
		"ls; touch x && deploy": sm.Irreversible, "ls $(deploy)": sm.Irreversible, "$X": sm.Irreversible, "ls (": sm.Irreversible} {
		args, _ := json.Marshal(map[string]string{"script": script})
		cls, err := p.Classify("run", nil).ForArgs(args)
		if err != nil || cls.Tier != want {
			t.Errorf("%q: %s %v, want %s", script, cls.Tier, err, want)
		}
	}
	if cls, err := p.Classify("run", nil).ForArgs(json.RawMessage(`{"script":7}`)); err != nil || cls.Tier != sm.Irreversible {
		t.Errorf("a script not a string: %s %v, want irreversible", cls.Tier, err)
	}
	if _, err := ParsePolicy([]byte("tools:\n  run: {shell: script, tier: safe}\n")); !errors.Is(err, ErrPolicy) {
		t.Errorf("shell without tier cases: %v, want ErrPolicy", err)
	}
}
