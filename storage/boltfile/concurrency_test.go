package boltfile

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// TestMain lets the test binary act as a separate writer process: the
// concurrency tests re-execute it with UNDOLOG_TEST_WRITER set.
func TestMain(m *testing.M) {
	testbin.QuickRaceExit()
	if mode := os.Getenv("UNDOLOG_TEST_WRITER"); mode != "" {
		os.Exit(writer(mode, os.Getenv("UNDOLOG_TEST_LOG"), os.Getenv("UNDOLOG_TEST_SESSION")))
	}
	os.Exit(m.Run())
}

// writer runs full lifecycles and prints each effect id once its commit
// returned (acknowledged). "count:N" stops after N; "loop" never stops.
func writer(mode, path, session string) int {
	timeout := 20 * time.Second
	if d, err := time.ParseDuration(os.Getenv("UNDOLOG_TEST_LOCK_TIMEOUT")); err == nil {
		timeout = d
	}
	s := newTestLog(path, testOptions{LockTimeout: timeout})
	if mode == "compact-and-hang" { // a compaction killed with its copy made
		compactBeforeRename = func() { fmt.Println("copied"); select {} }
		s.Compact()
		return 1
	}
	if mode == "compact-when-told" { // a log of this user's, compacted once the test says
		if _, err := s.Intercept(context.Background(), effectlog.InterceptRequest{Session: session, Tool: "write", Tier: sm.Compensable,
			Args: json.RawMessage(`{"secret":"compacted-secret"}`), CreateSession: true}); err != nil {
			fmt.Println(err)
			return 1
		}
		s.pause()()
		fmt.Println(os.Getpid())
		bufio.NewReader(os.Stdin).ReadString('\n')
		if _, _, err := s.Compact(); err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("compacted")
		return 0
	}
	if c, ok := strings.CutPrefix(mode, "answers:"); ok {
		n, _ := strconv.Atoi(c)
		return answeringWriter(s, session, n)
	}
	n := -1
	if c, ok := strings.CutPrefix(mode, "count:"); ok {
		n, _ = strconv.Atoi(c)
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; n < 0 || i < n; i++ {
		res, err := s.Intercept(context.Background(), effectlog.InterceptRequest{Session: session, Tool: "write", Tier: sm.Compensable,
			Args: json.RawMessage(fmt.Sprintf(`{"i":%d,"pid":%d}`, i, os.Getpid())), CreateSession: true, Start: i%2 == 0})
		if err == nil && i%2 == 1 { // mixed lifecycles: a separate start, and a failure retried
			_, err = s.Start(context.Background(), res.Effect.ID, model.Change{})
			if err == nil && i%3 == 0 {
				if _, err = s.Fail(context.Background(), res.Effect.ID, model.Change{Error: "flaky"}); err == nil {
					_, err = s.Start(context.Background(), res.Effect.ID, model.Change{})
				}
			}
		}
		if err == nil {
			_, err = s.Commit(context.Background(), res.Effect.ID, model.Change{Result: json.RawMessage(strconv.Itoa(i))})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(out, res.Effect.ID)
		out.Flush()
	}
	return 0
}

func writerCmd(t *testing.T, mode, path, session string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "UNDOLOG_TEST_WRITER="+mode, "UNDOLOG_TEST_LOG="+path, "UNDOLOG_TEST_SESSION="+session)
	cmd.Stderr = os.Stderr
	return cmd
}

// startWriter starts a writer process and returns a scanner of its output.
func startWriter(t *testing.T, cmd *exec.Cmd) *bufio.Scanner {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return bufio.NewScanner(stdout)
}

func TestTwoProcessesWriteConcurrently(t *testing.T) {
	s, _ := newStore(t)
	if _, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: "warm"}); err != nil {
		t.Fatal(err)
	}
	const each = 60
	var wg sync.WaitGroup
	acked := make([][]string, 2)
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			out, err := writerCmd(t, fmt.Sprintf("count:%d", each), s.Path(), fmt.Sprintf("proc-%d", p)).Output()
			if err != nil {
				t.Errorf("writer %d: %v", p, err)
			}
			acked[p] = strings.Fields(string(out))
		}(p)
	}
	wg.Wait()
	for p := range acked {
		if len(acked[p]) != each {
			t.Fatalf("writer %d acknowledged %d of %d", p, len(acked[p]), each)
		}
		for _, f := range acked[p] {
			id, _ := strconv.ParseUint(f, 10, 64)
			d, err := s.GetEffect(t.Context(), id)
			if err != nil || d.Effect.State != sm.Committed || d.Effect.Session != fmt.Sprintf("proc-%d", p) {
				t.Fatalf("acknowledged effect %d: %+v %v", id, d.Effect, err)
			}
		}
	}
	rep := verifyClean(t, s)
	if rep.Effects != 2*each {
		t.Fatalf("%d effects in the log, want %d", rep.Effects, 2*each)
	}
}

func TestSIGKILLLosesNothingAcknowledged(t *testing.T) {
	s, _ := newStore(t)
	for round := 0; round < 3; round++ {
		cmd := writerCmd(t, "loop", s.Path(), fmt.Sprintf("kill-%d", round))
		sc := startWriter(t, cmd)
		var acked []uint64
		for sc.Scan() {
			id, _ := strconv.ParseUint(sc.Text(), 10, 64)
			acked = append(acked, id)
			if len(acked) == 25+round*10 {
				cmd.Process.Signal(syscall.SIGKILL) // mid-loop, usually mid-transaction
				break
			}
		}
		for sc.Scan() { // lines already written before the kill are acknowledged too
			id, _ := strconv.ParseUint(sc.Text(), 10, 64)
			acked = append(acked, id)
		}
		cmd.Wait()
		for _, id := range acked {
			d, err := s.GetEffect(t.Context(), id)
			if err != nil || d.Effect.State != sm.Committed {
				t.Fatalf("round %d: acknowledged effect %d lost: %+v %v", round, id, d.Effect, err)
			}
		}
		verifyClean(t, s)
	}
}

// Concurrent writers in one process share transactions: far fewer durable
// writes than calls, and every call sees its own outcome.
func TestGroupCommit(t *testing.T) {
	s, _ := newStore(t)
	if _, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: "warm"}); err != nil {
		t.Fatal(err)
	}
	const n = 64
	before := s.group.durableWrites()
	var wg sync.WaitGroup
	ids := make([]uint64, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := s.Intercept(t.Context(), effectlog.InterceptRequest{Session: fmt.Sprintf("g%d", i%8), Tool: "w", Tier: sm.Compensable,
				Args: json.RawMessage(strconv.Itoa(i)), CreateSession: true})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = res.Effect.ID
			if _, err := s.Start(t.Context(), res.Effect.ID, model.Change{}); err != nil {
				t.Error(err)
			}
			if _, err := s.Commit(t.Context(), res.Effect.ID, model.Change{Result: json.RawMessage(strconv.Itoa(i))}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	writes := s.group.durableWrites() - before
	if writes >= 3*n {
		t.Fatalf("%d calls took %d durable writes: no grouping", 3*n, writes)
	}
	seen := map[uint64]bool{}
	for i, id := range ids {
		d, err := s.GetEffect(t.Context(), id)
		if err != nil || seen[id] || d.Effect.State != sm.Committed || string(d.Effect.Result) != strconv.Itoa(i) {
			t.Fatalf("call %d: effect %d %+v %v", i, id, d.Effect, err)
		}
		seen[id] = true
	}
	verifyClean(t, s)
	t.Logf("%d calls in %d durable writes", 3*n, writes)

	// A failing call in a batch fails alone.
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%2 == 0 {
				_, errs[i] = s.Commit(t.Context(), ids[i], model.Change{}) // already committed: refused
			} else {
				_, errs[i] = s.Intercept(t.Context(), effectlog.InterceptRequest{Session: "h", Tool: "w", Tier: sm.Compensable, Args: json.RawMessage(strconv.Itoa(i)), CreateSession: true})
			}
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if (i%2 == 0) != errors.Is(err, sm.ErrInvalidStateTransition) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if sess, _ := s.GetSession(t.Context(), "h"); sess.Effects != n/2 {
		t.Fatalf("session h has %d effects, want %d", sess.Effects, n/2)
	}
	verifyClean(t, s)
}

// TestCrashTorture repeats: a writer process (the library, or the CLI's
// undolog exec in a shell loop) runs mixed lifecycles while other processes
// read (list, show, export), compact, gc and undo (two undos of one failed
// session at once), and the whole lot is SIGKILLed at a random moment. The
// log must then verify clean and hold every operation the writer
// acknowledged; no compensation may have run twice, and no reader, compaction
// or gc may have failed for any reason but a busy log.
// UNDOLOG_TORTURE_CYCLES sets the number of cycles (default 6; the long run
// is 200).
func TestCrashTorture(t *testing.T) {
	cycles := 6
	if v, err := strconv.Atoi(os.Getenv("UNDOLOG_TORTURE_CYCLES")); err == nil && v > 0 {
		cycles = v
	}
	bin := testbin.Undolog(t)
	s, _ := newStore(t)
	s.pause()() // this process only looks between cycles
	work := t.TempDir()
	compLog, errLog := filepath.Join(work, "compensations"), filepath.Join(work, "errors")
	env := append(os.Environ(), "UNDOLOG="+bin, "UNDOLOG_LOG="+s.Path(), "COMPLOG="+compLog, "ERRLOG="+errLog, "W="+work)
	sh := func(script string, extra ...string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(append([]string{}, env...), extra...)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	// loop runs one undolog command per loop turn; an exit other than 0 and
	// the given ones puts its error in the error log.
	loop := func(name, allowed, args string) *exec.Cmd {
		return sh(fmt.Sprintf(`while :; do "$UNDOLOG" %s >/dev/null 2>"$W/%s.err"; c=$?; case " 0 %s " in *" $c "*) ;; *) { echo "%s: exit $c"; cat "$W/%s.err"; } >> "$ERRLOG";; esac; sleep 0.01; done`,
			args, name, allowed, name, name))
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for cycle := 0; cycle < cycles; cycle++ {
		session := fmt.Sprintf("torture-%d", cycle)
		// A failed session whose steps record each compensation run.
		undone := fmt.Sprintf("undo-%d", cycle)
		prep := sh(`for i in 1 2 3 4 5 6; do "$UNDOLOG" exec --session "$S" -q --undo 'sh -c "echo $UNDOLOG_EFFECT_ID >> $COMPLOG"' -- true >/dev/null || exit 1; done; "$UNDOLOG" session fail "$S" >/dev/null`, "S="+undone)
		prep.Stderr = nil
		if out, err := prep.CombinedOutput(); err != nil {
			t.Fatalf("cycle %d: prepare %s: %v %s", cycle, undone, err, out)
		}
		cli := cycle%2 == 1
		var cmd *exec.Cmd
		if cli {
			cmd = sh(`i=0; while :; do "$UNDOLOG" exec --session "$SESSION" -q --undo true -- sh -c "echo step-$i" >/dev/null || exit 1; echo "$i"; i=$((i+1)); done`, "SESSION="+session)
		} else {
			cmd = writerCmd(t, "loop", s.Path(), session)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		others := []*exec.Cmd{
			loop("list", "5", "list --limit 20"),
			loop("show", "3 5", "show 1"),
			// 6: a session changed between two of its pages (export it
			// again), which a writer let in at once makes likely.
			loop("export", "5 6", "export"),
			loop("compact", "5", "compact"),
			// gc may find the session undo is walking: it must leave it be.
			loop("gc", "5", "gc --older-than 0s --state failed --state compensated"),
			// 6: the other undo runs the session's walk; 3: gc dropped it first;
			// 4: it is compensated already; 9: a compensation failed or in doubt.
			loop("undo1", "3 4 6 9", "undo "+undone+" --yes"),
			loop("undo2", "3 4 6 9", "undo "+undone+" --yes"),
		}
		for _, o := range others {
			if err := o.Start(); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		var acked []string
		done, first := make(chan struct{}), make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				mu.Lock()
				if acked = append(acked, sc.Text()); len(acked) == 1 {
					close(first)
				}
				mu.Unlock()
			}
			close(done)
		}()
		select { // the kill comes at a random moment once the writer is under way
		case <-first:
		case <-time.After(20 * time.Second):
		}
		time.Sleep(time.Duration(rng.Intn(500)) * time.Millisecond)
		for _, c := range append(others, cmd) { // every group, mid-whatever
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
		for _, c := range append(others, cmd) {
			c.Wait()
		}
		<-done
		rep, err := s.Verify(t.Context())
		if err != nil || len(rep.Problems) != 0 {
			t.Fatalf("cycle %d (cli=%v): verify: %v %v", cycle, cli, err, rep.Problems)
		}
		if errs, _ := os.ReadFile(errLog); len(errs) > 0 {
			t.Fatalf("cycle %d (cli=%v): %s", cycle, cli, errs)
		}
		if ran, _ := os.ReadFile(compLog); len(ran) > 0 {
			seen := map[string]bool{}
			for _, id := range strings.Fields(string(ran)) {
				if seen[id] {
					t.Fatalf("cycle %d: the compensation of effect %s ran twice", cycle, id)
				}
				seen[id] = true
			}
		}
		if len(acked) == 0 {
			t.Fatalf("cycle %d: the writer acknowledged nothing", cycle)
		}
		effects, _, err := s.ListEffects(t.Context(), effectlog.EffectFilter{Session: session})
		if err != nil {
			t.Fatal(err)
		}
		committed := map[string]bool{}
		for _, e := range effects {
			if e.State != sm.Committed {
				continue
			}
			if cli {
				var a struct{ Argv []string }
				json.Unmarshal(e.Args, &a)
				if len(a.Argv) == 3 {
					committed[strings.TrimPrefix(a.Argv[2], "echo step-")] = true
				}
			} else {
				committed[strconv.FormatUint(e.ID, 10)] = true
			}
		}
		for _, a := range acked {
			if !committed[a] {
				t.Fatalf("cycle %d (cli=%v): acknowledged %s is not committed", cycle, cli, a)
			}
		}
		s.pause()()
		t.Logf("cycle %d (cli=%v): %d acknowledged, all present", cycle, cli, len(acked))
	}
}

// A process writing without pause keeps the log no longer than maxHold at a
// time and lets waiting processes in: another process's writes and reads
// get through well within the lock timeout, every time.
func TestBusyWriterLetsOthersIn(t *testing.T) {
	s, _ := newStore(t)
	if _, err := s.CreateSession(t.Context(), effectlog.NewSession{ID: "other"}); err != nil {
		t.Fatal(err)
	}
	cmd := writerCmd(t, "loop", s.Path(), "busy")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	for i := 0; i < 20 && sc.Scan(); i++ { // the writer is going
	}
	go func() { // keep the pipe drained
		for sc.Scan() {
		}
	}()
	patient := newTestLog(s.Path(), testOptions{LockTimeout: 2 * time.Second})
	var slowest time.Duration
	for i := 0; i < 10; i++ {
		start := time.Now()
		res, err := patient.Intercept(t.Context(), effectlog.InterceptRequest{Session: "other", Tool: "w", Tier: sm.Compensable, Args: json.RawMessage(strconv.Itoa(i))})
		if err != nil {
			t.Fatalf("write %d beside a busy writer: %v", i, err)
		}
		if _, err := patient.GetEffect(t.Context(), res.Effect.ID); err != nil {
			t.Fatalf("read %d beside a busy writer: %v", i, err)
		}
		slowest = max(slowest, time.Since(start))
		time.Sleep(time.Duration(i) * 7 * time.Millisecond) // meet the writer at different moments
	}
	t.Logf("slowest write and read beside a busy writer: %s", slowest)
	sess, err := s.GetSession(t.Context(), "busy")
	if err != nil || sess.Effects < 20 {
		t.Fatalf("the busy writer stalled: %+v %v", sess, err)
	}
}
