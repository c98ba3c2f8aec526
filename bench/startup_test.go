package main

import "testing"

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
