// Package pgtest gives tests a real PostgreSQL 15 server: one per test
// binary, started on first use from the Debian binaries in BinDir and stopped
// by Main when the tests are done, or the server UNDOLOG_POSTGRES_URL names.
// Each test gets fresh databases of it (NewDatabase).
//
// A package whose tests use it runs them through Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Without the binaries the tests skip, unless UNDOLOG_REQUIRE_POSTGRES is set
// (.ci/run sets it), then they fail.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BinDir holds the server binaries (Debian's postgresql-15 package).
const BinDir = "/usr/lib/postgresql/15/bin"

// nobody runs initdb and the server when the tests run as root, which
// initdb and postgres refuse.
const nobodyID = 65534

// Cluster is a running PostgreSQL server.
type Cluster struct {
	adminURL string
	// Set when this process started the server.
	dir  string // holds the socket, data/ and server.log
	cmd  *exec.Cmd
	done chan struct{} // closed when the server exited
}

var (
	mainRan atomic.Bool
	once    sync.Once
	shared  *Cluster
	skip    string // why there is no server, when the tests skip
	failed  error
	dbSeq   atomic.Int64
)

// Main runs the tests of m and then stops the server if this process started
// one; it exits with m's code. Call it from TestMain.
func Main(m *testing.M) { os.Exit(Run(m.Run)) }

// Run is Main for a TestMain that runs the tests itself (testscript's):
// it calls run, stops the server, and returns run's code.
func Run(run func() int) int {
	mainRan.Store(true)
	code := run()
	if shared != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Server returns the test binary's PostgreSQL server, starting it on the
// first call. It skips tb without the server binaries (fails it when
// UNDOLOG_REQUIRE_POSTGRES is set) and fails it when the server does not
// start, or when the package's TestMain does not call Main.
func Server(tb testing.TB) *Cluster {
	tb.Helper()
	if !mainRan.Load() {
		tb.Fatal("pgtest: the package's TestMain must call pgtest.Main(m), which stops the server")
	}
	once.Do(func() {
		if u := os.Getenv("UNDOLOG_POSTGRES_URL"); u != "" {
			shared, failed = attach(u)
			return
		}
		for _, bin := range []string{"initdb", "postgres"} {
			if _, err := os.Stat(filepath.Join(BinDir, bin)); err != nil {
				skip = fmt.Sprintf("PostgreSQL 15 is not installed (no %s; Debian: apt-get install postgresql-15), and UNDOLOG_POSTGRES_URL is not set",
					filepath.Join(BinDir, bin))
				return
			}
		}
		shared, failed = start()
	})
	switch {
	case skip != "" && os.Getenv("UNDOLOG_REQUIRE_POSTGRES") != "":
		tb.Fatal("pgtest: UNDOLOG_REQUIRE_POSTGRES is set but " + skip)
	case skip != "":
		tb.Skip("pgtest: " + skip)
	case failed != nil:
		tb.Fatalf("pgtest: %v", failed)
	}
	return shared
}

// AdminURL is the URL of a superuser of the server, on its maintenance
// database (postgres).
func (c *Cluster) AdminURL() string { return c.adminURL }

// NewDatabase creates a new empty database and returns its URL, which pgx
// and libpq accept, in this process or a child. The database is dropped
// (its connections terminated) when tb ends.
func (c *Cluster) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := dbName(tb.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := withDatabase(c.adminURL, name)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return u
}

// admin runs one statement as the superuser.
func (c *Cluster) admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

var notIdent = regexp.MustCompile(`[^a-z0-9]+`)

// dbName is unique on a server shared by several test processes
// (UNDOLOG_POSTGRES_URL): the pid, a counter, and for whoever reads a list of
// databases, the test's name. At most 63 bytes, PostgreSQL's limit.
func dbName(test string) string {
	prefix := fmt.Sprintf("t%d_%d_", os.Getpid(), dbSeq.Add(1))
	test = strings.Trim(notIdent.ReplaceAllString(strings.ToLower(test), "_"), "_")
	if len(prefix)+len(test) > 63 {
		test = test[:63-len(prefix)]
	}
	return prefix + test
}

// withDatabase is u with its database replaced by name.
func withDatabase(u, name string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("parse %s: %v", u, err)
	}
	if p.Scheme != "postgres" && p.Scheme != "postgresql" {
		return "", fmt.Errorf("%s is not a postgres:// URL", u)
	}
	p.Path, p.RawPath = "/"+name, ""
	return p.String(), nil
}

// attach uses the server UNDOLOG_POSTGRES_URL names.
func attach(u string) (*Cluster, error) {
	c, err := Attach(u)
	if err != nil {
		return nil, fmt.Errorf("UNDOLOG_POSTGRES_URL: %v", err)
	}
	return c, nil
}

// start runs initdb and then the server, on a unix socket only, in a new
// directory under /tmp (short: a socket's path has at most 107 bytes). As
// root both run as nobody, which owns the directory.
func start() (*Cluster, error) {
	sweep()
	dir, err := os.MkdirTemp(tmpRoot, tmpPrefix)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &Cluster{dir: dir, done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: nobodyID, Gid: nobodyID}
		if err := os.Chown(dir, nobodyID, nobodyID); err != nil {
			return nil, err
		}
	}
	// Others may reach the socket; data/ stays the server's own (0700).
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	env := []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "LANG=C", "TZ=UTC"}

	initdb := exec.Command(filepath.Join(BinDir, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync", "--no-instructions")
	initdb.Dir, initdb.Env = dir, env
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}

	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the server has its own copy of the descriptor
	c.cmd = exec.Command(filepath.Join(BinDir, "postgres"), "-D", data, "-k", dir,
		"-c", "listen_addresses=", "-c", "max_connections=200")
	c.cmd.Dir, c.cmd.Env = dir, env
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	// The kernel ends the server (immediate shutdown) if this process dies
	// without Main stopping it: a test timeout's panic, a kill. Every thread
	// of a test binary lives as long as it does (see internal/child).
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("postgres: %v", err)
	}
	go func() { c.cmd.Wait(); close(c.done) }()

	c.adminURL = (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/postgres",
		RawQuery: "host=" + strings.ReplaceAll(url.QueryEscape(dir), "%2F", "/") + "&sslmode=disable"}).String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		err := c.admin(ctx, "SELECT 1")
		if err == nil {
			break
		}
		select {
		case <-c.done:
			return nil, fmt.Errorf("postgres exited (%v):\n%s", c.cmd.ProcessState, tail(logPath))
		case <-ctx.Done():
			c.kill()
			return nil, fmt.Errorf("postgres did not accept connections within a minute: %v\n%s", err, tail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
	}
	ok = true
	return c, nil
}

const (
	tmpRoot   = "/tmp"
	tmpPrefix = "pgtest-"
	ownerFile = "owner.pid" // the pid of the test process that made the directory
)

// sweep removes the directories of servers whose test process died without
// Main stopping them (killed, or a test timeout's panic): the kernel ended
// the server (Pdeathsig), but nothing removed its files.
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(tmpRoot, tmpPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or still being made
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(dir)
		}
	}
}

// stop shuts the server down (fast: it ends the sessions left) and removes
// its directory. A server it did not start it leaves alone.
func (c *Cluster) stop() error {
	if c.cmd == nil {
		return nil
	}
	c.cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.kill()
		err = fmt.Errorf("postgres did not shut down within 30s:\n%s", tail(filepath.Join(c.dir, "server.log")))
	}
	if rmErr := os.RemoveAll(c.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

// kill ends the server at once (immediate shutdown, then SIGKILL).
func (c *Cluster) kill() {
	c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// tail is the end of the server's log, for an error.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

// Start starts a PostgreSQL server of its own for a program that is not a
// test (the benchmark): the caller stops it with Stop. It fails when the
// binaries in BinDir are missing.
func Start() (*Cluster, error) {
	for _, bin := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(BinDir, bin)); err != nil {
			return nil, fmt.Errorf("PostgreSQL 15 is not installed (no %s)", filepath.Join(BinDir, bin))
		}
	}
	return start()
}

// Attach uses the server at an admin URL that runs already (Stop leaves it
// running).
func Attach(adminURL string) (*Cluster, error) {
	if _, err := withDatabase(adminURL, "x"); err != nil {
		return nil, err
	}
	c := &Cluster{adminURL: adminURL}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.admin(ctx, "SELECT 1"); err != nil {
		return nil, fmt.Errorf("connect: %v", err)
	}
	return c, nil
}

// Stop shuts down a server Start started.
func (c *Cluster) Stop() error { return c.stop() }

// CreateDatabase creates database name and returns its URL; DropDatabase
// drops it. NewDatabase is the same for a test.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	if err := c.admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %v", name, err)
	}
	return withDatabase(c.adminURL, name)
}

// DropDatabase drops database name, ending its connections.
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	return c.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}
