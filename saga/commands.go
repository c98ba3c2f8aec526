package saga

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/undolog/undolog/filesnap"
	"github.com/undolog/undolog/internal/child"
	"github.com/undolog/undolog/internal/template"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/mcpclient"
	"github.com/undolog/undolog/model"
)

// ToolCaller calls tools on an MCP server: how mcp compensations run.
type ToolCaller interface {
	CallTool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
	Close() error
}

// execute runs one attempt of a compensation.
func (r *Runner) execute(ctx context.Context, step Step, attempt int, srv *sessionServer) error {
	c := step.Entry.Compensation
	switch c.Kind {
	case model.CompensationCommand:
		err := r.runCommand(ctx, step, attempt, c.Argv, c.Dir, nil)
		var exit *exec.ExitError
		if _, _, files := filesnap.ParseRestore(c); files && errors.As(err, &exit) && exit.ExitCode() == filesnap.RestoreRefusedExit {
			// Files changed since, or past what the snapshot holds: again
			// would refuse again.
			return &permanentError{err}
		}
		return err
	case model.CompensationMCP:
		args, err := MCPArgs(step.Effect, c)
		if err != nil {
			return &permanentError{err}
		}
		return srv.callTool(ctx, step.Effect.ID, c.Tool, args)
	case model.CompensationCases:
		ch, err := ChooseCase(step.Effect, c)
		if err != nil {
			return &permanentError{err}
		}
		switch ch.Kind() {
		case model.CompensationMCP:
			return srv.callTool(ctx, step.Effect.ID, ch.Tool, ch.Args)
		case model.CompensationCommand:
			return r.runCommand(ctx, step, attempt, ch.Argv, c.Dir, ch.Stdin)
		}
		return nil // a skip: the step's line says "compensated (nothing to undo: ...)"
	}
	return &permanentError{fmt.Errorf("unknown compensation kind %q", c.Kind)}
}

// ChooseCase picks the case of a cases compensation that the effect's
// args, result and capture select, filled in.
func ChooseCase(e model.Effect, c model.Compensation) (template.Chosen, error) {
	var cs template.Cases
	if err := json.Unmarshal(c.Args, &cs); err != nil {
		return template.Chosen{}, fmt.Errorf("the compensation's cases are not readable: %v", err)
	}
	return cs.Choose(template.Input{Args: e.Args, Result: e.Result, Capture: c.Capture})
}

// MCPArgs fills an mcp compensation's argument template.
func MCPArgs(e model.Effect, c model.Compensation) (json.RawMessage, error) {
	args := c.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return template.Eval(args, template.Input{Args: e.Args, Result: e.Result, Capture: c.Capture})
}

// sessionServer is the session's MCP server for one walk: started at its
// first mcp compensation, in the directory it ran in behind the proxy, and
// closed when the walk ends.
type sessionServer struct {
	argv  []string
	dir   string
	start func(ctx context.Context, upstream []string, dir string) (ToolCaller, error)
	// caller is the connection, once made.
	caller ToolCaller
}

// callTool runs an mcp compensation of effect id on the server.
func (s *sessionServer) callTool(ctx context.Context, id uint64, tool string, args json.RawMessage) error {
	if s.caller == nil {
		switch {
		case len(s.argv) == 0:
			return &permanentError{fmt.Errorf("effect %d needs an MCP server, and its session recorded none (it did not run behind undolog proxy)", id)}
		case s.start == nil:
			return &permanentError{fmt.Errorf("effect %d needs its MCP server, which cannot be started here", id)}
		}
		// Kept only once connected: a failed dial is a failed attempt, and
		// what it returned (often a nil pointer in the interface) is no client.
		caller, err := s.start(ctx, s.argv, s.dir)
		if err != nil {
			return err
		}
		if caller == nil {
			return fmt.Errorf("effect %d: no connection to its MCP server", id)
		}
		s.caller = caller
	}
	// Bounded: a server that never answers (or answers another id) would
	// hold the undo for good.
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := s.caller.CallTool(callCtx, tool, args)
	if (errors.Is(err, mcpclient.ErrNoAnswer) || errors.Is(err, mcpclient.ErrUnreadableAnswer)) && ctx.Err() == nil {
		return &inDoubtError{err}
	}
	return err
}

// close ends the connection, if one was made.
func (s *sessionServer) close() {
	if s.caller != nil {
		s.caller.Close()
		s.caller = nil
	}
}

// callTimeout bounds one compensation's MCP call.
const callTimeout = 2 * time.Minute

// inDoubtError is an attempt that may have had its effect: its MCP call was
// sent and no answer came. It is not retried: compensations are not assumed
// idempotent.
type inDoubtError struct{ err error }

func (e *inDoubtError) Error() string { return e.err.Error() }

func (e *inDoubtError) Unwrap() error { return e.err }

// permanentError is a failure that retrying cannot change.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }

func (e *permanentError) Unwrap() error { return e.err }

// runCommand runs the argv without a shell. The effect reaches it through
// UNDOLOG_EFFECT_ID, UNDOLOG_SESSION, UNDOLOG_TOOL, UNDOLOG_ARGS and
// UNDOLOG_RESULT (when under 64 KiB), UNDOLOG_ATTEMPT and UNDOLOG_EFFECT_FILE
// (the whole effect as JSON).
func (r *Runner) runCommand(ctx context.Context, step Step, attempt int, argv []string, dir string, stdin []byte) error {
	e := step.Effect
	file, err := os.CreateTemp("", "undolog-effect-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(file.Name())
	if err := json.NewEncoder(file).Encode(e); err != nil {
		file.Close()
		return err
	}
	file.Close()
	result := string(e.Result)
	if result == "" {
		result = "null"
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	child.Prepare(cmd)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Env = append(os.Environ(),
		"UNDOLOG_EFFECT_ID="+strconv.FormatUint(e.ID, 10),
		"UNDOLOG_SESSION="+e.Session,
		"UNDOLOG_TOOL="+e.Tool,
		"UNDOLOG_ATTEMPT="+strconv.Itoa(attempt),
		"UNDOLOG_EFFECT_FILE="+file.Name(),
	)
	// The kernel caps one environment string (128 KiB on Linux): large args or
	// results reach the command through the effect file only.
	for name, value := range map[string]string{"UNDOLOG_ARGS": string(e.Args), "UNDOLOG_RESULT": result} {
		if len(value) <= maxEnvValue {
			cmd.Env = append(cmd.Env, name+"="+value)
		}
	}
	var tail bytes.Buffer
	out := io.Writer(&tail)
	if r.Output != nil {
		// The command may be an agent's: what it prints is escaped as stored
		// text is. (One writer for both streams: os/exec then writes from one
		// goroutine at a time.)
		shown := textfmt.NewEscapingWriter(r.Output)
		defer shown.Flush()
		out = io.MultiWriter(shown, &tail)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return &commandFailed{name: argv[0], err: err, last: lastLine(tail.String()), shown: r.Output != nil}
	}
	return nil
}

// commandFailed is a compensation command that failed: its error names the
// command, how it ended and the last line it printed (what the entry
// records as its last error).
type commandFailed struct {
	name  string
	err   error
	last  string
	shown bool // what it printed went to Runner.Output as it ran
}

func (e *commandFailed) Error() string {
	if e.last == "" {
		return fmt.Sprintf("%s: %v", e.name, e.err)
	}
	return fmt.Sprintf("%s: %v: %s", e.name, e.err, e.last)
}

func (e *commandFailed) Unwrap() error { return e.err }

// progressText is err as a progress line says it: without the last line a
// failed command printed when that was shown already, just above it.
func progressText(err error) string {
	var failed *commandFailed
	if errors.As(err, &failed) && failed.shown && failed.last != "" {
		brief := *failed
		brief.last = ""
		return textfmt.OneLine(strings.Replace(err.Error(), failed.Error(), brief.Error(), 1))
	}
	return textfmt.OneLine(err.Error())
}

// maxEnvValue is the largest args or result passed in the environment.
const maxEnvValue = 64 << 10

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
