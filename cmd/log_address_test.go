package cmd

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/undolog/undolog/engines"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
)

// Which log a command uses: --log, UNDOLOG_LOG, a PG* environment that
// names a database, the default file, in that order.
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
		{env: map[string]string{"PGHOST": "db.internal"}, want: "postgres://"},
		{env: map[string]string{"PGDATABASE": "undolog"}, want: "postgres://"},
		{env: map[string]string{"PGSERVICE": "undolog"}, want: "postgres://"},
		{env: map[string]string{"PGHOSTADDR": "10.0.0.7"}, want: "/home/u/.local/state/undolog/undolog.db"}, // pgx does not read it
		{env: map[string]string{"PGHOST": "db", "UNDOLOG_LOG": "/x.db"}, want: "/x.db"},
		{flag: "/f.db", env: map[string]string{"PGHOST": "db", "UNDOLOG_LOG": "/x.db"}, want: "/f.db"},
	} {
		env := map[string]string{"HOME": "/home/u"}
		for k, v := range c.env {
			env[k] = v
		}
		f := &Factory{LogFlag: c.flag, Getenv: func(k string) string { return env[k] }}
		if got := f.LogPath(); got != c.want {
			t.Errorf("--log %q %v: log %q, want %q", c.flag, c.env, got, c.want)
		}
	}
}

// With neither --log nor UNDOLOG_LOG, PGHOST, PGPORT, PGUSER and PGDATABASE
// (as libpq reads them) put the log in that database.
func TestPGEnvironmentSelectsTheDatabase(t *testing.T) {
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
	env := []string{"HOME=" + t.TempDir(), "PGHOST=" + host, "PGDATABASE=" + strings.TrimPrefix(u.Path, "/"), "PGUSER=" + u.User.Username()}
	if port := u.Port(); port != "" {
		env = append(env, "PGPORT="+port)
	} else if port := q.Get("port"); port != "" {
		env = append(env, "PGPORT="+port)
	}
	if pw, ok := u.User.Password(); ok {
		env = append(env, "PGPASSWORD="+pw)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "UNDOLOG_LOG=") && !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(testbin.Undolog(t), "session", "start", "from-env")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("session start: %v %s", err, out)
	}
	log := engines.Open(addr, engines.Options{})
	defer log.Close()
	if _, err := log.GetSession(context.Background(), "from-env"); err != nil {
		t.Fatalf("the session is not in the database the environment names: %v", err)
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
