package proxy

import (
	"github.com/undolog/undolog/policy"

	"errors"
	"strings"
	"testing"
)

// replay: always keeps a tool's calls the same whenever their arguments
// are; retry (the default) runs a call made again after its answer.
func TestPolicyReplayKey(t *testing.T) {
	p, err := policy.ParsePolicy([]byte(`
tools:
  get_or_create: {tier: compensable, replay: always}
  write: {tier: compensable, replay: retry}
  send: {tier: irreversible}
`))
	if err != nil {
		t.Fatal(err)
	}
	for tool, always := range map[string]bool{"get_or_create": true, "write": false, "send": false, "unknown": false} {
		if got := !p.RunsAgainAnswered(tool); got != always {
			t.Errorf("%s: replay always %v, want %v", tool, got, always)
		}
		if r := p.Classify(tool, func() (bool, bool) { return false, false }).Rule; r != nil && r.ReplayAlways != always {
			t.Errorf("%s: rule %+v", tool, r)
		}
	}
	for bad, why := range map[string]string{
		"tools:\n  x: {tier: compensable, replay: sometimes}": `replay "sometimes": use retry`,
		"tools:\n  x: {tier: safe, replay: always}":           "a safe one is never logged",
	} {
		if _, err := policy.ParsePolicy([]byte(bad)); !errors.Is(err, policy.ErrPolicy) || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want %q", bad, err, why)
		}
	}
}
