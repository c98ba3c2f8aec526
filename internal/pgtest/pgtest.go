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
// (.ci/run sets it), then they fail. A Cluster's Pooler is a PgBouncer in
// transaction pooling mode in front of it; NewPooledDatabase makes a
// database reached through it, and with UNDOLOG_PG_POOLER=1 every database
// of the shared server is.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
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
	env  []string
	cred *syscall.Credential
	args []string // the server's flags beside its directories
	port int      // set for a server that also listens on 127.0.0.1 (Own)

	stopped atomic.Bool // by Stop, until Start

	poolerState // a PgBouncer in front (Pooler)
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

// Login is the role of an Own server that signs in over TCP with a
// password (scram-sha-256), and its password.
const (
	Login         = "agent"
	LoginPassword = "hunter2-pw"
)

// Own starts a server for tb alone, which tb may stop and start again (Stop,
// Start) to see what a client does without one; it is removed when tb ends.
// Beside its socket it listens on 127.0.0.1 (TCPURL), where only roles with
// a password get in (scram-sha-256): Login, a superuser. It skips or fails
// tb as Server does without the server binaries, and it ignores
// UNDOLOG_POSTGRES_URL: a server someone else runs cannot be stopped.
func Own(tb testing.TB) *Cluster {
	tb.Helper()
	if !mainRan.Load() {
		tb.Fatal("pgtest: the package's TestMain must call pgtest.Main(m), which stops the server")
	}
	for _, bin := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(BinDir, bin)); err != nil {
			if os.Getenv("UNDOLOG_REQUIRE_POSTGRES") != "" {
				tb.Fatalf("pgtest: UNDOLOG_REQUIRE_POSTGRES is set but %s is not installed", filepath.Join(BinDir, bin))
			}
			tb.Skipf("pgtest: PostgreSQL 15 is not installed (no %s)", filepath.Join(BinDir, bin))
		}
	}
	c, err := initCluster()
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.stop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	hba := "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(c.dir, "data", "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	if c.cred != nil {
		os.Chown(filepath.Join(c.dir, "data", "pg_hba.conf"), nobodyID, nobodyID)
	}
	if c.port, err = freePort(); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	c.args = []string{"-c", "listen_addresses=127.0.0.1", "-p", strconv.Itoa(c.port), "-c", "max_connections=50"}
	if err := c.launch(); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.admin(ctx, "CREATE ROLE "+Login+" LOGIN SUPERUSER PASSWORD '"+LoginPassword+"'"); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return c
}

// freePort is a TCP port of 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// TCPURL is the URL of database on an Own server, over TCP, as user with
// password (url-escaped here).
func (c *Cluster) TCPURL(database, user, password string) string {
	return (&url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: fmt.Sprintf("127.0.0.1:%d", c.port),
		Path: "/" + database, RawQuery: "sslmode=disable&connect_timeout=5"}).String()
}

// Stop shuts an Own server down (fast: the sessions it ends get an error);
// Start runs it again, on the same data and port.
func (c *Cluster) Stop(tb testing.TB) {
	tb.Helper()
	if c.port == 0 {
		tb.Fatal("pgtest: Stop is for a server of the test's own (Own)")
	}
	if err := c.shutdown(); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	c.stopped.Store(true)
}

// Crash ends an Own server at once (immediate shutdown: what its commits
// had not written to the WAL is lost); Start runs it again, which recovers.
func (c *Cluster) Crash(tb testing.TB) {
	tb.Helper()
	if c.port == 0 {
		tb.Fatal("pgtest: Crash is for a server of the test's own (Own)")
	}
	c.kill()
	c.stopped.Store(true)
}

// Start runs a server Stop stopped again, and waits until it takes connections.
func (c *Cluster) Start(tb testing.TB) {
	tb.Helper()
	if !c.stopped.Load() {
		tb.Fatal("pgtest: Start of a server that runs")
	}
	if err := c.launch(); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	c.stopped.Store(false)
}

// AdminURL is the URL of a superuser of the server, on its maintenance
// database (postgres).
func (c *Cluster) AdminURL() string { return c.adminURL }

// NewDatabase creates a new empty database and returns its URL, which pgx
// and libpq accept, in this process or a child. The database is dropped
// (its connections terminated) when tb ends. With UNDOLOG_PG_POOLER=1 the
// URL of a database of the shared server (Server) goes through the
// server's PgBouncer in transaction mode (Pooler.URL, listening direct).
func (c *Cluster) NewDatabase(tb testing.TB) string {
	tb.Helper()
	return c.pooledURL(tb, c.newDatabase(tb))
}

// NewPooledDatabase is NewDatabase through the cluster's PgBouncer in
// transaction mode, whatever UNDOLOG_PG_POOLER says: waits listen on a
// direct connection to the server if listen, else they poll. It skips or
// fails tb as Pooler does.
func (c *Cluster) NewPooledDatabase(tb testing.TB, listen bool) string {
	tb.Helper()
	pooler := c.Pooler(tb)
	return pooler.URL(c.newDatabase(tb), listen)
}

// newDatabase creates a new empty database, dropped when tb ends, and
// returns its direct URL.
func (c *Cluster) newDatabase(tb testing.TB) string {
	tb.Helper()
	name := dbName(tb.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if c.stopped.Load() {
			return // the test failed with its own server stopped; the server goes with its directory
		}
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
	c, err := initCluster()
	if err != nil {
		return nil, err
	}
	c.args = []string{"-c", "listen_addresses=", "-c", "max_connections=200"}
	if err := c.launch(); err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	return c, nil
}

// initCluster makes the cluster's directory and runs initdb in it.
func initCluster() (*Cluster, error) {
	sweep()
	dir, err := os.MkdirTemp(tmpRoot, tmpPrefix)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &Cluster{dir: dir, env: []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "LANG=C", "TZ=UTC"}}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	if os.Geteuid() == 0 {
		c.cred = &syscall.Credential{Uid: nobodyID, Gid: nobodyID}
		if err := os.Chown(dir, nobodyID, nobodyID); err != nil {
			return nil, err
		}
	}
	// Others may reach the socket; data/ stays the server's own (0700).
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	initdb := exec.Command(filepath.Join(BinDir, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync", "--no-instructions")
	initdb.Dir, initdb.Env = dir, c.env
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	ok = true
	return c, nil
}

// launch runs the server of c's directory with c.args, and waits until it
// accepts connections.
func (c *Cluster) launch() error {
	logPath := filepath.Join(c.dir, "server.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the server has its own copy of the descriptor
	c.done = make(chan struct{})
	c.cmd = exec.Command(filepath.Join(BinDir, "postgres"), append([]string{"-D", filepath.Join(c.dir, "data"), "-k", c.dir}, c.args...)...)
	c.cmd.Dir, c.cmd.Env = c.dir, c.env
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	// The kernel ends the server (immediate shutdown) if this process dies
	// without Main stopping it: a test timeout's panic, a kill. Every thread
	// of a test binary lives as long as it does (see internal/child).
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGQUIT}
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("postgres: %v", err)
	}
	cmd, done := c.cmd, c.done
	go func() { cmd.Wait(); close(done) }()

	query := "host=" + strings.ReplaceAll(url.QueryEscape(c.dir), "%2F", "/") + "&sslmode=disable"
	if c.port != 0 {
		query += "&port=" + strconv.Itoa(c.port)
	}
	c.adminURL = (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/postgres", RawQuery: query}).String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		err := c.admin(ctx, "SELECT 1")
		if err == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("postgres exited (%v):\n%s", c.cmd.ProcessState, tail(logPath))
		case <-ctx.Done():
			c.kill()
			return fmt.Errorf("postgres did not accept connections within a minute: %v\n%s", err, tail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
	}
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

// stop shuts the server down and removes its directory. A server it did not
// start it leaves alone.
func (c *Cluster) stop() error {
	poolerErr := c.stopPooler()
	if c.cmd == nil {
		return poolerErr
	}
	err := c.shutdown()
	if err == nil {
		err = poolerErr
	}
	if rmErr := os.RemoveAll(c.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

// shutdown stops the server (fast: it ends the sessions left) and keeps
// its directory.
func (c *Cluster) shutdown() error {
	c.cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.kill()
		err = fmt.Errorf("postgres did not shut down within 30s:\n%s", tail(filepath.Join(c.dir, "server.log")))
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
// test (the benchmark): the caller stops it with Remove. It fails when the
// binaries in BinDir are missing.
func Start() (*Cluster, error) {
	for _, bin := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(BinDir, bin)); err != nil {
			return nil, fmt.Errorf("PostgreSQL 15 is not installed (no %s)", filepath.Join(BinDir, bin))
		}
	}
	return start()
}

// Attach uses the server at an admin URL that runs already (Remove leaves it
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

// Remove shuts down a server Start started and removes its files (Stop is
// a test's, which keeps them).
func (c *Cluster) Remove() error { return c.stop() }

// ServerPID is the process id of a server this process started (its
// postmaster, whose children are the backends), 0 for one it attached to.
func (c *Cluster) ServerPID() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

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
