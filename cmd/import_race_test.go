package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/undolog/undolog/internal/pgtest"
)

// Two imports at once into one empty log: at most one is imported, the
// other refused (exit 6, conflict) and taken out; the log holds one whole
// export or nothing, and verifies clean. On both engines.
func TestTwoImportsAtOnce(t *testing.T) {
	dir := t.TempDir()
	// Two exports of sessions of other names: nothing of one collides
	// with the other.
	exports := make([]string, 2)
	for i, names := range [][]string{{"a", "b", "c"}, {"d", "e", "f"}} {
		src := filepath.Join(dir, names[0]+".db")
		for _, s := range names {
			mustRun(t, src, "exec", "--session", s, "--undo", "true", "--", "true")
		}
		exports[i] = filepath.Join(dir, names[0]+".jsonl")
		if err := os.WriteFile(exports[i], []byte(mustRun(t, src, "export")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	engines := map[string]func(t *testing.T, round int) string{
		"file": func(_ *testing.T, round int) string {
			return filepath.Join(dir, "copy", strings.Repeat("x", round+1)+".db")
		},
		"postgres": func(t *testing.T, _ int) string { return pgtest.Server(t).NewDatabase(t) },
	}
	for name, newLog := range engines {
		t.Run(name, func(t *testing.T) {
			for round := 0; round < 4; round++ {
				log := newLog(t, round)
				var wg sync.WaitGroup
				codes, outs := make([]int, 2), make([]string, 2)
				for i := range codes {
					wg.Add(1)
					go func() {
						defer wg.Done()
						out, err := runWithLog(t, log, "import", exports[i]).CombinedOutput()
						codes[i], outs[i] = exitCodeOf(err), string(out)
					}()
				}
				wg.Wait()
				ok := 0
				for i, code := range codes {
					switch code {
					case 0:
						ok++
					case ExitInProgress: // conflict
					default:
						t.Fatalf("import %d: exit %d: %s", i, code, outs[i])
					}
				}
				if ok > 1 {
					t.Fatalf("both imports succeeded: %q", outs)
				}
				sessions := strings.Fields(mustRun(t, log, "session", "list", "-o", "ids"))
				if want := map[int]int{0: 0, 1: 3}[ok]; len(sessions) != want {
					t.Fatalf("%d imports succeeded, and the log holds sessions %v", ok, sessions)
				}
				mustRun(t, log, "verify")
			}
		})
	}
}
