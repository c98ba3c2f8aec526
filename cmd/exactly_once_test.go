package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
)

// Eight processes each make 50 `undolog exec` calls over 20 shared
// signatures, at once. Every signature's command runs exactly once, and every
// call that did not run it got its original output back. On PostgreSQL the
// processes are on two "machines" (two host identities) sharing the database.
func TestExactlyOnceAcrossProcesses(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		exactlyOnce(t, filepath.Join(t.TempDir(), "u.db"), []string{""})
	})
	t.Run("postgres", func(t *testing.T) {
		exactlyOnce(t, pgtest.Server(t).NewDatabase(t), []string{"machine-a", "machine-b"})
	})
}

// exactlyOnce runs the processes against the log at addr, process p on
// host hosts[p%len(hosts)] ("": this one).
func exactlyOnce(t *testing.T, addr string, hosts []string) {
	bin := testbin.Undolog(t)
	dir := t.TempDir()
	lines := filepath.Join(dir, "lines.txt")
	const procs, sigs = 8, 20
	// -short makes each process call each signature about once (process 0
	// walks every one): every signature still meets all eight processes.
	calls := 50
	if testing.Short() {
		calls = sigs
	}
	// Each process walks the signatures in its own order; a call that finds the
	// same call executing in another process (exit 123) tries again.
	script := `
i=0
while [ $i -lt ` + fmt.Sprint(calls) + ` ]; do
  k=$(( (i * (P + 3) + P) % ` + fmt.Sprint(sigs) + ` ))
  while :; do
    out=$(undolog exec --session shared --tool step -q --undo true -- sh -c "echo sig-$k >> $LINES; echo out-$k")
    code=$?
    [ $code -eq 123 ] && continue
    echo "$k $code $out"
    break
  done
  i=$((i + 1))
done`
	var wg sync.WaitGroup
	outputs := make([]string, procs)
	errs := make([]error, procs)
	for p := 0; p < procs; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			cmd := exec.Command("sh", "-c", script)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "UNDOLOG_LOG="+addr,
				"LINES="+lines, fmt.Sprintf("P=%d", p))
			if host := hosts[p%len(hosts)]; host != "" {
				cmd.Env = append(cmd.Env, "UNDOLOG_HOST="+host)
			}
			out, err := cmd.Output()
			outputs[p], errs[p] = string(out), err
		}(p)
	}
	wg.Wait()
	for p := range errs {
		if errs[p] != nil {
			t.Fatalf("process %d: %v", p, errs[p])
		}
	}
	for p, out := range outputs {
		results := strings.Split(strings.TrimSpace(out), "\n")
		if len(results) != calls {
			t.Fatalf("process %d made %d calls, want %d:\n%s", p, len(results), calls, out)
		}
		for _, r := range results {
			var k, code int
			var got string
			if n, _ := fmt.Sscanf(r, "%d %d %s", &k, &code, &got); n != 3 || code != 0 || got != fmt.Sprintf("out-%d", k) {
				t.Fatalf("process %d: call %q did not return the original output", p, r)
			}
		}
	}
	data, err := os.ReadFile(lines)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, l := range strings.Fields(string(data)) {
		count[l]++
	}
	if len(count) != sigs {
		t.Fatalf("%d signatures ran, want %d", len(count), sigs)
	}
	for sig, n := range count {
		if n != 1 {
			t.Errorf("%s ran %d times", sig, n)
		}
	}
	verify := exec.Command(bin, "verify")
	verify.Env = append(os.Environ(), "UNDOLOG_LOG="+addr)
	if out, err := verify.CombinedOutput(); err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
}
