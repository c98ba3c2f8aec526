package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, append([]string{"init", "claude-code"}, args...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
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
	if h := pre[1].Hooks[0]; !strings.HasPrefix(h.Command, "undolog hook --policy") || !strings.Contains(h.Command, "--wait 2m") || h.Timeout <= 120+20 {
		t.Fatalf("undolog's PreToolUse hook: %+v, want a timeout past its 2m wait and the hook's margin", h)
	}
	for _, ev := range []string{"PostToolUse", "PostToolUseFailure"} {
		if g := s.Hooks[ev]; len(g) != 1 || !strings.HasPrefix(g[0].Hooks[0].Command, "undolog hook") {
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
