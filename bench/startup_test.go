package main

import (
	"strings"
	"testing"
)

// The start-up budget, briefly: ratios taken side by side in one run, with
// a margin of half the target again for a machine that is busy elsewhere
// (the benchmark's rows state the budget itself).
func TestStartupBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds undolog and times some hundred processes")
	}
	bin, linked, hello, err := processBinaries(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := measureStartup(bin, linked, hello, 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("undolog version %.2f ms, %.2fx a static hello (%.2f ms); package init %.2f ms, %.2fx", s.version, s.versionRatio, s.hello, s.init, s.initRatio)
	const margin = 1.5
	if s.versionRatio > versionTarget*margin {
		t.Errorf("undolog version takes %.2fx a static Go hello: the budget is %.1fx (go run -C bench . -only startup)", s.versionRatio, versionTarget)
	}
	if s.initRatio > initTarget*margin {
		t.Errorf("undolog's package init takes %.2fx a static Go hello's whole process: the budget is %.1fx (GODEBUG=inittrace=1 undolog version names each package's)", s.initRatio, initTarget)
	}
}

// undolog's own packages build nothing at init that a process may not
// need (a regexp, a template, a table): each is made on first use
// (sync.OnceValue), so that a hook or exec process pays for what it runs.
// A regexp compiled at init allocates some 40 times.
func TestOwnPackagesInitLazily(t *testing.T) {
	bin, err := buildUndolog()
	if err != nil {
		t.Fatal(err)
	}
	inits, err := packageInits(bin, "version")
	if err != nil {
		t.Fatal(err)
	}
	const allocLimit = 32
	own := 0
	for _, in := range inits {
		if !strings.HasPrefix(in.pkg, "github.com/undolog/undolog/") {
			continue
		}
		own++
		if in.allocs > allocLimit {
			t.Errorf("package %s allocates %d times at init (at most %d): make what it builds at init lazy (sync.OnceValue)", in.pkg, in.allocs, allocLimit)
		}
	}
	if own == 0 {
		t.Fatalf("GODEBUG=inittrace=1 %s version named none of undolog's packages", bin)
	}
}
