package main

import (
	"os/exec"
	"testing"
)

// The benchmark is its own module (it alone needs SQLite), so building this
// one does not build it: its use of undolog's API is checked here.
func TestBenchmarkModuleCompiles(t *testing.T) {
	cmd := exec.Command("go", "vet", ".")
	cmd.Dir = "bench"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet in bench/: %v\n%s", err, out)
	}
}
