package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PgBouncer is Debian's pgbouncer package's binary.
const PgBouncer = "/usr/sbin/pgbouncer"

// poolerPort is the port in the name of the pooler's socket
// (.s.PGSQL.6432), in a directory of its own.
const poolerPort = 6432

// Pooled says whether NewDatabase hands out the URLs of a PgBouncer in front
// of the shared server (UNDOLOG_PG_POOLER=1), so that the tests of
// PostgreSQL run through a pooler in transaction mode.
func Pooled() bool { return os.Getenv("UNDOLOG_PG_POOLER") == "1" }

// Pooler is a PgBouncer in transaction pooling mode in front of a Cluster,
// on a unix socket in a directory of its own. Clients sign in as any role of
// the server (auth_type trust, as the server's socket; the pooler looks
// roles up with auth_query), and each role has pools of its own: a backend
// is shared only among the clients of one role, whose session_user it is.
type Pooler struct {
	dir        string
	cmd        *exec.Cmd
	done       chan struct{}
	serverHost string
	serverPort uint16
}

// Pooler returns the cluster's pooler, starting it on the first call; it is
// stopped with the cluster (Main, or the end of Own's test). It skips tb
// without pgbouncer, or fails it when UNDOLOG_REQUIRE_PGBOUNCER is set.
func (c *Cluster) Pooler(tb testing.TB) *Pooler {
	tb.Helper()
	c.StartPooler()
	switch {
	case c.poolerSkip != "" && os.Getenv("UNDOLOG_REQUIRE_PGBOUNCER") != "":
		tb.Fatal("pgtest: UNDOLOG_REQUIRE_PGBOUNCER is set but " + c.poolerSkip)
	case c.poolerSkip != "":
		tb.Skip("pgtest: " + c.poolerSkip)
	case c.poolerErr != nil:
		tb.Fatalf("pgtest: %v", c.poolerErr)
	}
	return c.pooler
}

// StartPooler is Pooler for a program that is not a test (the benchmark):
// it returns the cluster's pooler, starting it on the first call, stopped
// with the cluster (Remove).
func (c *Cluster) StartPooler() (*Pooler, error) {
	c.poolerOnce.Do(func() {
		if _, err := os.Stat(PgBouncer); err != nil {
			c.poolerSkip = fmt.Sprintf("PgBouncer is not installed (no %s; Debian: apt-get install pgbouncer)", PgBouncer)
			return
		}
		c.pooler, c.poolerErr = c.startPooler()
	})
	if c.poolerSkip != "" {
		return nil, errors.New(c.poolerSkip)
	}
	return c.pooler, c.poolerErr
}

// URL is the URL of the database a direct URL of the pooler's server names,
// through the pooler, as the same user. It tells undolog the pooler is in
// transaction mode and, if listen, where the server is for its listening
// connection (else waits poll). Statements are sent unprepared
// (default_query_exec_mode=exec), as undolog sends them, so that a test's
// own pgx connections work through the pooler too.
func (p *Pooler) URL(direct string, listen bool) string {
	u, err := url.Parse(direct)
	if err != nil {
		panic(fmt.Sprintf("pgtest: parse %s: %v", direct, err))
	}
	q := u.Query()
	u.Host = ""
	q.Set("host", p.dir)
	q.Set("port", strconv.Itoa(poolerPort))
	q.Set("undolog_pooler", "transaction")
	q.Set("default_query_exec_mode", "exec")
	q.Del("undolog_listen_host")
	q.Del("undolog_listen_port")
	if listen {
		q.Set("undolog_listen_host", p.serverHost)
		q.Set("undolog_listen_port", strconv.Itoa(int(p.serverPort)))
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// poolerConfig is the pooler's pgbouncer.ini. Waits are short, as a test's
// are: a pooler that cannot reach the server tries again in a tenth of a
// second, not fifteen. undolog's own parameters are ignored at a client's
// start, for a test's own pgx connections that pass them on (undolog takes
// them out itself).
const poolerConfig = `[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr =
listen_port = %d
unix_socket_dir = %s
auth_type = trust
auth_file = %s
auth_user = %s
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 10
server_idle_timeout = 10
server_login_retry = 0.1
ignore_startup_parameters = undolog_pooler,undolog_listen_host,undolog_listen_port
log_connections = 0
log_disconnections = 0
logfile = %s
`

// startPooler writes the pooler's files in a new directory and runs it, as
// nobody when the tests run as root (PgBouncer refuses root).
func (c *Cluster) startPooler() (*Pooler, error) {
	cfg, err := pgconn.ParseConfig(c.adminURL)
	if err != nil {
		return nil, err
	}
	sweep()
	dir, err := os.MkdirTemp(tmpRoot, tmpPrefix)
	if err != nil {
		return nil, err
	}
	p := &Pooler{dir: dir, serverHost: cfg.Host, serverPort: cfg.Port, done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	files := map[string]string{
		ownerFile:       strconv.Itoa(os.Getpid()),
		"userlist.txt":  fmt.Sprintf("%q %q\n", cfg.User, cfg.Password),
		"pgbouncer.ini": fmt.Sprintf(poolerConfig, cfg.Host, cfg.Port, poolerPort, dir, filepath.Join(dir, "userlist.txt"), cfg.User, filepath.Join(dir, "pgbouncer.log")),
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: nobodyID, Gid: nobodyID}
	}
	for name, text := range files {
		mode := os.FileMode(0o600)
		if name == ownerFile {
			mode = 0o644
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), mode); err != nil {
			return nil, err
		}
		if cred != nil {
			os.Chown(filepath.Join(dir, name), nobodyID, nobodyID)
		}
	}
	if cred != nil {
		if err := os.Chown(dir, nobodyID, nobodyID); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	p.cmd = exec.Command(PgBouncer, filepath.Join(dir, "pgbouncer.ini"))
	p.cmd.Dir, p.cmd.Env = dir, []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "TZ=UTC"}
	// As the server: the kernel ends it (immediate shutdown) if this
	// process dies first.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGTERM}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgbouncer: %v", err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	probe := p.URL(c.adminURL, false)
	for {
		conn, err := pgx.Connect(ctx, probe)
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			conn.Close(context.Background())
		}
		if err == nil {
			break
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("pgbouncer exited (%v):\n%s", p.cmd.ProcessState, tail(filepath.Join(dir, "pgbouncer.log")))
		case <-ctx.Done():
			p.stop()
			return nil, fmt.Errorf("pgbouncer did not take connections within a minute: %v\n%s", err, tail(filepath.Join(dir, "pgbouncer.log")))
		case <-time.After(20 * time.Millisecond):
		}
	}
	ok = true
	return p, nil
}

// stop ends the pooler (immediate shutdown: its clients' connections are
// closed) and removes its directory.
func (p *Pooler) stop() error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		err = fmt.Errorf("pgbouncer did not stop within 10s")
	}
	if rmErr := os.RemoveAll(p.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

// poolerState is a Cluster's pooler, started on first use.
type poolerState struct {
	poolerOnce sync.Once
	pooler     *Pooler
	poolerSkip string
	poolerErr  error
}

// stopPooler stops the cluster's pooler, if it started one.
func (c *Cluster) stopPooler() error {
	if c.pooler == nil {
		return nil
	}
	return c.pooler.stop()
}

// pooledURL is u through the cluster's pooler when the tests run through
// one (Pooled), u otherwise.
func (c *Cluster) pooledURL(tb testing.TB, u string) string {
	if !Pooled() || c != shared {
		return u
	}
	return c.Pooler(tb).URL(u, true)
}
