package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
)

// docSection is file from heading on.
func docSection(t *testing.T, file, heading string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), heading)
	if i < 0 {
		t.Fatalf("%s has no %q", file, heading)
	}
	return string(data)[i:]
}

// docBlock is the first code block in lang after heading in file.
func docBlock(t *testing.T, file, heading, lang string) string {
	t.Helper()
	s := docSection(t, file, heading)
	start := strings.Index(s, "```"+lang+"\n")
	if start < 0 {
		t.Fatalf("%s: no %s block after %q", file, lang, heading)
	}
	block := s[start+len("```"+lang+"\n"):]
	return block[:strings.Index(block, "```")]
}

func readmeBlock(t *testing.T, heading string) string { return docBlock(t, "README.md", heading, "sh") }

// runUndolog runs bin with args in dir and env, and fails t unless it exits 0.
func runUndolog(t *testing.T, bin string, env []string, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = env, dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("undolog %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestReadmeCIRecipe runs the README's first recipe as a CI job would: a
// first run that waits at the release as the effect the README names, for
// the decision its second block gives; the rollback it names, last in first
// out; then another build's failed attempt and its re-run, which replays
// what ran.
func TestReadmeCIRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds undolog")
	}
	const heading = "## Recipe: the risky steps of a CI job"
	job := readmeBlock(t, heading)
	recipe := docSection(t, "README.md", heading)
	bin := testbin.Undolog(t)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools")
	if err := os.Mkdir(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Each command of the job notes what it did in the trace; kubectl apply
	// fails while the file "broken" exists.
	write(filepath.Join(tools, "make"), "#!/bin/sh\necho \"make $*\" >> trace\n")
	write(filepath.Join(tools, "kubectl"), "#!/bin/sh\nif [ \"$1\" = apply ] && [ -e broken ]; then echo apply failed >&2; exit 1; fi\necho \"kubectl $*\" >> trace\n")
	write(filepath.Join(dir, "migrate"), "#!/bin/sh\necho \"migrate $1\" >> trace\n")
	write(filepath.Join(dir, "release.sh"), "#!/bin/sh\necho \"release $1\" >> trace\n")
	env := append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+tools+":"+os.Getenv("PATH"),
		"UNDOLOG_LOG="+filepath.Join(dir, "undolog.db"), "BUILD_ID=118", "HOME="+dir)
	undolog := func(args ...string) string { t.Helper(); return runUndolog(t, bin, env, dir, args...) }
	trace := func() string {
		data, _ := os.ReadFile(filepath.Join(dir, "trace"))
		return string(data)
	}
	run := func() (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command("bash", "--noprofile", "--norc", "-e", "-c", job)
		var out bytes.Buffer
		cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, dir, &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out
	}

	// waitForRelease waits until the job's release waits for approval, and
	// returns its effect id.
	waitForRelease := func(job *exec.Cmd, out *bytes.Buffer) string {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if ids := strings.Fields(undolog("approvals", "-o", "ids")); len(ids) == 1 {
				return ids[0]
			} else if time.Now().After(deadline) {
				job.Process.Kill()
				t.Fatalf("no release waits for approval:\n%s", out)
			}
		}
	}
	finish := func(job *exec.Cmd, out *bytes.Buffer, done chan error) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the job failed after the approval: %v\n%s", err, out)
			}
		case <-time.After(30 * time.Second):
			job.Process.Kill()
			t.Fatalf("the job did not end after the approval:\n%s", out)
		}
	}
	start := func() (*exec.Cmd, *bytes.Buffer, chan error) {
		job, out := run()
		done := make(chan error, 1)
		go func() { done <- job.Wait() }()
		return job, out, done
	}

	// A first run waits at the release as the recipe says, and goes on with
	// the decision its second block gives.
	job1, out, done := start()
	id := waitForRelease(job1, out)
	if m := regexp.MustCompile(`prints .undolog approve (\d+).`).FindStringSubmatch(recipe); m == nil || m[1] != id {
		t.Errorf("the README says the release prints %q; it waits as effect %s", m, id)
	}
	decision := readmeBlock(t, "The release step prints")
	for _, line := range strings.Split(strings.TrimSpace(decision), "\n") {
		line, _, _ = strings.Cut(line, "#")
		args := regexp.MustCompile(`'[^']*'|\S+`).FindAllString(strings.TrimSpace(line), -1)
		for k, a := range args {
			args[k] = strings.Trim(a, "'")
		}
		if args[0] != "undolog" {
			t.Fatalf("the decision block runs %q", line)
		}
		undolog(args[1:]...)
	}
	finish(job1, out, done)
	// (naming the log when it is not the default one, as this test's is not)
	if !regexp.MustCompile(`undolog (--log \S+ )?approve ` + id + `\b`).MatchString(out.String()) {
		t.Errorf("the release did not print undolog approve %s:\n%s", id, out)
	}
	if got, want := trace(), "make build\nmigrate up\nkubectl apply -f api.yaml\nrelease v1.2.3\n"; got != want {
		t.Fatalf("after the first run the trace is\n%s\nwant\n%s", got, want)
	}

	// The rollback the recipe names undoes the deploy, then the migration.
	m := regexp.MustCompile("`(undolog undo [^`]+)`").FindStringSubmatch(recipe)
	if m == nil {
		t.Fatal("the recipe names no undo")
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-e", "-c", m[1])
	cmd.Env, cmd.Dir = env, dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", m[1], err, out)
	}
	if got := strings.SplitAfterN(trace(), "release v1.2.3\n", 2)[1]; got != "kubectl rollout undo deploy/api\nmigrate down\n" {
		t.Fatalf("the rollback ran %q", got)
	}

	// Another build fails at the deploy; its re-run replays the migration
	// and runs the rest.
	os.Remove(filepath.Join(dir, "trace"))
	env = append(env, "BUILD_ID=119")
	write(filepath.Join(dir, "broken"), "")
	job2, out := run()
	if err := job2.Wait(); err == nil {
		t.Fatalf("the job passed with a failing deploy:\n%s", out)
	}
	if got := trace(); got != "make build\nmigrate up\n" {
		t.Fatalf("after the failed attempt the trace is %q", got)
	}
	os.Remove(filepath.Join(dir, "broken"))
	job3, out, done := start()
	undolog("approve", waitForRelease(job3, out))
	finish(job3, out, done)
	if got, want := trace(), "make build\nmigrate up\nmake build\nkubectl apply -f api.yaml\nrelease v1.2.3\n"; got != want {
		t.Fatalf("after the re-run the trace is\n%s\nwant (the migration once, the build each time)\n%s", got, want)
	}
}

// TestReadmeTeamRecipe sets a database up as the README's third recipe does
// (its owner's commands, run as they are written), then logs a call in as
// the runner's role and decides it as the approver's: the runner's role
// cannot approve its own call, and the log names the approver's role.
func TestReadmeTeamRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds undolog, starts PostgreSQL")
	}
	const heading = "## Recipe: one log for a team"
	setup := readmeBlock(t, heading)
	recipe := docSection(t, "README.md", heading)
	use := readmeBlock(t, "Runners log calls as `ci`")
	for _, want := range []string{"postgres://ci@", "postgres://alice@", "undolog approvals --follow"} {
		if !strings.Contains(use, want) {
			t.Fatalf("the recipe's second block lacks %q:\n%s", want, use)
		}
	}
	server := pgtest.Server(t)
	dropRoles := func() {
		conn, err := pgx.Connect(context.Background(), server.AdminURL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP ROLE IF EXISTS ci, alice"); err != nil {
			t.Fatal(err)
		}
	}
	dropRoles()
	t.Cleanup(dropRoles) // after the database is dropped: its grants go with it
	owner := server.NewDatabase(t)
	bin := testbin.Undolog(t)
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(pgtest.BinDir, "psql"), filepath.Join(dir, "psql")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+dir+":"+os.Getenv("PATH"), "HOME="+dir, "PGPASSWORD=", "UNDOLOG_LOG=")
	// The recipe's owner is the test database's superuser.
	script := strings.Replace(setup, "postgres://owner@db.example.com/undolog", "'"+owner+"'", 1)
	if script == setup {
		t.Fatalf("the recipe's set-up names no owner URL:\n%s", setup)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-e", "-c", script)
	cmd.Env, cmd.Dir = env, dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the recipe's set-up failed: %v\n%s", err, out)
	}
	as := func(role string) string {
		u, err := url.Parse(owner)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(role)
		return u.String()
	}
	undolog := func(role string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--log", as(role)}, args...)...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	release := exec.Command(bin, "--log", as("ci"), "exec", "--session", "team", "--tier", "irreversible", "--", "sh", "-c", "echo released > released")
	var out bytes.Buffer
	release.Env, release.Dir, release.Stdout, release.Stderr = env, dir, &out, &out
	if err := release.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- release.Wait() }()
	defer release.Process.Kill()
	var id string
	for deadline := time.Now().Add(30 * time.Second); id == ""; time.Sleep(20 * time.Millisecond) {
		ids, code := undolog("alice", "approvals", "-o", "ids")
		if code != 0 {
			t.Fatalf("alice's approvals: exit %d: %s", code, ids)
		}
		if f := strings.Fields(ids); len(f) == 1 {
			id = f[0]
		} else if time.Now().After(deadline) {
			t.Fatalf("no request waits:\n%s", out.String())
		}
	}
	if msg, code := undolog("ci", "approve", id); code != 10 {
		t.Fatalf("the runner's role approved its own call: exit %d, %s", code, msg)
	}
	if !strings.Contains(recipe, "an agent's role cannot approve its own calls") {
		t.Error("the recipe no longer says what the runner's role cannot do")
	}
	if msg, code := undolog("alice", "approve", id, "--as", "alice", "--reason", "checked"); code != 0 {
		t.Fatalf("alice's approve: exit %d, %s", code, msg)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the approved release failed: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the approved release did not run:\n%s", out.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "released")); string(b) != "released\n" {
		t.Fatalf("the release did not run once: %q", b)
	}
	if show, _ := undolog("alice", "show", id); !strings.Contains(show, "alice (role alice)") {
		t.Fatalf("the log does not name the approver's role:\n%s", show)
	}
}

func TestMain(m *testing.M) { pgtest.Main(m) }
