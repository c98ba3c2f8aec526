package agenttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hookEnv names the config file of a process started as the recording hook.
const hookEnv = "UNDOLOG_AGENTTEST_HOOK"

// Hook is a recording hook for Claude Code: the test binary started again as
// a hook command, which appends what it got to a log and answers from Rules.
type Hook struct {
	// Rules answer the hook's calls: the first rule that matches a call
	// answers it. A call no rule matches gets no answer (exit 0, no output),
	// which lets the tool go on.
	Rules []HookRule
	// Timeout is each hook entry's "timeout" in seconds (0: Claude Code's
	// default), after which Claude Code cuts the hook off.
	Timeout int

	dir string // holds config.json and calls.jsonl
}

// HookRule answers the calls of an event (and a tool, and input containing
// Match, each when set): the first matching call gets Answers[0], the
// second Answers[1], and so on, the last answer repeating.
type HookRule struct {
	Event   string // PreToolUse, PostToolUse, ...; empty: any
	Tool    string // empty: any
	Match   string // a substring of the tool input's JSON; empty: any
	Answers []Answer
}

// Answer is a hook's answer to a call.
type Answer struct {
	// Decision is PreToolUse's permissionDecision (allow, deny, ask, defer),
	// or "exit2" (exit 2 with Reason on stderr), or "" for no output.
	Decision string
	Reason   string
	// Delay is how long the hook waits before it answers (after it logged
	// the call).
	Delay time.Duration
}

// hookConfig is the hook process's config file.
type hookConfig struct {
	Log   string
	Rules []HookRule
}

// HookCall is one call a recording hook got.
type HookCall struct {
	Payload map[string]any // the JSON object read from stdin
	// The hook's environment and working directory.
	ProjectDirEnv, SessionIDEnv, Cwd string
	Answer                           Answer
}

// Event, Tool and ToolUseID are the payload's hook_event_name, tool_name and
// tool_use_id.
func (c HookCall) Event() string     { s, _ := c.Payload["hook_event_name"].(string); return s }
func (c HookCall) Tool() string      { s, _ := c.Payload["tool_name"].(string); return s }
func (c HookCall) ToolUseID() string { s, _ := c.Payload["tool_use_id"].(string); return s }

// ToolInput is the payload's tool_input.
func (c HookCall) ToolInput() map[string]any {
	m, _ := c.Payload["tool_input"].(map[string]any)
	return m
}

// Install writes projectDir's .claude/settings.json (replacing it) with h as
// the command of PreToolUse, PostToolUse and PostToolUseFailure for every
// tool. The test binary's TestMain must call Main.
func (h *Hook) Install(tb testing.TB, projectDir string) {
	tb.Helper()
	command, err := h.Command(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	settings := HooksSettings(command, "PreToolUse", "PostToolUse", "PostToolUseFailure")
	if h.Timeout > 0 {
		for _, entries := range settings["hooks"].(map[string]any) {
			for _, e := range entries.([]any) {
				for _, hk := range e.(map[string]any)["hooks"].([]any) {
					hk.(map[string]any)["timeout"] = h.Timeout
				}
			}
		}
	}
	if err := WriteSettings(projectDir, settings); err != nil {
		tb.Fatal(err)
	}
}

// Command writes the hook's config in dir (its log goes there too) and
// returns the hook's command line: this process's executable started again,
// whose main (TestMain) calls Main or ServeRole.
func (h *Hook) Command(dir string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	h.dir = dir
	cfg := hookConfig{Log: filepath.Join(h.dir, "calls.jsonl"), Rules: h.Rules}
	cfgPath := filepath.Join(h.dir, "config.json")
	if err := writeJSON(cfgPath, cfg); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s=%s %s", hookEnv, shellQuote(cfgPath), shellQuote(exe)), nil
}

// HooksSettings is a settings.json object that runs command on each of the
// events, for every tool.
func HooksSettings(command string, events ...string) map[string]any {
	hooks := map[string]any{}
	for _, e := range events {
		hooks[e] = []any{map[string]any{
			"matcher": "*",
			"hooks":   []any{map[string]any{"type": "command", "command": command}},
		}}
	}
	return map[string]any{"hooks": hooks}
}

// WriteSettings writes settings as projectDir's .claude/settings.json.
func WriteSettings(projectDir string, settings any) error {
	if err := os.MkdirAll(filepath.Join(projectDir, ".claude"), 0o755); err != nil {
		return err
	}
	return writeJSON(filepath.Join(projectDir, ".claude", "settings.json"), settings)
}

// Calls returns the calls the hook got so far, in order.
func (h *Hook) Calls(tb testing.TB) []HookCall {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, "calls.jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	calls, err := parseCalls(b)
	if err != nil {
		tb.Fatal(err)
	}
	return calls
}

func parseCalls(b []byte) ([]HookCall, error) {
	var calls []HookCall
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var c HookCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("hook log: %v", err)
		}
		calls = append(calls, c)
	}
	return calls, sc.Err()
}

// runHook is the recording hook: it reads the payload, finds its answer
// (counting the earlier calls the rule matched in the log, under a lock for
// hooks run side by side), logs the call and answers.
func runHook(configPath string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "agenttest hook:", err)
		return 1
	}
	var cfg hookConfig
	if err := readJSON(configPath, &cfg); err != nil {
		return fail(err)
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		return fail(err)
	}
	call := HookCall{ProjectDirEnv: os.Getenv("CLAUDE_PROJECT_DIR"), SessionIDEnv: os.Getenv("CLAUDE_CODE_SESSION_ID")}
	call.Cwd, _ = os.Getwd()
	if err := json.Unmarshal(in, &call.Payload); err != nil {
		return fail(fmt.Errorf("stdin: %v", err))
	}
	log, err := os.OpenFile(cfg.Log, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer log.Close()
	if err := syscall.Flock(int(log.Fd()), syscall.LOCK_EX); err != nil {
		return fail(err)
	}
	earlier, err := io.ReadAll(log)
	if err != nil {
		return fail(err)
	}
	before, err := parseCalls(earlier)
	if err != nil {
		return fail(err)
	}
	for _, r := range cfg.Rules {
		if !r.matches(call) || len(r.Answers) == 0 {
			continue
		}
		n := 0
		for _, c := range before {
			if r.matches(c) {
				n++
			}
		}
		call.Answer = r.Answers[min(n, len(r.Answers)-1)]
		break
	}
	line, _ := json.Marshal(call)
	if _, err := log.Write(append(line, '\n')); err != nil {
		return fail(err)
	}
	log.Close() // and its lock: hooks side by side do not wait for this one's delay
	time.Sleep(call.Answer.Delay)
	switch a := call.Answer; a.Decision {
	case "":
		return 0
	case "exit2":
		fmt.Fprintln(os.Stderr, a.Reason)
		return 2
	default:
		json.NewEncoder(os.Stdout).Encode(map[string]any{"hookSpecificOutput": map[string]any{
			"hookEventName":            call.Event(),
			"permissionDecision":       a.Decision,
			"permissionDecisionReason": a.Reason,
		}})
		return 0
	}
}

func (r HookRule) matches(c HookCall) bool {
	if r.Event != "" && r.Event != c.Event() || r.Tool != "" && r.Tool != c.Tool() {
		return false
	}
	if r.Match == "" {
		return true
	}
	input, _ := json.Marshal(c.ToolInput())
	return strings.Contains(string(input), r.Match)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// shellQuote quotes s as one word of sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
