package cmd

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readFile is path's content, or "<absent>".
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The hook captures what its calls change: a Write's file, an Edit's, a
// shell command's project (a file created, one changed, one deleted, and
// a failed command that changed a file, which is committed with its error
// so that undo restores it). `undolog undo` puts every byte back.
func TestHookUndoesTheFilesOfItsCalls(t *testing.T) {
	hookEngines(t, func(t *testing.T, r *hookRig) {
		keep, gone, notes := filepath.Join(r.project, "keep.txt"), filepath.Join(r.project, "gone.txt"), filepath.Join(r.project, "notes.md")
		writeFile(t, keep, "kept\n", 0o640)
		writeFile(t, gone, "deleted by the shell\n", 0o600)
		call := func(tool string, input map[string]any, run func()) {
			t.Helper()
			if d, why := r.pre(tool, input); d != "allow" {
				t.Fatalf("%s: %s %q, want allow", tool, d, why)
			}
			run()
			r.post("PostToolUse", tool, input, map[string]any{"tool_response": map[string]any{"ok": true}})
		}
		call("Write", map[string]any{"file_path": notes, "content": "v1\n"}, func() { writeFile(t, notes, "v1\n", 0o644) })
		call("Bash", map[string]any{"command": "echo more >> keep.txt && rm gone.txt && touch made.txt"}, func() {
			writeFile(t, keep, "kept\nmore\n", 0o640)
			os.Remove(gone)
			writeFile(t, filepath.Join(r.project, "made.txt"), "", 0o644)
		})
		call("Edit", map[string]any{"file_path": notes, "old_string": "v1", "new_string": "v2", "replace_all": false}, func() { writeFile(t, notes, "v2\n", 0o644) })
		failing := map[string]any{"command": "echo half > half.txt && false"}
		if d, why := r.pre("Bash", failing); d != "allow" {
			t.Fatalf("failing Bash: %s %q", d, why)
		}
		writeFile(t, filepath.Join(r.project, "half.txt"), "half\n", 0o644)
		r.post("PostToolUseFailure", "Bash", failing, map[string]any{"error": "Exit code 1", "is_interrupt": false})
		e := r.effects()
		if len(e) != 4 || e[0].State != "committed" || !strings.Contains(string(e[0].Result), "Exit code 1") {
			t.Fatalf("effects %+v: want 4, the failed command that changed a file committed with its error", e)
		}
		dry := r.undolog("undo", r.session, "--dry-run")
		for _, want := range []string{"half.txt", "made.txt", "gone.txt", "keep.txt", "notes.md"} {
			if !strings.Contains(dry, want) {
				t.Fatalf("undo --dry-run does not list %s:\n%s", want, dry)
			}
		}
		r.undolog("undo", r.session, "--yes")
		for path, want := range map[string]string{keep: "kept\n", gone: "deleted by the shell\n", notes: "<absent>",
			filepath.Join(r.project, "made.txt"): "<absent>", filepath.Join(r.project, "half.txt"): "<absent>"} {
			if got := readFile(t, path); got != want {
				t.Errorf("%s after undo: %q, want %q", filepath.Base(path), got, want)
			}
		}
		if info, err := os.Stat(gone); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("gone.txt's mode after undo: %v %v, want 0600", info, err)
		}
		// The undone session takes no new call; the person is told how to go
		// on in another: the hook has no --session.
		if d, _ := r.pre("Bash", map[string]any{"command": "touch again.txt"}); d != "deny" ||
			!strings.Contains(r.message, "UNDOLOG_SESSION") || strings.Contains(r.message, "--session") {
			t.Fatalf("a call in the undone session: %s, systemMessage %q, want deny naming UNDOLOG_SESSION alone", d, r.message)
		}
	})
}

// A shell command's window (PreToolUse to PostToolUse) overlaps no other
// call's of the project: a second shell command, or a Write, is denied
// while one runs, and runs once it has ended.
func TestHookSerialisesShellCommandsOfAProject(t *testing.T) {
	r := newHookRig(t, filepath.Join(t.TempDir(), "u.db"))
	first := map[string]any{"command": "sleep 1; touch a"}
	second := map[string]any{"command": "touch b"}
	write := map[string]any{"file_path": filepath.Join(r.project, "c.txt"), "content": "c"}
	if d, why := r.pre("Bash", first); d != "allow" {
		t.Fatalf("first: %s %q", d, why)
	}
	for _, c := range []struct {
		tool  string
		input map[string]any
	}{{"Bash", second}, {"Write", write}} {
		busy := regexp.MustCompile(`^undolog: another call changing this project's files is running \(a shell command of agent pid \d+\): ` + c.tool + ` did not run; make this call again once that one has ended$`)
		if d, why := r.pre(c.tool, c.input); d != "deny" || !busy.MatchString(why) {
			t.Fatalf("%s while a shell command runs: %s %q, want deny", c.tool, d, why)
		}
	}
	r.post("PostToolUse", "Bash", first, map[string]any{"tool_response": "ok"})
	if d, why := r.pre("Bash", second); d != "allow" {
		t.Fatalf("second, once the first ended: %s %q", d, why)
	}
	r.post("PostToolUse", "Bash", second, map[string]any{"tool_response": "ok"})
	// Two file edits may overlap: each knows its files.
	if d, why := r.pre("Write", write); d != "allow" {
		t.Fatalf("write: %s %q", d, why)
	}
	other := map[string]any{"file_path": filepath.Join(r.project, "d.txt"), "content": "d"}
	if d, why := r.pre("Write", other); d != "allow" {
		t.Fatalf("a second write beside the first: %s %q", d, why)
	}
}

// A shell command whose PostToolUse never came (the log was busy, say)
// holds the project while its agent lives only as long as the log holds
// its call executing: once a person ends it (undolog fail), the agent's
// next shell command runs.
func TestHookLostPostToolUseReleasesTheProject(t *testing.T) {
	hookEngines(t, func(t *testing.T, r *hookRig) {
		first := map[string]any{"command": "touch a"}
		second := map[string]any{"command": "touch b"}
		if d, why := r.pre("Bash", first); d != "allow" {
			t.Fatalf("first: %s %q", d, why)
		}
		if d, why := r.pre("Bash", second); d != "deny" || !strings.Contains(why, "another call changing this project's files is running") {
			t.Fatalf("second while the first is executing: %s %q, want deny", d, why)
		}
		r.undolog("fail", "1", "--error", "its PostToolUse was lost")
		if d, why := r.pre("Bash", second); d != "allow" {
			t.Fatalf("second once the first was failed by a person: %s %q, want allow", d, why)
		}
		r.post("PostToolUse", "Bash", second, map[string]any{"tool_response": "ok"})
		if e := r.effects(); len(e) != 2 || e[0].State != "committed" || e[1].State != "pending" {
			t.Fatalf("effects %+v, want the second committed, the first failed back to pending", e)
		}
	})
}

// A shell command whose agent died between its hooks never had its
// after-state recorded: the next shell command of the project runs (the
// dead one's window is over), and undo does not restore files the dead
// call cannot know it changed: it stops there for a person (exit 9),
// changing nothing, until `undolog resolve`.
func TestHookShellCommandWhoseAgentDiedStopsUndo(t *testing.T) {
	r := newHookRig(t, filepath.Join(t.TempDir(), "u.db"))
	bash := map[string]any{"command": "echo x > x.txt"}
	os.WriteFile(filepath.Join(r.project, "pre.json"), r.event("PreToolUse", "Bash", bash, nil), 0o644)
	cmd := exec.Command("timeout", "60", "sh", "-c", `"$UNDOLOG_BIN" hook < pre.json && echo x > x.txt`)
	cmd.Dir = r.project
	cmd.Env = append(os.Environ(), "UNDOLOG_LOG="+r.log, "UNDOLOG_FILES_DIR="+r.files, "UNDOLOG_BIN="+r.bin, "UNDOLOG_SESSION=", "CLAUDE_PROJECT_DIR="+r.project)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), `"allow"`) {
		t.Fatalf("agent: %v\n%s", err, out)
	}
	next := map[string]any{"command": "echo y > y.txt"}
	if d, why := r.pre("Bash", next); d != "allow" {
		t.Fatalf("the next shell command once the agent is gone: %s %q", d, why)
	}
	os.WriteFile(filepath.Join(r.project, "y.txt"), []byte("y\n"), 0o644)
	r.post("PostToolUse", "Bash", next, map[string]any{"tool_response": "ok"})

	out, err := exec.Command(r.bin, "--log", r.log, "undo", r.session, "--yes").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitCompensation {
		t.Fatalf("undo: %v, want exit %d\n%s", err, ExitCompensation, out)
	}
	if !strings.Contains(string(out), "restore by hand") {
		t.Fatalf("undo's output does not say why:\n%s", out)
	}
	// The restore's refusal (exit 12) is for good: it is not tried again.
	if strings.Contains(string(out), "retrying") || !strings.Contains(string(out), "after 1 attempt") {
		t.Fatalf("undo tried a refused restore again, want one attempt:\n%s", out)
	}
	if got := readFile(t, filepath.Join(r.project, "x.txt")); got != "x\n" {
		t.Fatalf("x.txt after the stopped undo: %q, want the dead call's file left as it is", got)
	}
	if got := readFile(t, filepath.Join(r.project, "y.txt")); got != "<absent>" {
		t.Fatalf("y.txt: %q, want the later call undone", got)
	}
}
