package filesnap

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkProjectSnapshot is a shell command's snapshot (Before and
// After) of a git repository of 10,000 files of which the call changes 10,
// as bench's files rows time it: for a profile,
// go test -run '^$' -bench ProjectSnapshot -cpuprofile cpu.out ./filesnap
func BenchmarkProjectSnapshot(b *testing.B) {
	b.Setenv("UNDOLOG_FILES_DIR", b.TempDir())
	project := b.TempDir()
	for i := range 10000 {
		p := filepath.Join(project, fmt.Sprintf("dir%03d", i/100), fmt.Sprintf("file%05d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "file %d\n%0100d\n", i, i), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=b", "-c", "user.email=b@x", "commit", "-q", "-m", "b"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = project
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	round := 0
	call := func() {
		round++
		id, err := Before(project, nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 10 {
			p := filepath.Join(project, fmt.Sprintf("dir%03d", i*37%100), fmt.Sprintf("file%05d.txt", i*37%100*100+i))
			if err := os.WriteFile(p, fmt.Appendf(nil, "changed in round %d\n", round), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		if err := After(project, id); err != nil {
			b.Fatal(err)
		}
	}
	call() // the first snapshot reads every file
	b.ResetTimer()
	for range b.N {
		call()
	}
}
