// Package testbin builds the undolog binary once per test process, for the
// tests that run it as a separate process (testscript aside).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
