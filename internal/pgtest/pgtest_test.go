package pgtest

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// TestServer starts the server, makes two databases and checks that each is
// reachable and that they are two, that the server is PostgreSQL 15 with its
// durability defaults and max_connections, and that a database is gone after
// its test.
func TestServer(t *testing.T) {
	began := time.Now()
	c := Server(t)
	t.Logf("server ready in %v: %s", time.Since(began), c.AdminURL())
	if again := Server(t); again != c {
		t.Fatal("a second Server call made another server")
	}

	var dropped string
	t.Run("databases", func(t *testing.T) {
		a, b := c.NewDatabase(t), c.NewDatabase(t)
		if a == b {
			t.Fatalf("two databases share the URL %s", a)
		}
		nameA, nameB := current(t, a), current(t, b)
		if nameA == nameB {
			t.Fatalf("both URLs reach database %s", nameA)
		}
		if !strings.Contains(a, "/"+nameA+"?") && !strings.HasSuffix(a, "/"+nameA) {
			t.Errorf("URL %s reaches database %s", a, nameA)
		}
		// A connection left open does not keep the database from being dropped.
		conn, err := pgx.Connect(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn
		dropped = nameA
	})

	conn, err := pgx.Connect(t.Context(), c.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", dropped).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database %s outlived its test", dropped)
	}
	if os.Getenv("UNDOLOG_POSTGRES_URL") != "" {
		return // someone else's server, someone else's settings
	}
	for setting, want := range map[string]string{
		"server_version_num": "15", // prefix
		"fsync":              "on",
		"synchronous_commit": "on",
		"max_connections":    "200",
		"is_superuser":       "on",
	} {
		var got string
		if err := conn.QueryRow(t.Context(), "SELECT current_setting($1)", setting).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("%s = %s, want %s", setting, got, want)
		}
	}
}

// current connects to u, checks SELECT 1 and returns the database it reached.
func current(t *testing.T, u string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatalf("connect %s: %v", u, err)
	}
	defer conn.Close(context.Background())
	var one int
	var name string
	if err := conn.QueryRow(t.Context(), "SELECT 1, current_database()").Scan(&one, &name); err != nil || one != 1 {
		t.Fatalf("SELECT 1 on %s: %d, %v", u, one, err)
	}
	return name
}

func TestDBName(t *testing.T) {
	long := dbName("TestSomething/with a very long subtest name that goes on and on and on and on")
	if len(long) > 63 {
		t.Errorf("%q is longer than 63 bytes", long)
	}
	if a, b := dbName("T"), dbName("T"); a == b {
		t.Errorf("two databases named %s", a)
	}
	if got := dbName("TestX/Sub-Case"); !strings.HasSuffix(got, "_testx_sub_case") {
		t.Errorf("dbName = %s", got)
	}
}

// A server of a test's own takes Login's password over TCP and refuses a
// wrong one, and stops and starts again with what it held.
func TestOwnServerStopsAndStarts(t *testing.T) {
	c := Own(t)
	db := c.NewDatabase(t)
	name := current(t, db)
	tcp := c.TCPURL(name, Login, LoginPassword)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, tcp)
	if err != nil {
		t.Fatalf("Login over TCP: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if conn, err := pgx.Connect(ctx, c.TCPURL(name, Login, "wrong")); err == nil {
		conn.Close(ctx)
		t.Fatal("a wrong password got in")
	} else if !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("wrong password: %v", err)
	}
	c.Stop(t)
	if conn, err := pgx.Connect(ctx, tcp); err == nil {
		conn.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
	c.Start(t)
	conn, err = pgx.Connect(ctx, tcp)
	if err != nil {
		t.Fatalf("after Start: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT n FROM kept").Scan(&n); err != nil || n != 7 {
		t.Fatalf("after Start: %d, %v", n, err)
	}
}

// TestPooler reaches a database through the pooler as a role of the
// server, whose session_user each transaction is, on whichever backend: a
// role that does not exist is refused, and a setting made for a session
// does not outlive its transaction as it would on a connection of its own.
func TestPooler(t *testing.T) {
	c := Server(t)
	direct := c.NewDatabase(t)
	if Pooled() {
		t.Skip("NewDatabase hands out the pooler's URLs already")
	}
	p := c.Pooler(t)
	if again := c.Pooler(t); again != p {
		t.Fatal("a second Pooler call started another pooler")
	}
	conn, err := pgx.Connect(t.Context(), direct)
	if err != nil {
		t.Fatal(err)
	}
	role := "pooled_" + strings.TrimPrefix(current(t, direct), "t")
	if _, err := conn.Exec(t.Context(), "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	t.Cleanup(func() {
		if conn, err := pgx.Connect(context.Background(), c.AdminURL()); err == nil {
			conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
			conn.Close(context.Background())
		}
	})
	as := func(user string) string {
		u, err := url.Parse(p.URL(direct, false))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(user)
		return u.String()
	}
	pooled, err := pgx.Connect(t.Context(), as(role))
	if err != nil {
		t.Fatal(err)
	}
	defer pooled.Close(context.Background())
	var who, db string
	if err := pooled.QueryRow(t.Context(), "SELECT session_user, current_database()").Scan(&who, &db); err != nil {
		t.Fatal(err)
	}
	if who != role || db != current(t, direct) {
		t.Fatalf("through the pooler: session_user %s on %s, want %s on %s", who, db, role, current(t, direct))
	}
	var pid int
	if err := pooled.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	// A second client of the same role takes the backend the first let go:
	// in transaction mode a backend is held only for a transaction.
	other, err := pgx.Connect(t.Context(), as(role))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	var otherPid int
	if err := other.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&otherPid); err != nil {
		t.Fatal(err)
	}
	if otherPid != pid {
		t.Errorf("two clients in turn had backends %d and %d: the pooler is not in transaction mode", pid, otherPid)
	}
	if _, err := pgx.Connect(t.Context(), as("no_such_role_at_all")); err == nil {
		t.Error("the pooler let in a role the server does not have")
	}
}
