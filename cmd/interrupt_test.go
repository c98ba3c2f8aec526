package cmd

// An interrupt (SIGINT, SIGTERM) that arrives while a command waits for the
// log, which another process holds: the command ends as an interrupt at
// that step ends, never with a bare "context canceled".

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
	sm "github.com/undolog/undolog/statemachine"
)

// holdLog takes the log file's lock (as a process writing or reading it
// would) for d, in the background.
func holdLog(t *testing.T, db string, d time.Duration) (released chan struct{}) {
	t.Helper()
	f, err := os.OpenFile(db, os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	released = make(chan struct{})
	go func() {
		time.Sleep(d)
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		close(released)
	}()
	return released
}

func runWithLog(t *testing.T, db string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testbin.Undolog(t), args...)
	cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+db, "UNDOLOG_ACTOR=tester")
	cmd.Dir = runDir(t)
	return cmd
}

// runDirs holds the directory each test's undolog processes run in.
var runDirs struct {
	sync.Mutex
	of map[*testing.T]string
}

// runDir is the directory t's undolog processes run in: a temporary one,
// so that a relative path in a step or an undo (an argv split without a
// shell, "touch X; sleep 30", touches sleep and 30) lands there and not in
// the source tree; one for the whole test, as exec's signature holds its
// directory and a repeat must be the same call.
func runDir(t *testing.T) string {
	runDirs.Lock()
	defer runDirs.Unlock()
	if dir, ok := runDirs.of[t]; ok {
		return dir
	}
	if runDirs.of == nil {
		runDirs.of = map[*testing.T]string{}
	}
	dir := t.TempDir()
	runDirs.of[t] = dir
	t.Cleanup(func() {
		runDirs.Lock()
		delete(runDirs.of, t)
		runDirs.Unlock()
	})
	return dir
}

// outputAndCode runs cmd: its stdout and stderr, and its exit code (-1:
// it did not run).
func outputAndCode(cmd *exec.Cmd) (string, int) {
	out, err := cmd.CombinedOutput()
	return string(out), exitCodeOf(err)
}

func exitCodeOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// An irreversible exec interrupted while it waits for a busy log: its
// request is registered (it stays open), so exec ends as an interrupted
// wait does: exit 130, "its request stands".
func TestIrreversibleExecInterruptedWhileLogBusy(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "u.db")
	if out, err := runWithLog(t, db, "session", "start", "s").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	released := holdLog(t, db, 1500*time.Millisecond)
	cmd := runWithLog(t, db, "exec", "--session", "s", "--tier", "irreversible", "--", "true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	<-released
	if code := exitCodeOf(err); code != 130 || !strings.Contains(stderr.String(), "effect 1 (true) was not run: interrupted while it waited for approval; its request stands") {
		t.Fatalf("exit %d, stderr %q; want 130 and 'effect 1 (true) was not run: interrupted while it waited for approval; its request stands'", code, stderr.String())
	}
}

// list --follow stops on Ctrl-C with exit 0, also when its poll waits for
// a busy log (six tries: the interrupt and the next tick race).
func TestFollowInterruptedWhileLogBusy(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "u.db")
	if out, err := runWithLog(t, db, "session", "start", "s").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	for i := 0; i < 6; i++ {
		cmd := runWithLog(t, db, "list", "--follow")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		released := holdLog(t, db, 800*time.Millisecond)
		time.Sleep(400 * time.Millisecond)
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		<-released
		if code := exitCodeOf(err); code != 0 {
			t.Fatalf("try %d: list --follow interrupted: exit %d, stderr %q; want 0", i, code, stderr.String())
		}
	}
}

// A compensable exec interrupted while it waits for a busy log does not
// start its command: exit 130, and the effect is pending, for a repeat to
// run.
func TestCompensableExecInterruptedWhileLogBusyDoesNotRun(t *testing.T) {
	dir := t.TempDir()
	db, marks := filepath.Join(dir, "u.db"), filepath.Join(dir, "marks")
	if out, err := runWithLog(t, db, "session", "start", "s").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	released := holdLog(t, db, 1500*time.Millisecond)
	cmd := runWithLog(t, db, "exec", "--session", "s", "--undo", "true", "--", "sh", "-c", "sleep 1; echo ran >> "+marks)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	<-released
	if data, _ := os.ReadFile(marks); strings.Contains(string(data), "ran") {
		t.Fatalf("SIGTERM before the command started: it ran to the end anyway (exit %d)", exitCodeOf(err))
	}
	if code := exitCodeOf(err); code != 130 {
		t.Fatalf("exit %d, want 130", code)
	}
	out, err := runWithLog(t, db, "show", "1", "-o", "json").Output()
	if err != nil || !strings.Contains(string(out), `"state": "pending"`) {
		t.Fatalf("the effect after: %s %v", out, err)
	}
}

// A command that an interrupt reaches but that finishes its work and exits
// 0 is committed: a repeat replays it, and does not run it again.
func TestCommandThatSurvivesAnInterruptIsCommitted(t *testing.T) {
	dir := t.TempDir()
	db, marks, up := filepath.Join(dir, "u.db"), filepath.Join(dir, "marks"), filepath.Join(dir, "up")
	script := "trap '' INT TERM; touch " + up + "; sleep 1; echo ran >> " + marks
	cmd := runWithLog(t, db, "exec", "--session", "s", "--undo", "true", "--", "sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(up); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); exitCodeOf(err) != 0 {
		t.Fatalf("exec: exit %d, want the command's 0", exitCodeOf(err))
	}
	if out, err := runWithLog(t, db, "exec", "--session", "s", "--undo", "true", "--", "sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("the repeat: %v %s", err, out)
	}
	if data, _ := os.ReadFile(marks); strings.Count(string(data), "ran") != 1 {
		t.Fatalf("the command ran %d times", strings.Count(string(data), "ran"))
	}
}

// An approved irreversible exec interrupted while the log is busy, before
// its command starts: exit 130, the command did not run, and the approval
// stands for the run a repeat makes (it was spent on the run that did not
// happen).
func TestApprovalSurvivesAnInterruptBeforeTheCommand(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "u.db")
	if out, err := runWithLog(t, db, "session", "start", "s").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	marker := filepath.Join(dir, "ran")
	cmd := runWithLog(t, db, "exec", "--session", "s", "--tier", "irreversible", "--", "sh", "-c", "echo x >> "+marker)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if out, err := runWithLog(t, db, "approve", "1").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	released := holdLog(t, db, 1500*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	<-released
	if _, serr := os.Stat(marker); serr == nil {
		t.Skip("exec saw the approval before the log was held: the command ran")
	}
	if code := exitCodeOf(err); code != 130 {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	out, err := runWithLog(t, db, "show", "1", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Approval struct {
			Outcome string `json:"outcome"`
		} `json:"approval"`
	}
	json.Unmarshal(out, &d)
	if d.Approval.Outcome != "approved" {
		t.Fatalf("the command never ran, but its approval is gone (request %q): the repeat needs a new decision", d.Approval.Outcome)
	}
	if out, err := runWithLog(t, db, "exec", "--session", "s", "--tier", "irreversible", "--", "sh", "-c", "echo x >> "+marker).CombinedOutput(); err != nil {
		t.Fatalf("the repeat: %v %s", err, out)
	}
	if data, _ := os.ReadFile(marker); string(data) != "x\n" {
		t.Fatalf("the repeat ran the command %q", data)
	}
}

// An interrupt that comes just before the command starts is not lost: it
// stops exec before the command, or reaches the command (it once did
// neither in about one run in six, three runs side by side: the command ran
// to its end, committed, exit 0).
func TestInterruptJustBeforeTheCommandIsNotLost(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "u.db")
	if out, err := runWithLog(t, db, "session", "start", "s").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	var mu sync.Mutex
	var lost []string
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				mu.Lock()
				n := len(lost)
				mu.Unlock()
				if n > 0 {
					return
				}
				cmd := runWithLog(t, db, "exec", "--session", "s", "--key", fmt.Sprintf("w%d-%d", w, i), "--undo", "true", "--", "sh", "-c", "sleep 0.3; echo done")
				var stdout bytes.Buffer
				cmd.Stdout = &stdout
				if err := cmd.Start(); err != nil {
					t.Error(err)
					return
				}
				d := time.Duration(rand.IntN(6000)) * time.Microsecond
				time.Sleep(d)
				cmd.Process.Signal(syscall.SIGINT)
				if err := cmd.Wait(); exitCodeOf(err) == 0 {
					mu.Lock()
					lost = append(lost, fmt.Sprintf("SIGINT %v after start: exit 0, stdout %q", d, stdout.String()))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(lost) > 0 {
		t.Fatalf("an interrupt was lost: the command ran to its end and was committed: %v", lost)
	}
}

// An undo interrupted while its compensation runs exits 130 with a line
// that says so (not exit 1, "context canceled"); the step is in doubt.
func TestUndoInterruptedExits130(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "u.db")
	started := filepath.Join(dir, "started")
	if out, err := runWithLog(t, db, "exec", "--session", "s", "--tier", "compensable", "--undo", `["sh","-c","touch `+started+`; exec sleep 30"]`, "--", "true").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	cmd := runWithLog(t, db, "undo", "s", "--yes")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the compensation never started")
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if code := exitCodeOf(err); code != 130 || !strings.Contains(stderr.String(), "undolog: interrupted by a signal") {
		t.Fatalf("exit %d, stderr %q; want 130 and a line that says it was interrupted", code, stderr.String())
	}
}

// A quick command interrupted while it waits for the log, which another
// process holds, stops waiting at once: exit 130, "interrupted by a signal",
// and nothing written (not after the lock timeout, nor a write once the
// log is let go).
func TestQuickCommandInterruptedWhileLogBusyStopsWaiting(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "u.db")
	if out, err := runWithLog(t, db, "session", "start", "s").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		released := holdLog(t, db, 4*time.Second)
		cmd := runWithLog(t, db, "--lock-timeout", "10s", "intercept", "--session", "s", "--tool", "w", "--tier", "compensable", "--args", `{}`)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // waiting for the log by now
		sent := time.Now()
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		took := time.Since(sent)
		<-released
		if code := exitCodeOf(err); code != 130 || !strings.Contains(stderr.String(), "undolog: interrupted by a signal") {
			t.Fatalf("%v while waiting for the log: exit %d, stderr %q; want 130, interrupted by a signal", sig, code, stderr.String())
		}
		if took > 3*time.Second { // a failure bound: it used to wait for the log
			t.Fatalf("%v: it ended %v after the signal, once the log was let go", sig, took)
		}
		if out, _ := runWithLog(t, db, "list", "-o", "ids").Output(); len(bytes.TrimSpace(out)) != 0 {
			t.Fatalf("%v: an interrupted intercept wrote effect %s", sig, out)
		}
	}
}

// An import interrupted part way (SIGINT while it waits for its input, the
// producer hung) ends at once with exit 130 and takes out what it imported:
// the log is as empty as before, and the same import then goes through.
func TestImportInterruptedTakesItsSessionsOut(t *testing.T) {
	dir := t.TempDir()
	src, db := filepath.Join(dir, "src.db"), filepath.Join(dir, "u.db")
	for _, s := range []string{"a", "b"} {
		if out, err := runWithLog(t, src, "intercept", "--session", s, "--tool", "w", "--tier", "compensable", "--args", `{}`).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	export, err := runWithLog(t, src, "export").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(export), "\n")
	second := 0 // b's session record
	for i, l := range lines {
		if strings.HasPrefix(l, `{"type":"session"`) {
			second = i
		}
	}
	cmd := runWithLog(t, db, "import", "-")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, strings.Join(lines[:second+1], "")) // a is written once b's record is read
	time.Sleep(500 * time.Millisecond)
	// The producer then hangs (the pipe stays open, nothing comes): the
	// interrupt ends the wait for the next line.
	cmd.Process.Signal(syscall.SIGINT)
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	select {
	case err = <-ended:
	case <-time.After(10 * time.Second):
		in.Close()
		<-ended
		t.Fatal("an import interrupted while it waited for input went on waiting")
	}
	in.Close()
	if code := exitCodeOf(err); code != 130 || !strings.Contains(stderr.String(), "interrupted by a signal") {
		t.Fatalf("import interrupted: exit %d, %q; want 130", code, stderr.String())
	}
	if out, _ := runWithLog(t, db, "session", "list", "-o", "ids").Output(); len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("an interrupted import left sessions %q", out)
	}
	imp := runWithLog(t, db, "import", "-")
	imp.Stdin = bytes.NewReader(export)
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("the same import once more: %v\n%s", err, out)
	}
}

// A second SIGINT ends the process as an uncaught one would, whatever the
// first one left it waiting for: here an export whose reader stopped
// reading (its write to the full pipe does not end with the first). exec is
// another matter: it hands each signal to its command.
func TestASecondInterruptEndsTheProcess(t *testing.T) {
	db := filepath.Join(t.TempDir(), "u.db")
	log := logaddr.File(db, logaddr.Options{})
	big := strings.Repeat("x", 2000)
	for i := range 200 { // some 500 KB of export, past a pipe's buffer
		if _, err := log.Intercept(t.Context(), effectlog.InterceptRequest{Session: "s", Tool: "w", Tier: sm.Compensable,
			Args: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, big)), CreateSession: true}); err != nil {
			t.Fatal(err)
		}
	}
	log.Close()
	cmd := runWithLog(t, db, "export")
	out, err := cmd.StdoutPipe() // never read
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	time.Sleep(500 * time.Millisecond) // the pipe full by now
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-ended:
		t.Fatalf("the first SIGINT ended the export (%v) while its write waited", err)
	case <-time.After(500 * time.Millisecond):
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-ended:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
			t.Fatalf("the second SIGINT: %v; want the process killed by it", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("a second SIGINT did not end the process")
	}
}
