package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/internal/testbin"
)

// jobStep is one `run:` of the GitHub Actions job of docs/postgres.md.
type jobStep struct {
	script    string
	onFailure bool // if: failure()
}

// readmeJob reads the GitHub Actions job of docs/postgres.md: its env and its run
// steps, in order (uses: and the install of undolog are the runner's).
func readmeJob(t *testing.T) (map[string]string, []jobStep) {
	t.Helper()
	block := docBlock(t, "docs/postgres.md", "## A GitHub Actions job approved from a laptop", "yaml")
	env := map[string]string{}
	var steps []jobStep
	lines := strings.Split(block, "\n")
	inEnv, failure := false, false
	for k := 0; k < len(lines); k++ {
		line := lines[k]
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "env:":
			inEnv = true
		case trimmed == "steps:":
			inEnv = false
		case inEnv && trimmed != "":
			name, value, _ := strings.Cut(trimmed, ": ")
			value, _, _ = strings.Cut(value, " #")
			env[name] = strings.TrimSpace(value)
		case strings.HasPrefix(trimmed, "- if: failure()"):
			failure = true
		case strings.HasPrefix(trimmed, "- run: |"), failure && strings.HasPrefix(trimmed, "run: |"):
			var body []string
			for k+1 < len(lines) && strings.HasPrefix(lines[k+1], "          ") {
				k++
				body = append(body, strings.TrimSpace(lines[k]))
			}
			steps = append(steps, jobStep{strings.Join(body, "\n"), failure})
			failure = false
		case strings.HasPrefix(trimmed, "- run: "), failure && strings.HasPrefix(trimmed, "run: "):
			_, script, _ := strings.Cut(trimmed, "run: ")
			if strings.Contains(script, "go install") {
				continue
			}
			steps = append(steps, jobStep{script, failure})
			failure = false
		}
	}
	if len(steps) < 4 || env["UNDOLOG_SESSION"] == "" {
		t.Fatalf("the documented job read as env %v, steps %+v", env, steps)
	}
	return env, steps
}

var ghaExpr = regexp.MustCompile(`\$\{\{\s*([a-z_.A-Z]+)\s*\}\}`)

// The documented GitHub Actions job does what the docs say: a rejected
// publish halts the session and, once a person resumes it, a re-run asks
// again; a re-run after publish ran replays it rather than publish twice;
// migrate runs once across re-runs. The job's own steps run as GitHub runs
// them (bash -e -o pipefail), on a log file.
func TestDocsActionsJob(t *testing.T) {
	if testing.Short() {
		t.Skip("builds undolog")
	}
	env, steps := readmeJob(t)
	bin := testbin.Undolog(t)
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("Makefile", "build:\n\techo build >> journal\n")
	write("migrate", "#!/bin/sh\necho \"migrate $1\" >> journal\n")
	write("publish.sh", "#!/bin/sh\necho published >> journal\n")
	log := filepath.Join(dir, "state", "undolog.db")
	base := append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "UNDOLOG_LOG="+log, "PGPASSWORD=", "HOME="+dir)
	undolog := func(args ...string) string {
		t.Helper()
		return runUndolog(t, bin, append(base, "UNDOLOG_ACTOR=alice"), dir, args...)
	}
	journal := func() string {
		data, _ := os.ReadFile(filepath.Join(dir, "journal"))
		return string(data)
	}
	// job runs the job's steps (the first `upTo` only, if not 0) as attempt
	// `attempt` of run `run`, while decide answers each publish that waits;
	// it returns whether the job failed.
	job := func(run, attempt string, upTo int, decide func(id string)) bool {
		t.Helper()
		vars := map[string]string{"github.run_id": run, "github.run_attempt": attempt}
		expand := func(s string) string {
			return ghaExpr.ReplaceAllStringFunc(s, func(m string) string { return vars[ghaExpr.FindStringSubmatch(m)[1]] })
		}
		stepEnv := append([]string(nil), base...)
		for name, value := range env {
			if name != "UNDOLOG_LOG" && name != "PGPASSWORD" {
				stepEnv = append(stepEnv, name+"="+expand(value))
			}
		}
		session := expand(env["UNDOLOG_SESSION"])
		ctx, stop := context.WithCancel(context.Background())
		approver := make(chan struct{})
		defer func() { stop(); <-approver }()
		go func() { // the approver, on the laptop
			defer close(approver)
			asked := map[string]bool{}
			for ctx.Err() == nil {
				cmd := exec.Command(bin, "list", "--session", session, "--tool", "publish", "--state", "pending", "-o", "ids")
				cmd.Env = base
				out, _ := cmd.Output()
				for _, id := range strings.Fields(string(out)) {
					if !asked[id] {
						asked[id] = true
						decide(id)
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		failed := false
		for n, s := range steps {
			if s.onFailure != failed || upTo > 0 && n >= upTo {
				continue
			}
			cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", expand(s.script))
			cmd.Env, cmd.Dir = stepEnv, dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Logf("run %s attempt %s: step %q failed: %v\n%s", run, attempt, s.script, err, out)
				failed = true
			}
		}
		return failed
	}
	reject := func(id string) { undolog("reject", id, "--reason", "release notes missing") }
	never := func(id string) {
		t.Errorf("publish asked again (effect %s) where it ran already", id)
		reject(id)
	}
	approve := func(id string) { undolog("approve", id, "--reason", "release notes checked") }

	// Rejected: the job fails and its session is halted.
	if !job("7", "1", 0, reject) {
		t.Fatal("a job whose publish was rejected did not fail")
	}
	if got := journal(); got != "build\nmigrate up\n" {
		t.Fatalf("after the rejection the journal is %q", got)
	}
	if !strings.Contains(undolog("session", "show", "release-7"), "halted") {
		t.Fatalf("the rejection did not halt the session:\n%s", undolog("session", "show", "release-7"))
	}
	// Resumed by a person, re-run: publish is asked again and runs.
	undolog("session", "resume", "release-7", "--reason", "notes added")
	if job("7", "2", 0, approve) {
		t.Fatal("the re-run after the resume failed")
	}
	if got := journal(); got != "build\nmigrate up\nbuild\npublished\n" {
		t.Fatalf("after the re-run the journal is %q (migrate once, publish once)", got)
	}

	// Publish ran, then the runner died before the session was completed:
	// the re-run replays publish, asks nobody, and completes.
	os.Remove(filepath.Join(dir, "journal"))
	publish := -1
	for n, s := range steps {
		if strings.Contains(s.script, "publish") {
			publish = n
		}
	}
	job("8", "1", publish+1, approve)
	if job("8", "2", 0, never) {
		t.Fatal("the re-run after publish ran failed")
	}
	if got := journal(); got != "build\nmigrate up\npublished\nbuild\n" {
		t.Fatalf("the re-run after publish ran: journal %q (publish once)", got)
	}
	if !strings.Contains(undolog("session", "show", "release-8"), "completed") {
		t.Fatal("the re-run did not complete the session")
	}
	undolog("verify")
}
