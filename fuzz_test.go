package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFuzzTargetsBriefly runs every fuzz target for a few seconds, so that CI
// fuzzes as well as replaying the seed corpora (which `go test` always does).
// Longer runs: go test -run '^$' -fuzz '^FuzzOpenLog$' -fuzztime 10m ./logstore
func TestFuzzTargetsBriefly(t *testing.T) {
	if testing.Short() {
		t.Skip("fuzzing is skipped in -short mode")
	}
	targets := []struct{ pkg, name string }{
		{"./internal/jcs", "FuzzCanonicalize"},
		{"./proxy", "FuzzParsePolicy"},
		{"./proxy", "FuzzClientFraming"},
		{"./logstore", "FuzzOpenLog"},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			out, err := exec.Command("go", "test", "-run", "^$", "-fuzz", "^"+tg.name+"$", "-fuzztime", "4s", "-parallel", "2", tg.pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", tg.pkg, tg.name, err, out)
			}
			if !strings.Contains(string(out), "PASS") {
				t.Fatalf("%s %s did not pass:\n%s", tg.pkg, tg.name, out)
			}
		})
	}
}
