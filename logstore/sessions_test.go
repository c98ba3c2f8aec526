package logstore

import (
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The rule as first written, kept as the oracle for the hand-written check.
var sessionIDRule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@+/-]{0,127}$`)

func TestValidSessionID(t *testing.T) {
	for _, id := range []string{"a", "deploy-117", "sess-20261130-3fa2c1", "ci/run:4@main+x.y_z", strings.Repeat("x", 128)} {
		if err := ValidSessionID(id); err != nil {
			t.Errorf("%q refused: %v", id, err)
		}
	}
	for _, id := range []string{"", "-lead", ".x", "a b", "é", "a\x00", strings.Repeat("x", 129)} {
		if ValidSessionID(id) == nil {
			t.Errorf("%q accepted", id)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.StringMatching(`[A-Za-z0-9._:@+/ é\-]{0,130}`).Draw(t, "id")
		if got, want := ValidSessionID(id) == nil, sessionIDRule.MatchString(id); got != want {
			t.Fatalf("%q: valid=%v, the rule says %v", id, got, want)
		}
	})
}
