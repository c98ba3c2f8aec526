// Package testbin has what tests need of the processes they start: the
// undolog binary, built once per test process, for the tests that run it as
// a separate process (testscript aside), and a quick exit for the processes
// started from a test binary built with -race (QuickRaceExit).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	once sync.Once
	path string
	err  error
)

// Undolog returns the path of an undolog binary built from this module.
func Undolog(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		var dir string
		if dir, err = os.MkdirTemp("", "undolog-bin-"); err != nil {
			return
		}
		path = filepath.Join(dir, "undolog")
		if out, buildErr := exec.Command("go", "build", "-o", path, "github.com/undolog/undolog").CombinedOutput(); buildErr != nil {
			err = fmt.Errorf("build undolog: %v\n%s", buildErr, out)
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// QuickRaceExit makes the processes a test starts from a binary built with
// -race (the test binary run again as undolog, a fake MCP server, a writer)
// exit at once: the race runtime sleeps a second at exit by default
// (GORACE's atexit_sleep_ms), for races in goroutines still running to be
// reported, and the scripts alone start such processes thousands of times.
// A race is still reported when it happens. A test package's TestMain calls
// it first; an atexit_sleep_ms in GORACE already wins.
func QuickRaceExit() {
	os.Setenv("GORACE", strings.TrimSpace("atexit_sleep_ms=0 "+os.Getenv("GORACE")))
}
