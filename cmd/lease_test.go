package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
)

// A long exec on machine m1 keeps renewing its short lease: machine m2's
// same call is in progress (123) long after the first lease would have run
// out, even with --retry-in-doubt. Once m1's undolog is killed (-9), its
// lease runs out: m2's call is in doubt (120, naming host, pid and lease),
// and --retry-in-doubt runs it.
func TestLeaseAcrossMachines(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		leaseAcrossMachines(t, filepath.Join(t.TempDir(), "u.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		leaseAcrossMachines(t, pgtest.Server(t).NewDatabase(t))
	})
}

func leaseAcrossMachines(t *testing.T, addr string) {
	const lease = 1500 * time.Millisecond
	bin := testbin.Undolog(t)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	// One call: the first run takes long, the reclaiming one (once quick
	// exists) does not.
	argv := []string{"exec", "--session", "s", "--tool", "long", "--undo", "true", "--",
		"sh", "-c", "echo run >> runs; [ -e quick ] || sleep 60"}
	undolog := func(host string, args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+addr, "UNDOLOG_ACTOR=tester", "UNDOLOG_HOST="+host,
			fmt.Sprintf("UNDOLOG_LEASE=%s", lease))
		return cmd
	}
	// onM2 runs the call on m2: its exit code and stderr.
	onM2 := func(extra ...string) (int, string) {
		cmd := undolog("m2", append(append([]string{}, argv[:1]...), append(extra, argv[1:]...)...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), strings.TrimSpace(stderr.String())
	}
	type owner struct {
		PID        int       `json:"pid"`
		Host       string    `json:"host"`
		LeaseUntil time.Time `json:"lease_until"`
	}
	shown := func() (state string, o *owner) {
		out, err := undolog("m2", "show", "1", "-o", "json").Output()
		if err != nil {
			t.Fatalf("show: %v", err)
		}
		var d struct {
			Effect struct {
				State string `json:"state"`
				Owner *owner `json:"owner"`
			} `json:"effect"`
		}
		if err := json.Unmarshal(out, &d); err != nil {
			t.Fatalf("show: %v\n%s", err, out)
		}
		return d.Effect.State, d.Effect.Owner
	}

	a := undolog("m1", argv...)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { a.Process.Kill(); a.Wait() }()
	deadline := time.Now().Add(time.Minute) // failure bounds, not speed targets
	for data, _ := os.ReadFile(runs); len(data) == 0; data, _ = os.ReadFile(runs) {
		if time.Now().After(deadline) {
			t.Fatal("m1's command did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	state, first := shown()
	if state != "executing" || first == nil || first.Host != "m1" || first.PID != a.Process.Pid || first.LeaseUntil.IsZero() {
		t.Fatalf("m1's call: %s owned by %+v", state, first)
	}

	// m2 keeps finding it in progress until well past its first lease: m1
	// renews it.
	for attempts := 0; ; attempts++ {
		code, msg := onM2()
		if code != ExitExecInProgress || !strings.Contains(msg, "is executing on m1") || !strings.Contains(msg, "lease until") {
			t.Fatalf("m2 while m1 runs: exit %d: %s", code, msg)
		}
		if code, msg := onM2("--retry-in-doubt"); code != ExitExecInProgress {
			t.Fatalf("m2 --retry-in-doubt while m1 runs: exit %d: %s", code, msg)
		}
		_, now := shown()
		if time.Now().After(first.LeaseUntil.Add(2*lease)) && now.LeaseUntil.After(first.LeaseUntil.Add(lease)) {
			break // two leases past the first one's end, still in progress
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease was not renewed: %v, first %v", now.LeaseUntil, first.LeaseUntil)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// m1's undolog dies (its command with it): nothing renews the lease.
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.Wait()
	_, last := shown()
	for {
		code, msg := onM2()
		if code == ExitExecInDoubt {
			want := fmt.Sprintf("effect 1 is in doubt: its owner's lease expired at %s (last renewed by pid %d on m1)",
				last.LeaseUntil.UTC().Format(time.RFC3339Nano), a.Process.Pid)
			if !strings.Contains(msg, want) || !strings.Contains(msg, "--retry-in-doubt") || strings.Count(msg, "\n") != 0 {
				t.Fatalf("in doubt: %q, want it to say %q", msg, want)
			}
			if time.Now().Before(last.LeaseUntil) {
				t.Fatalf("in doubt before the lease ran out (%v): %s", last.LeaseUntil, msg)
			}
			break
		}
		if code != ExitExecInProgress {
			t.Fatalf("m2 after m1 died: exit %d: %s", code, msg)
		}
		if time.Now().After(deadline) {
			t.Fatal("m1's lease never ran out")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// m2 reclaims it and runs it.
	if err := os.WriteFile(filepath.Join(dir, "quick"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, msg := onM2("--retry-in-doubt")
	if code != 0 || !strings.Contains(msg, "was in doubt (lease expired at") {
		t.Fatalf("m2 --retry-in-doubt: exit %d: %s", code, msg)
	}
	if state, o := shown(); state != "committed" || o != nil {
		t.Fatalf("after the reclaim: %s owned by %+v", state, o)
	}
	if data, _ := os.ReadFile(runs); string(data) != "run\nrun\n" {
		t.Fatalf("runs: %q", data)
	}
	if code, msg := onM2(); code != 0 {
		t.Fatalf("a repeat: exit %d: %s", code, msg)
	}
	if out, err := undolog("m2", "verify").CombinedOutput(); err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
}

// An exec stopped (SIGSTOP) mid-command renews no lease: another host takes
// the call up with --retry-in-doubt and commits it. Once continued, the
// stopped one's commit is refused, and it says that the call was taken up
// and is committed (it is not in doubt), and that its command ran too.
func TestStoppedExecTakenUpMeanwhile(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "u.db")
	argv := []string{"exec", "--session", "s", "--tool", "long", "--undo", "true", "--",
		"sh", "-c", "echo run >> runs; while [ ! -e go ]; do sleep 0.05; done"}
	undolog := func(host string, args ...string) *exec.Cmd {
		cmd := exec.Command(testbin.Undolog(t), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+log, "UNDOLOG_ACTOR=tester", "UNDOLOG_HOST="+host, "UNDOLOG_LEASE=500ms")
		return cmd
	}
	m1 := undolog("m1", argv...)
	var m1err strings.Builder
	m1.Stderr = &m1err
	if err := m1.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { m1.Process.Signal(syscall.SIGCONT); m1.Process.Kill(); m1.Wait() }()
	deadline := time.Now().Add(time.Minute) // failure bounds, not speed targets
	for data, _ := os.ReadFile(filepath.Join(dir, "runs")); len(data) == 0; data, _ = os.ReadFile(filepath.Join(dir, "runs")) {
		if time.Now().After(deadline) {
			t.Fatal("m1's command did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := m1.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for {
		err := undolog("m2", argv...).Run()
		if exitCodeOf(err) == ExitExecInDoubt {
			break
		}
		if exitCodeOf(err) != ExitExecInProgress || time.Now().After(deadline) {
			t.Fatalf("m2 while m1 is stopped: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := undolog("m2", append(argv[:1:1], append([]string{"--retry-in-doubt"}, argv[1:]...)...)...).CombinedOutput(); err != nil {
		t.Fatalf("m2 --retry-in-doubt: %v\n%s", err, out)
	}
	m1.Process.Signal(syscall.SIGCONT)
	err := m1.Wait()
	want := "the call succeeded, but another run took effect 1 up meanwhile and it is committed now"
	if exitCodeOf(err) != ExitExecError || !strings.Contains(m1err.String(), want) || strings.Contains(m1err.String(), "in doubt") {
		t.Fatalf("m1 once continued: exit %d, %q; want %d and %q", exitCodeOf(err), m1err.String(), ExitExecError, want)
	}
}
