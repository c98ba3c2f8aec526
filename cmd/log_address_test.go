package cmd

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
)

// Which log a command uses: --log, UNDOLOG_LOG, the default file, in that
// order; PG* variables alone choose nothing.
func TestLogAddressPrecedence(t *testing.T) {
	for _, c := range []struct {
		flag string
		env  map[string]string
		want string
	}{
		{want: "/home/u/.local/state/undolog/undolog.db"},
		{env: map[string]string{"XDG_STATE_HOME": "/s"}, want: "/s/undolog/undolog.db"},
		{env: map[string]string{"XDG_STATE_HOME": "rel"}, want: "/home/u/.local/state/undolog/undolog.db"}, // relative: ignored, as XDG says
		{env: map[string]string{"PGUSER": "bob", "PGPASSWORD": "x"}, want: "/home/u/.local/state/undolog/undolog.db"},
		{env: map[string]string{"PGHOST": "db.internal"}, want: "/home/u/.local/state/undolog/undolog.db"},
		{env: map[string]string{"PGDATABASE": "undolog"}, want: "/home/u/.local/state/undolog/undolog.db"},
		{env: map[string]string{"PGSERVICE": "undolog"}, want: "/home/u/.local/state/undolog/undolog.db"},
		{env: map[string]string{"PGHOST": "db", "PGDATABASE": "app", "XDG_STATE_HOME": "/s"}, want: "/s/undolog/undolog.db"},
		{env: map[string]string{"PGHOST": "db", "UNDOLOG_LOG": "postgres:///"}, want: "postgres:///"},
		{env: map[string]string{"PGHOST": "db", "UNDOLOG_LOG": "/x.db"}, want: "/x.db"},
		{flag: "/f.db", env: map[string]string{"PGHOST": "db", "UNDOLOG_LOG": "/x.db"}, want: "/f.db"},
	} {
		env := map[string]string{"HOME": "/home/u"}
		for k, v := range c.env {
			env[k] = v
		}
		f := &Factory{logs: logOpener{address: c.flag}, Getenv: func(k string) string { return env[k] }}
		if got := f.LogPath(); got != c.want {
			t.Errorf("--log %q %v: log %q, want %q", c.flag, c.env, got, c.want)
		}
	}
}

// PG* variables kept for an application's database (as many developers keep
// them) do not send the log there: with neither --log nor UNDOLOG_LOG the
// log is the default file, and the database gets no undolog table. A
// postgres:/// URL that leaves server and database out has them filled in
// from the same variables, as libpq does.
func TestPGEnvironmentAloneKeepsTheDefaultFile(t *testing.T) {
	addr := pgtest.Server(t).NewDatabase(t)
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	host := u.Hostname()
	if host == "" {
		host = q.Get("host")
	}
	state := t.TempDir()
	env := []string{"HOME=" + t.TempDir(), "XDG_STATE_HOME=" + state, "PGHOST=" + host, "PGDATABASE=" + strings.TrimPrefix(u.Path, "/"), "PGUSER=" + u.User.Username()}
	if port := u.Port(); port != "" {
		env = append(env, "PGPORT="+port)
	} else if port := q.Get("port"); port != "" {
		env = append(env, "PGPORT="+port)
	}
	if pw, ok := u.User.Password(); ok {
		env = append(env, "PGPASSWORD="+pw)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "UNDOLOG_LOG=") && !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			env = append(env, kv)
		}
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(testbin.Undolog(t), args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("undolog %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	undologTables := func() []string {
		t.Helper()
		conn, err := pgx.Connect(t.Context(), addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		rows, err := conn.Query(t.Context(), `SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'undolog%' ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}

	run("session", "start", "local")
	file := filepath.Join(state, "undolog", "undolog.db")
	fileLog := logaddr.Open(file, logaddr.Options{})
	defer fileLog.Close()
	if _, err := fileLog.GetSession(context.Background(), "local"); err != nil {
		t.Fatalf("with PG* variables alone the session is not in the default log file %s: %v", file, err)
	}
	if names := undologTables(); len(names) > 0 {
		t.Fatalf("with PG* variables alone undolog made tables in the application's database: %v", names)
	}

	run("--log", "postgres:///", "session", "start", "shared")
	db := logaddr.Open(addr, logaddr.Options{})
	defer db.Close()
	if _, err := db.GetSession(context.Background(), "shared"); err != nil {
		t.Fatalf("--log postgres:/// did not take server and database from the PG* variables: %v", err)
	}
	if _, err := fileLog.GetSession(context.Background(), "shared"); err == nil {
		t.Fatal("--log postgres:/// wrote the default log file")
	}
}

// A user who ran `go run . demo` in a clone has no undolog installed: the
// hints say go run . too.
func TestHintsOfGoRunSayGoRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds undolog with go run")
	}
	cmd := exec.Command("go", "run", ".", "demo")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "UNDOLOG_LOG=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if !strings.Contains(string(out), "open it:    go run . --log ") || !strings.Contains(string(out), "or script:  go run . --log ") {
		t.Fatalf("hints of go run . demo:\n%s", out)
	}
}

// An address that names PostgreSQL is a postgres:// URL in any case of its
// scheme, as RFC 3986 has schemes; one that names it but is no URL
// (postgres:/db, a URL with a space around it) is refused, exit 2, one
// line, nothing written: taken as a file path it kept the log in a file
// under ./postgres:, where nobody sharing the database sees it.
func TestLogAddressNamingPostgresIsAURL(t *testing.T) {
	addr := pgtest.Server(t).NewDatabase(t)
	dir := t.TempDir()
	state := t.TempDir()
	run := func(log string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(testbin.Undolog(t), append([]string{"--log", log}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_STATE_HOME="+state, "UNDOLOG_LOG=")
		out, err := cmd.CombinedOutput()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}

	scheme, rest, _ := strings.Cut(addr, "://")
	for i, upper := range []string{strings.ToUpper(scheme), "PostgreSQL"} {
		session := fmt.Sprintf("upper-%d", i)
		if out, code := run(upper+"://"+rest, "session", "start", session); code != 0 {
			t.Fatalf("--log %s://...: exit %d %s", upper, code, out)
		}
		if out, code := run(addr, "session", "show", session); code != 0 {
			t.Fatalf("--log %s://... did not write the database %s names: exit %d %s", upper, scheme, code, out)
		}
	}

	for _, log := range []string{"postgres:/undolog", "postgresql:undolog", "Postgres:", " " + addr, addr + "\n"} {
		out, code := run(log, "session", "start", "typo")
		if code != 2 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "undolog: invalid input: log address ") {
			t.Errorf("--log %q: exit %d, want 2 and one line naming the address: %q", log, code, out)
		}
		if u, err := url.Parse(addr); err == nil {
			if pw, ok := u.User.Password(); ok && strings.Contains(out, pw) {
				t.Errorf("--log %q: the error shows the password: %q", log, out)
			}
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("an address naming PostgreSQL made a file: %v", entries[0].Name())
	}
	if entries, _ := os.ReadDir(state); len(entries) > 0 {
		t.Errorf("an address naming PostgreSQL wrote the default log: %v", entries[0].Name())
	}
	// A file of such a name is still one, named as a path.
	if out, code := run("./postgres:local", "session", "start", "local"); code != 0 {
		t.Fatalf("--log ./postgres:local: exit %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres:local")); err != nil {
		t.Fatalf("--log ./postgres:local made no file of that name: %v", err)
	}
}
