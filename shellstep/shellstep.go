// Package shellstep owns the shell steps of `undolog exec`: what a step is
// as a call the log records (its argv and working directory), running its
// command with its streams passed through and captured and the interrupts
// forwarded to it, and writing a recorded run's output back byte for byte
// when the step is replayed. The call flow around it is lifecycle's.
package shellstep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/undolog/undolog/internal/child"
	"github.com/undolog/undolog/lifecycle"
)

// CaptureLimit bounds how much of each output stream is kept in the log.
const CaptureLimit = 1 << 20

// Result is the result snapshot of a step's run. Output that is not UTF-8
// is kept in the *_base64 fields instead, so replay is byte for byte.
type Result struct {
	ExitCode        int    `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutBase64    []byte `json:"stdout_base64,omitempty"`
	StderrBase64    []byte `json:"stderr_base64,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	DurationMS      int64  `json:"duration_ms"`
}

// Step is one shell step: its command and the streams it runs with.
type Step struct {
	Argv        []string
	In          io.Reader
	Out, ErrOut io.Writer
	// Ran is how its command ended, once Run has returned.
	Ran Ran
}

// Ran is how a step's command ended.
type Ran struct {
	// Code is its exit code (128+N when signal N killed it).
	Code int
	// Interrupted is the interrupt that reached it, if one did.
	Interrupted os.Signal
	// Err: it did not run: a *StartError, ErrNotStarted, or waiting for
	// it failed.
	Err error
}

// ErrNotStarted: an interrupt came after the step's effect started and
// before its command did; the command did not run.
var ErrNotStarted = errors.New("interrupted before the command ran")

// StartError is a command that could not be started. NotFound tells a
// command not found from one found but not runnable (a shell's 127 and 126).
type StartError struct {
	Name     string
	NotFound bool
	Err      error
}

func (e *StartError) Error() string { return fmt.Sprintf("cannot run %s: %v", e.Name, e.Err) }

// Call is the step as the log records it, run in cwd: its argv and cwd as
// JSON text. Bytes that are not UTF-8 would all become U+FFFD there: two
// commands would be one call, and the second would get the first's output
// replayed, so they are refused.
func (s *Step) Call(cwd string) (json.RawMessage, error) {
	for i, a := range append([]string{cwd}, s.Argv...) {
		if !utf8.ValidString(a) {
			what := fmt.Sprintf("argument %d of the command", i-1) // 0: the command's name
			if i == 0 {
				what = "the working directory"
			}
			return nil, fmt.Errorf("%s is not valid UTF-8 (%q): undolog records a call as text, and cannot tell it from another", what, a)
		}
	}
	return json.Marshal(map[string]any{"argv": s.Argv, "cwd": cwd})
}

// Run runs the step as the call c that lifecycle.Drive has started: from
// here on an interrupt reaches the command. Its output is captured into the
// result a success commits; an exit code other than 0 fails the call, for
// the same step to run again.
func (s *Step) Run(ctx context.Context, c *lifecycle.Call) lifecycle.Result {
	interrupts := catchInterrupts()
	defer signal.Stop(interrupts)
	if ctx.Err() != nil {
		// Interrupted while the log was busy, before the command started:
		// it does not start, and a repeat runs it.
		s.Ran.Err = ErrNotStarted
		return lifecycle.Result{Failed: ErrNotStarted.Error()}
	}
	stdout, stderr := &capture{limit: CaptureLimit}, &capture{limit: CaptureLimit}
	began := time.Now()
	s.Ran = s.run(ctx, stdout, stderr, interrupts)
	switch {
	case s.Ran.Err != nil:
		return lifecycle.Result{Failed: s.Ran.Err.Error()}
	case s.Ran.Code != 0:
		// A command that an interrupt reached but that exited 0 did its
		// work: it is committed like any other.
		return lifecycle.Result{Failed: s.Ran.failure()}
	}
	result, _ := json.Marshal(stdout.into(stderr, 0, time.Since(began)))
	return lifecycle.Result{Value: result}
}

// RunUnlogged runs a step that is not logged (a safe one).
func (s *Step) RunUnlogged(ctx context.Context) Ran {
	interrupts := catchInterrupts()
	defer signal.Stop(interrupts)
	s.Ran = s.run(ctx, nil, nil, interrupts)
	return s.Ran
}

// failure is what the log records of a run that exited with a code other
// than 0.
func (r Ran) failure() string {
	if r.Interrupted != nil {
		return fmt.Sprintf("interrupted by %v (exit status %d)", r.Interrupted, r.Code)
	}
	return fmt.Sprintf("exit status %d", r.Code)
}

// Text says what became of step effect id when its command was
// interrupted, or did not run after the effect started; "" when its exit
// code says it all.
func (r Ran) Text(id uint64) string {
	switch {
	case errors.Is(r.Err, ErrNotStarted):
		return fmt.Sprintf("%v; effect %d is pending", ErrNotStarted, id)
	case r.Err != nil:
		return r.Err.Error()
	case r.Interrupted != nil && r.Code != 0:
		return fmt.Sprintf("the command was %s; effect %d is pending: the same exec runs it again", r.failure(), id)
	}
	return ""
}

func catchInterrupts() chan os.Signal {
	interrupts := make(chan os.Signal, 2)
	signal.Notify(interrupts, os.Interrupt, syscall.SIGTERM)
	return interrupts
}

// run runs the command with the streams passed through (and copied into
// the captures when given), forwarding the interrupts to it.
func (s *Step) run(ctx context.Context, stdout, stderr *capture, interrupts chan os.Signal) Ran {
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	child.Prepare(cmd)
	cmd.Stdin = s.In
	cmd.Stdout, cmd.Stderr = s.Out, s.ErrOut
	if stdout != nil {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(s.Out, stdout), io.MultiWriter(s.ErrOut, stderr)
	}
	if err := cmd.Start(); err != nil {
		notFound := errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist)
		return Ran{Err: &StartError{Name: s.Argv[0], NotFound: notFound, Err: errors.Unwrap(err)}}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var interrupted os.Signal
	ended := ctx.Done()
	for {
		select {
		case sig := <-interrupts:
			interrupted, ended = sig, nil
			cmd.Process.Signal(sig)
		case <-ended:
			// ctx ended: by a signal that interrupts hears too (forwarded
			// above), or by one that came just before it listened, which
			// the command gets all the same.
			ended = nil
			select {
			case sig := <-interrupts:
				interrupted = sig
			case <-time.After(20 * time.Millisecond):
				if interrupted == nil {
					interrupted = os.Interrupt
				}
			}
			cmd.Process.Signal(interrupted)
		case err := <-done:
			code := cmd.ProcessState.ExitCode()
			if code < 0 { // killed by a signal
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = 128 + int(ws.Signal())
				} else {
					code = 128
				}
			}
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				return Ran{Code: code, Interrupted: interrupted, Err: err}
			}
			return Ran{Code: code, Interrupted: interrupted}
		}
	}
}

// Replay writes a recorded run's output to out and errOut and returns its
// exit code; a result that is not a step's writes nothing (exit code 0).
func Replay(result json.RawMessage, out, errOut io.Writer) (code int, err error) {
	var r Result
	if len(result) == 0 || json.Unmarshal(result, &r) != nil {
		return 0, nil
	}
	stdout, stderr := []byte(r.Stdout), []byte(r.Stderr)
	if r.StdoutBase64 != nil {
		stdout = r.StdoutBase64
	}
	if r.StderrBase64 != nil {
		stderr = r.StderrBase64
	}
	if _, err := out.Write(stdout); err != nil {
		return 0, err
	}
	if _, err := errOut.Write(stderr); err != nil {
		return 0, err
	}
	return r.ExitCode, nil
}

// capture keeps the first limit bytes written to it and notes the rest.
type capture struct {
	limit     int
	buf       []byte
	truncated bool
}

func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	if room := c.limit - len(c.buf); n > room {
		c.truncated = true
		p = p[:max(room, 0)]
	}
	c.buf = append(c.buf, p...)
	return n, nil
}

// into builds the result from the stdout capture c and the stderr capture e.
func (c *capture) into(e *capture, code int, d time.Duration) Result {
	r := Result{ExitCode: code, StdoutTruncated: c.truncated, StderrTruncated: e.truncated, DurationMS: d.Milliseconds()}
	if utf8.Valid(c.buf) {
		r.Stdout = string(c.buf)
	} else {
		r.StdoutBase64 = c.buf
	}
	if utf8.Valid(e.buf) {
		r.Stderr = string(e.buf)
	} else {
		r.StderrBase64 = e.buf
	}
	return r
}
