package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/undolog/undolog/internal/testbin"
)

const userSettings = `{
  "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
  "model": "claude-x",
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint && check", "timeout": 5}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
  },
  "env": {"A": "1"}
}
`

// init claude-code registers undolog hook for the three tool events with a
// timeout past its wait, keeps the user's settings and hooks (their order
// too), writes the default policy without replacing the user's, and a
// second run changes nothing; settings it cannot read are left alone.
func TestInitClaudeCode(t *testing.T) {
	bin := testbin.Undolog(t)
	dir := t.TempDir()
	settings := filepath.Join(dir, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	os.WriteFile(settings, []byte(userSettings), 0o600)
	run := func(args ...string) (string, int) { return initRun(bin, args...) }
	if out, code := run("--wait", "2m", dir); code != 0 || !strings.Contains(out, "registered") {
		t.Fatalf("init: %d %s", code, out)
	}
	first, _ := os.ReadFile(settings)
	var s struct {
		Permissions json.RawMessage
		Model       string
		Env         map[string]string
		Hooks       map[string][]struct {
			Matcher string
			Hooks   []struct {
				Type, Command string
				Timeout       int
			}
		}
	}
	if err := json.Unmarshal(first, &s); err != nil {
		t.Fatalf("settings after init: %v\n%s", err, first)
	}
	if s.Model != "claude-x" || s.Env["A"] != "1" || !strings.Contains(string(s.Permissions), "Bash(ls:*)") ||
		len(s.Hooks["Stop"]) != 1 || s.Hooks["Stop"][0].Hooks[0].Command != "notify-send done" {
		t.Fatalf("the user's settings were not kept:\n%s", first)
	}
	pre := s.Hooks["PreToolUse"]
	if len(pre) != 2 || pre[0].Hooks[0].Command != "lint && check" || pre[0].Hooks[0].Timeout != 5 {
		t.Fatalf("the user's PreToolUse hook was not kept first, as it was:\n%s", first)
	}
	if h := pre[1].Hooks[0]; !strings.HasPrefix(h.Command, bin+" hook --policy") || !strings.Contains(h.Command, "--wait 2m") || !strings.HasSuffix(h.Command, " || exit 2") || h.Timeout <= 120+20 {
		t.Fatalf("undolog's PreToolUse hook: %+v, want a timeout past its 2m wait and the hook's margin", h)
	}
	for _, ev := range []string{"PostToolUse", "PostToolUseFailure"} {
		if g := s.Hooks[ev]; len(g) != 1 || !strings.HasPrefix(g[0].Hooks[0].Command, bin+" hook") {
			t.Fatalf("%s: %+v", ev, g)
		}
	}
	if i, j := bytes.Index(first, []byte(`"permissions"`)), bytes.Index(first, []byte(`"env"`)); i > j || bytes.Index(first, []byte(`"model"`)) > bytes.Index(first, []byte(`"hooks"`)) {
		t.Fatalf("the settings' keys were reordered:\n%s", first)
	}
	policy := filepath.Join(dir, ".claude", "undolog-policy.yaml")
	// The hook undoes Write, Edit and Bash by the files it captures
	// (compensate: files): check says so, and warns of no manual undo.
	check := exec.Command(bin, "policy", "check", policy)
	var stderr bytes.Buffer
	check.Stderr = &stderr
	out, err := check.Output()
	if err != nil {
		t.Fatalf("the written policy does not check: %v\n%s%s", err, out, stderr.Bytes())
	}
	for _, tool := range []string{"Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"} {
		if !regexp.MustCompile(`(?m)^` + tool + `\t.*\t-\tfiles$`).Match(out) {
			t.Errorf("policy check does not show %s undone by files:\n%s", tool, out)
		}
	}
	if !regexp.MustCompile(`(?m)^Bash\teach command of \.args\.command, the worst: irreversible if `).Match(out) || bytes.Contains(out, []byte(`\n`)) {
		t.Errorf("policy check does not show Bash's shell: command, or shows a condition's newline:\n%s", out)
	}
	if strings.Contains(stderr.String(), "warning") || strings.Contains(string(out), "manual") {
		t.Errorf("policy check of the default policy warns or says manual:\n%s%s", out, stderr.Bytes())
	}
	os.WriteFile(policy, []byte("tools:\n  Bash: {tier: irreversible}\n"), 0o644)
	if out, code := run("--wait", "2m", dir); code != 0 || !strings.Contains(out, "already") {
		t.Fatalf("second init: %d %s, want nothing to do", code, out)
	}
	if again, _ := os.ReadFile(settings); !bytes.Equal(again, first) {
		t.Fatalf("a second init changed the settings:\n%s", again)
	}
	if mine, _ := os.ReadFile(policy); string(mine) != "tools:\n  Bash: {tier: irreversible}\n" {
		t.Fatalf("init replaced the user's policy:\n%s", mine)
	}
	// Another wait updates undolog's entries in place.
	if out, code := run("--wait", "10m", dir); code != 0 {
		t.Fatalf("init --wait 10m: %d %s", code, out)
	}
	if b, _ := os.ReadFile(settings); strings.Count(string(b), "undolog hook") != 3 || !strings.Contains(string(b), "--wait 10m") {
		t.Fatalf("updated entries:\n%s", b)
	}
	os.WriteFile(settings, []byte(`{"hooks": [}`), 0o600)
	if out, code := run(dir); code != ExitUsage || !strings.Contains(out, "nothing was changed") {
		t.Fatalf("unreadable settings: %d %s", code, out)
	}
	if b, _ := os.ReadFile(settings); string(b) != `{"hooks": [}` {
		t.Fatalf("unreadable settings were changed: %s", b)
	}
}

// initRun runs `bin init claude-code args...`: its output and exit code.
func initRun(bin string, args ...string) (string, int) {
	return outputAndCode(exec.Command(bin, append([]string{"init", "claude-code"}, args...)...))
}

// preHookCommand is the PreToolUse command init wrote in settings.
func preHookCommand(t *testing.T, settings string) string {
	t.Helper()
	var s struct {
		Hooks map[string][]struct{ Hooks []struct{ Command string } }
	}
	b, _ := os.ReadFile(settings)
	if err := json.Unmarshal(b, &s); err != nil || len(s.Hooks["PreToolUse"]) == 0 {
		t.Fatalf("settings: %v\n%s", err, b)
	}
	g := s.Hooks["PreToolUse"]
	return g[len(g)-1].Hooks[0].Command
}

// The PreToolUse hook init writes fails closed: run through sh -c as Claude
// Code runs it, an undolog binary that is gone (127) or killed by a signal
// exits 2, which blocks the call. It names undolog by its absolute path,
// and a re-run upgrades an entry that named it bare.
func TestInitClaudeCodeHookFailsClosed(t *testing.T) {
	dir := t.TempDir()
	// A copy of the binary, for it to be moved away.
	bin := filepath.Join(t.TempDir(), "undolog")
	data, err := os.ReadFile(testbin.Undolog(t))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bin, data, 0o755)
	settings := filepath.Join(dir, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	bare := `{"hooks":{"PreToolUse":[{"matcher":"*","hooks":[{"type":"command","command":"undolog hook --wait 5m0s","timeout":360}]}]}}`
	os.WriteFile(settings, []byte(bare), 0o644)
	// The hook's log and snapshots, which init denies to the agent's shell.
	env := append(os.Environ(), "UNDOLOG_LOG="+filepath.Join(t.TempDir(), "u.db"), "UNDOLOG_FILES_DIR="+t.TempDir())
	init := exec.Command(bin, "init", "claude-code", dir)
	init.Env = env
	if out, code := outputAndCode(init); code != 0 {
		t.Fatalf("init: %d %s", code, out)
	}
	if b, _ := os.ReadFile(settings); strings.Count(string(b), "undolog hook") != 3 || strings.Contains(string(b), `"undolog hook`) {
		t.Fatalf("the bare entry was not upgraded in place:\n%s", b)
	}
	command := preHookCommand(t, settings)
	if !strings.HasPrefix(command, bin+" hook ") {
		t.Fatalf("PreToolUse command %q, want undolog's absolute path %s", command, bin)
	}
	event := `{"session_id":"s","cwd":"` + dir + `","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"make"},"tool_use_id":"t"}`
	hook := func() (string, int) {
		cmd := exec.Command("sh", "-c", command)
		cmd.Dir = dir
		cmd.Env = append(env, "CLAUDE_PROJECT_DIR="+dir)
		cmd.Stdin = strings.NewReader(event)
		return outputAndCode(cmd)
	}
	if out, code := hook(); code != 0 || !strings.Contains(out, `"allow"`) {
		t.Fatalf("the hook as written: exit %d %s, want allow", code, out)
	}
	os.Rename(bin, bin+".moved")
	if out, code := hook(); code != 2 {
		t.Fatalf("undolog moved away: exit %d %s, want 2 (blocks the call)", code, out)
	}
	os.WriteFile(bin, []byte("#!/bin/sh\nkill -9 $$\n"), 0o755)
	if out, code := hook(); code != 2 {
		t.Fatalf("undolog killed by a signal: exit %d %s, want 2 (blocks the call)", code, out)
	}
}

// init refuses, changing nothing (no policy file either), settings with a
// key twice, read-only settings, and settings that are no JSON (JSONC);
// settings that are a link are written through the link.
func TestInitClaudeCodeRefusesWhatItCannotUpdate(t *testing.T) {
	bin := testbin.Undolog(t)
	for name, c := range map[string]struct {
		settings string
		mode     os.FileMode
		want     string
	}{
		"duplicate hooks": {`{"hooks":{"Stop":[]},"model":"x","hooks":{"PreToolUse":[]}}`, 0o644, `"hooks" twice`},
		"read-only":       {`{"model":"x"}`, 0o444, "read-only"},
		"jsonc":           {"{\n  // mine\n  \"model\": \"x\"\n}", 0o644, "comments, JSONC"},
		"sandbox off":     {`{"sandbox":{"enabled":false}}`, 0o644, "sandbox.enabled is false"},
		"unsandboxed ok":  {`{"sandbox":{"allowUnsandboxedCommands":true}}`, 0o644, "sandbox.allowUnsandboxedCommands is true"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			settings := filepath.Join(dir, ".claude", "settings.json")
			os.MkdirAll(filepath.Dir(settings), 0o755)
			os.WriteFile(settings, []byte(c.settings), c.mode)
			out, code := initRun(bin, dir)
			if code != ExitUsage || !strings.Contains(out, c.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
				t.Fatalf("init: exit %d %q, want %d and one line saying %q", code, out, ExitUsage, c.want)
			}
			if b, _ := os.ReadFile(settings); string(b) != c.settings {
				t.Fatalf("the settings were changed:\n%s", b)
			}
			if _, err := os.Stat(filepath.Join(dir, ".claude", "undolog-policy.yaml")); err == nil {
				t.Fatal("a refused init wrote the policy file")
			}
		})
	}
	t.Run("symlink", func(t *testing.T) {
		dir := t.TempDir()
		shared := filepath.Join(t.TempDir(), "shared-settings.json")
		os.WriteFile(shared, []byte(`{"model":"x"}`), 0o644)
		link := filepath.Join(dir, ".claude", "settings.json")
		os.MkdirAll(filepath.Dir(link), 0o755)
		if err := os.Symlink(shared, link); err != nil {
			t.Fatal(err)
		}
		if out, code := initRun(bin, dir); code != 0 {
			t.Fatalf("init: %d %s", code, out)
		}
		if info, err := os.Lstat(link); err != nil || info.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("the settings link was replaced: %v %v", info, err)
		}
		if b, _ := os.ReadFile(shared); !strings.Contains(string(b), " hook --policy") || !strings.Contains(string(b), `"model": "x"`) {
			t.Fatalf("the link's target was not updated:\n%s", b)
		}
	})
}

// init turns Claude Code's sandbox on for the agent's Bash, with writes
// denied to the project's .claude, the log's directory and the snapshot
// store, and Write/Edit denied there; the user's own sandbox and
// permission keys are kept, and a second run changes nothing. A log inside
// the project, or in a directory that holds it, is refused. --no-sandbox
// writes no sandbox, tells the hook, and warns of what it leaves open.
func TestInitClaudeCodeSandbox(t *testing.T) {
	bin := testbin.Undolog(t)
	dir := t.TempDir()
	logDir, store := t.TempDir(), t.TempDir()
	settings := filepath.Join(dir, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	mine := `{"sandbox":{"network":{"allowedDomains":["example.com"]},"filesystem":{"allowWrite":["/srv/cache"]}},"permissions":{"deny":["Read(./.env)"]}}`
	os.WriteFile(settings, []byte(mine), 0o644)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, append([]string{"--log", filepath.Join(logDir, "u.db"), "init", "claude-code"}, args...)...)
		cmd.Env = append(os.Environ(), "UNDOLOG_FILES_DIR="+store)
		return outputAndCode(cmd)
	}
	if out, code := run(dir); code != 0 || !strings.Contains(out, "sandboxed the agent's Bash") {
		t.Fatalf("init: %d %s", code, out)
	}
	first, _ := os.ReadFile(settings)
	var s struct {
		Sandbox struct {
			Enabled, FailIfUnavailable, AllowUnsandboxedCommands *bool
			Network                                              struct{ AllowedDomains []string }
			Filesystem                                           struct{ AllowWrite, DenyWrite []string }
		}
		Permissions struct{ Deny []string }
	}
	if err := json.Unmarshal(first, &s); err != nil {
		t.Fatalf("settings: %v\n%s", err, first)
	}
	sb := s.Sandbox
	if sb.Enabled == nil || !*sb.Enabled || sb.FailIfUnavailable == nil || !*sb.FailIfUnavailable || sb.AllowUnsandboxedCommands == nil || *sb.AllowUnsandboxedCommands {
		t.Fatalf("sandbox not on, failing if unavailable, with no way out:\n%s", first)
	}
	if len(sb.Network.AllowedDomains) != 1 || len(sb.Filesystem.AllowWrite) != 1 || s.Permissions.Deny[0] != "Read(./.env)" {
		t.Fatalf("the user's sandbox and permission keys were not kept:\n%s", first)
	}
	real := func(p string) string { r, _ := filepath.EvalSymlinks(p); return r }
	for _, p := range []string{filepath.Join(real(dir), ".claude"), real(logDir), real(store)} {
		if !slices.Contains(sb.Filesystem.DenyWrite, p) {
			t.Errorf("sandbox.filesystem.denyWrite %q lacks %s", sb.Filesystem.DenyWrite, p)
		}
		if !slices.Contains(s.Permissions.Deny, "Edit(/"+p+"/**)") {
			t.Errorf("permissions.deny %q lacks Edit of %s", s.Permissions.Deny, p)
		}
	}
	if !slices.Contains(s.Permissions.Deny, "Edit(//**/.claude/**)") {
		t.Errorf("permissions.deny %q lacks Edit of every .claude", s.Permissions.Deny)
	}
	if out, code := run(dir); code != 0 || !strings.Contains(out, "already") {
		t.Fatalf("second init: %d %s, want nothing to do", code, out)
	}
	if again, _ := os.ReadFile(settings); !bytes.Equal(again, first) {
		t.Fatalf("a second init changed the settings:\n%s", again)
	}

	for name, log := range map[string]string{"inside": filepath.Join(dir, "logs", "u.db"), "holding": filepath.Join(filepath.Dir(dir), "u.db")} {
		cmd := exec.Command(bin, "--log", log, "init", "claude-code", dir)
		cmd.Env = append(os.Environ(), "UNDOLOG_FILES_DIR="+store)
		out, code := outputAndCode(cmd)
		if code != ExitUsage || !strings.Contains(out, "the log's directory") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Fatalf("a log %s the project: exit %d %q, want %d and one line", name, code, out, ExitUsage)
		}
	}
	if b, _ := os.ReadFile(settings); !bytes.Equal(b, first) {
		t.Fatalf("a refused init changed the settings:\n%s", b)
	}

	// A policy elsewhere is denied as a file; one in the project outside
	// .claude is refused (the agent could move its directory away).
	policy := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(policy, []byte("tools:\n  Read: {tier: safe}\n"), 0o644)
	if out, code := run("--policy", policy, dir); code != 0 {
		t.Fatalf("init --policy: %d %s", code, out)
	}
	if b, _ := os.ReadFile(settings); !strings.Contains(string(b), `"`+real(policy)+`"`) || !strings.Contains(string(b), `"Edit(/`+real(policy)+`)"`) {
		t.Fatalf("init --policy %s: the policy file is not denied:\n%s", policy, b)
	}
	first, _ = os.ReadFile(settings)
	inProject := filepath.Join(dir, "policies", "p.yaml")
	os.MkdirAll(filepath.Dir(inProject), 0o755)
	os.WriteFile(inProject, []byte("tools:\n  Read: {tier: safe}\n"), 0o644)
	if out, code := run("--policy", inProject, dir); code != ExitUsage || !strings.Contains(out, "inside the project") {
		t.Fatalf("init --policy in the project: %d %s, want %d", code, out, ExitUsage)
	}
	if b, _ := os.ReadFile(settings); !bytes.Equal(b, first) {
		t.Fatalf("a refused init changed the settings:\n%s", b)
	}

	bare := t.TempDir()
	out, code := run("--no-sandbox", bare)
	if code != 0 || !strings.Contains(out, "warning: --no-sandbox") || !strings.Contains(out, "approving its own calls") {
		t.Fatalf("init --no-sandbox: %d %s, want a warning of what it leaves open", code, out)
	}
	b, _ := os.ReadFile(filepath.Join(bare, ".claude", "settings.json"))
	if strings.Contains(string(b), `"sandbox"`) || !strings.Contains(string(b), "Edit(//**/.claude/**)") ||
		!strings.Contains(preHookCommand(t, filepath.Join(bare, ".claude", "settings.json")), " --no-sandbox") {
		t.Fatalf("init --no-sandbox wrote:\n%s\nwant no sandbox, the Edit rules, and the hook told", b)
	}
}

// envWithout is env without the variables named.
func envWithout(env []string, names ...string) []string {
	var kept []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			kept = append(kept, kv)
		}
	}
	return kept
}

// A log file given to init is the one the hook it registers uses, though
// Claude Code's environment names none: run as Claude Code runs it, the
// hook records a compensable shell command in that log and lets it run
// (the settings deny that log's directory), where the default log would
// have it held. A hook run with another log holds it, saying to run init
// with that log. A postgres:// URL is never written in the settings.
func TestInitClaudeCodeHookUsesInitsLog(t *testing.T) {
	bin := testbin.Undolog(t)
	project, files, state := t.TempDir(), t.TempDir(), t.TempDir()
	log := filepath.Join(t.TempDir(), "u.db")
	env := append(envWithout(os.Environ(), "UNDOLOG_LOG", "UNDOLOG_SESSION", "UNDOLOG_HOOK_HEADLESS"),
		"UNDOLOG_FILES_DIR="+files, "XDG_STATE_HOME="+state, "CLAUDE_PROJECT_DIR="+project)
	init := exec.Command(bin, "init", "claude-code", "--wait", "0s", project)
	init.Env = append(env, "UNDOLOG_LOG="+log)
	if out, code := outputAndCode(init); code != 0 {
		t.Fatalf("UNDOLOG_LOG=%s init: %d %s", log, code, out)
	}
	command := preHookCommand(t, filepath.Join(project, ".claude", "settings.json"))
	if !strings.Contains(command, " hook --log "+log+" ") {
		t.Fatalf("the hook command %q does not name the log init was run with", command)
	}
	pre := func(env []string, command string) string {
		t.Helper()
		ev := `{"session_id":"s1","cwd":"` + project + `","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"make build"},"tool_use_id":"t1"}`
		sh := exec.Command("sh", "-c", command)
		sh.Dir, sh.Env, sh.Stdin = project, env, strings.NewReader(ev)
		out, err := sh.Output()
		if err != nil {
			t.Fatalf("%s: %v %s", command, err, out)
		}
		return string(out)
	}
	if out := pre(env, command); !strings.Contains(out, `"permissionDecision":"allow"`) {
		t.Fatalf("make build through init's hook, no UNDOLOG_LOG in the agent's environment: %s, want allow", out)
	}
	list, _ := outputAndCode(exec.Command(bin, "--log", log, "list", "--session", "s1", "-o", "json"))
	var effects []hookEffect
	if json.Unmarshal([]byte(list), &effects) != nil || len(effects) != 1 || effects[0].Tier != "compensable" {
		t.Fatalf("the call is not in init's log as compensable: %s", list)
	}

	other := filepath.Join(t.TempDir(), "other.db")
	if out := pre(append(env, "UNDOLOG_LOG="+other), strings.Replace(command, " --log "+log, "", 1)); !strings.Contains(out, `"permissionDecision":"deny"`) {
		t.Fatalf("make build through a hook whose log the settings do not deny: %s, want it held", out)
	}
	show, _ := outputAndCode(exec.Command(bin, "--log", other, "show", "1"))
	if !strings.Contains(show, "run `undolog init claude-code --log "+other+"`") || strings.Contains(show, "turns it on") {
		t.Fatalf("show 1 of the held call does not say to run init with the hook's log:\n%s", show)
	}

	pgProject := t.TempDir()
	pg := exec.Command(bin, "init", "claude-code", pgProject)
	pg.Env = append(env, "UNDOLOG_LOG=postgres://agent:s3cret@127.0.0.1:1/undolog")
	if out, code := outputAndCode(pg); code != 0 {
		t.Fatalf("init with a postgres log: %d %s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(pgProject, ".claude", "settings.json")); bytes.Contains(b, []byte("s3cret")) || bytes.Contains(b, []byte("--log")) {
		t.Fatalf("init wrote the log's URL in the settings:\n%s", b)
	}
}

// A log directory every user shares (world-writable and sticky, as /tmp):
// denying it would deny Claude Code's sandbox its own temp dir below it, so
// init refuses it with one line, writing nothing.
func TestInitClaudeCodeRefusesASharedLogDirectory(t *testing.T) {
	bin := testbin.Undolog(t)
	project, shared := t.TempDir(), t.TempDir()
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--log", filepath.Join(shared, "u.db"), "init", "claude-code", project)
	cmd.Env = append(os.Environ(), "UNDOLOG_FILES_DIR="+t.TempDir())
	out, code := outputAndCode(cmd)
	if code != ExitUsage || !strings.Contains(out, "directory of its own") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Fatalf("init with a log in a shared sticky directory: exit %d %q, want %d and one line", code, out, ExitUsage)
	}
	if _, err := os.Stat(filepath.Join(project, ".claude")); err == nil {
		t.Fatalf("a refused init wrote %s", filepath.Join(project, ".claude"))
	}
}

// Settings that turn the sandbox off are refused in settings.local.json
// too (its keys win over settings.json's), before anything is written.
func TestInitClaudeCodeRefusesLocalSettingsWithoutSandbox(t *testing.T) {
	bin := testbin.Undolog(t)
	logDir, store := t.TempDir(), t.TempDir()
	for _, local := range []string{`{"sandbox":{"enabled":false}}`, `{"sandbox":{"allowUnsandboxedCommands":true}}`, `{"sandbox":{"failIfUnavailable":false}}`} {
		project := t.TempDir()
		claude := filepath.Join(project, ".claude")
		os.MkdirAll(claude, 0o755)
		os.WriteFile(filepath.Join(claude, "settings.local.json"), []byte(local), 0o644)
		cmd := exec.Command(bin, "--log", filepath.Join(logDir, "u.db"), "init", "claude-code", project)
		cmd.Env = append(os.Environ(), "UNDOLOG_FILES_DIR="+store)
		out, code := outputAndCode(cmd)
		if code != ExitUsage || !strings.Contains(out, "settings.local.json") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Fatalf("init with settings.local.json %s: exit %d %q, want %d and one line", local, code, out, ExitUsage)
		}
		if entries, _ := os.ReadDir(claude); len(entries) != 1 {
			t.Fatalf("a refused init wrote in %s: %v", claude, entries)
		}
		cmd = exec.Command(bin, "--log", filepath.Join(logDir, "u.db"), "init", "claude-code", "--no-sandbox", project)
		cmd.Env = append(os.Environ(), "UNDOLOG_FILES_DIR="+store)
		if out, code := outputAndCode(cmd); code != 0 {
			t.Fatalf("init --no-sandbox with settings.local.json %s: exit %d %q, want 0", local, code, out)
		}
	}
}

// On Linux, init warns on stderr when the sandbox's programs (bwrap,
// socat) are not on the PATH, unless --no-sandbox.
func TestInitClaudeCodeWarnsOfMissingSandboxPrograms(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox needs bubblewrap and socat on Linux alone")
	}
	bin := testbin.Undolog(t)
	logDir, store := t.TempDir(), t.TempDir()
	run := func(path string, args ...string) (string, string) {
		cmd := exec.Command(bin, append([]string{"--log", filepath.Join(logDir, "u.db"), "init", "claude-code"}, append(args, t.TempDir())...)...)
		cmd.Env = append(envWithout(os.Environ(), "PATH"), "PATH="+path, "UNDOLOG_FILES_DIR="+store)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("init %s with PATH=%s: %v %s %s", args, path, err, &out, &errOut)
		}
		return out.String(), errOut.String()
	}
	_, stderr := run(t.TempDir())
	if !strings.Contains(stderr, "bwrap and socat not on the PATH") || !strings.Contains(stderr, "apt install bubblewrap socat") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Fatalf("init with neither bwrap nor socat on the PATH: stderr %q, want a one-line warning", stderr)
	}
	if _, stderr := run(t.TempDir(), "--no-sandbox"); strings.Contains(stderr, "bwrap") {
		t.Fatalf("init --no-sandbox warned of the sandbox's programs: %q", stderr)
	}
	bwrap, errB := exec.LookPath("bwrap")
	socat, errS := exec.LookPath("socat")
	if errB != nil || errS != nil {
		return
	}
	both := t.TempDir()
	os.Symlink(bwrap, filepath.Join(both, "bwrap"))
	os.Symlink(socat, filepath.Join(both, "socat"))
	if _, stderr := run(both); strings.Contains(stderr, "warning") {
		t.Fatalf("init with bwrap and socat on the PATH warned: %q", stderr)
	}
}

// sandbox.excludedCommands runs its commands outside Claude Code's
// sandbox whatever allowUnsandboxedCommands says (ADV31C K1): init refuses
// it in the project's settings, changing nothing, and warns of it in the
// user's; an empty list, and --no-sandbox, are no matter.
func TestInitClaudeCodeRefusesExcludedCommands(t *testing.T) {
	bin := testbin.Undolog(t)
	run := func(dir, config string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, append([]string{"--log", filepath.Join(t.TempDir(), "u.db"), "init", "claude-code"}, args...)...)
		cmd.Env = append(os.Environ(), "UNDOLOG_FILES_DIR="+t.TempDir(), "CLAUDE_CONFIG_DIR="+config)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		code := exitCodeOf(cmd.Run())
		return out.String(), errOut.String(), code
	}
	for _, name := range []string{"settings.json", "settings.local.json"} {
		dir := t.TempDir()
		settings := filepath.Join(dir, ".claude", name)
		os.MkdirAll(filepath.Dir(settings), 0o755)
		excluded := `{"sandbox":{"excludedCommands":["make"]}}`
		os.WriteFile(settings, []byte(excluded), 0o644)
		out, errOut, code := run(dir, t.TempDir(), dir)
		if code != ExitUsage || !strings.Contains(errOut, settings) || !strings.Contains(errOut, "sandbox.excludedCommands") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Fatalf("%s with excludedCommands: exit %d %q %q, want %d and one line naming the file and the key", name, code, out, errOut, ExitUsage)
		}
		if b, _ := os.ReadFile(settings); string(b) != excluded {
			t.Fatalf("a refused init changed %s:\n%s", name, b)
		}
		if _, err := os.Stat(filepath.Join(dir, ".claude", "undolog-policy.yaml")); err == nil {
			t.Fatal("a refused init wrote the policy file")
		}
		if out, errOut, code := run(dir, t.TempDir(), "--no-sandbox", dir); code != 0 {
			t.Fatalf("%s with excludedCommands, --no-sandbox: exit %d %q %q, want 0", name, code, out, errOut)
		}
	}
	dir, config := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".claude"), 0o755)
	os.WriteFile(filepath.Join(dir, ".claude", "settings.local.json"), []byte(`{"sandbox":{"excludedCommands":[]}}`), 0o644)
	if out, errOut, code := run(dir, config, dir); code != 0 || errOut != "" {
		t.Fatalf("an empty excludedCommands: exit %d %q %q, want 0 and no warning", code, out, errOut)
	}
	user := filepath.Join(config, "settings.json")
	os.WriteFile(user, []byte(`{"sandbox":{"excludedCommands":["docker"]}}`), 0o644)
	if out, errOut, code := run(dir, config, dir); code != 0 || !strings.Contains(errOut, "warning") || !strings.Contains(errOut, user) || !strings.Contains(errOut, "excludedCommands") {
		t.Fatalf("the user's settings with excludedCommands: exit %d %q %q, want 0 and a warning naming the file", code, out, errOut)
	}
}
