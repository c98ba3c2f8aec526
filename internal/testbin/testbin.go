// Package testbin has what tests need of the processes they start: the
// undolog binary and the tests' own programs, built once per test process,
// for the tests that run them as separate processes (testscript aside), and
// a quick exit for the processes started from a test binary built with
// -race (QuickRaceExit).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// built are the programs Build made, by package, each built once.
var built sync.Map // package path -> *program

type program struct {
	once sync.Once
	path string
	err  error
}

// Undolog returns the path of an undolog binary built from this module.
func Undolog(tb testing.TB) string {
	tb.Helper()
	return Build(tb, "github.com/undolog/undolog")
}

// Build returns the path of the main package pkg of this module built (a
// test's own server under a testdata directory, say), once per test process.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	v, _ := built.LoadOrStore(pkg, &program{})
	p := v.(*program)
	p.once.Do(func() {
		var dir string
		if dir, p.err = os.MkdirTemp("", "undolog-bin-"); p.err != nil {
			return
		}
		p.path = filepath.Join(dir, path.Base(pkg))
		if out, err := exec.Command("go", "build", "-o", p.path, pkg).CombinedOutput(); err != nil {
			p.err = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
		}
	})
	if p.err != nil {
		tb.Fatal(p.err)
	}
	return p.path
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

// DirOutsideTmp is a new directory, removed when tb ends, that is not below
// /tmp, whose files a Bash classification takes for scratch: a test of
// what lands outside a project needs a project and an outside that are not
// scratch, wherever the checkout is (CI may clone it below /tmp).
func DirOutsideTmp(tb testing.TB) string {
	tb.Helper()
	tmp, err := filepath.EvalSymlinks("/tmp")
	if err != nil {
		tmp = "/tmp"
	}
	home, _ := os.UserHomeDir()
	for _, base := range []string{"/var/tmp", home} {
		real, err := filepath.EvalSymlinks(base)
		if base == "" || err != nil || real == tmp || strings.HasPrefix(real, tmp+"/") {
			continue
		}
		dir, err := os.MkdirTemp(real, "undolog-test-")
		if err != nil {
			continue
		}
		tb.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	tb.Fatal("testbin: no directory outside /tmp to make one in (/var/tmp, $HOME)")
	return ""
}
