package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFuzzTargetsBriefly runs every fuzz target for a fixed number of inputs,
// so that CI fuzzes as well as replaying the seed corpora (which `go test`
// always does). Counts, not durations: Go 1.26's fuzz coordinator can fail a
// duration run at its deadline with "context deadline exceeded" having found
// nothing (golang/go#75804). Minimizing is capped because each input of the
// log targets costs a file and an fsync.
// Longer runs: go test -run '^$' -fuzz '^FuzzOpenLog$' -fuzztime 10m ./storage/boltfile
func TestFuzzTargetsBriefly(t *testing.T) {
	if testing.Short() {
		t.Skip("fuzzing is skipped in -short mode")
	}
	targets := []struct{ pkg, name, inputs string }{
		{"./internal/canonjson", "FuzzCanonicalize", "20000x"},
		{"./internal/mcpwire", "FuzzRepeatedKey", "20000x"},
		{"./proxy", "FuzzParsePolicy", "3000x"},
		{"./proxy", "FuzzClientFraming", "10000x"},
		{"./storage/boltfile", "FuzzOpenLog", "2000x"},
		{"./storage/boltfile", "FuzzLogMeta", "2000x"},
		{"./storage/boltfile", "FuzzLogRecords", "500x"},
		{"./storage/boltfile", "FuzzJournal", "1000x"},
		{"./storage/boltfile", "FuzzJournalFile", "1000x"},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			out, err := exec.Command("go", "test", "-run", "^$", "-fuzz", "^"+tg.name+"$", "-fuzztime", tg.inputs, "-fuzzminimizetime", "20x", "-parallel", "2", tg.pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", tg.pkg, tg.name, err, out)
			}
			if !strings.Contains(string(out), "PASS") {
				t.Fatalf("%s %s did not pass:\n%s", tg.pkg, tg.name, out)
			}
		})
	}
}
