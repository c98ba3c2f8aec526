package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage/pgstore"
)

// direct is the URL of a fresh database of the shared server, on the
// server itself whatever NewDatabase hands out.
func direct(t *testing.T) string {
	t.Helper()
	return onServer(t, pgtest.Server(t).NewDatabase(t))
}

// onServer is the superuser's URL of the database of a URL NewDatabase
// handed out, on the server itself.
func onServer(t testing.TB, db string) string {
	t.Helper()
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := url.Parse(pgtest.Server(t).AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	admin.Path = u.Path
	return admin.String()
}

// listenersOn counts the listening connections of undolog on database url.
func listenersOn(t *testing.T, url string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.Server(t).AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = $2`, pgstore.ListenName, strings.TrimPrefix(mustParse(t, url).Path, "/")).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Behind a pooler in transaction mode, a wait is woken by a write another
// process commits: without a listening connection (none is on the server)
// within a few of the poll's intervals, and with one of its own on the
// server (undolog_listen_host) as on the server directly.
func TestWaitsBehindATransactionPooler(t *testing.T) {
	for _, listen := range []bool{false, true} {
		name := "polling"
		if listen {
			name = "listening direct"
		}
		t.Run(name, func(t *testing.T) {
			db := direct(t)
			url := pgtest.Server(t).Pooler(t).URL(db, listen)
			writer, waiter, before := writtenAndListening(t, url, "first")
			if n := listenersOn(t, db); listen != (n == 1) {
				t.Fatalf("%d listening connections on the server", n)
			}
			woken := waitChange(t, waiter, before)
			select {
			case err := <-woken:
				t.Fatalf("woken (%v) before any write", err)
			case <-time.After(300 * time.Millisecond):
			}
			began := time.Now()
			if err := intercept(t, writer, "second"); err != nil {
				t.Fatal(err)
			}
			if err := <-woken; err != nil {
				t.Fatalf("the wait ended with %v, not woken", err)
			}
			t.Logf("woken %v after the write began", time.Since(began))
		})
	}
}

// A URL of a pooler in transaction mode may not set what the pooler would
// drop or leave on a backend others share, and undolog's parameters are
// checked: each is refused as bad input, before any connection.
func TestPoolerParametersAreChecked(t *testing.T) {
	for _, q := range []string{
		"undolog_pooler=statement",
		"undolog_listen_host=/tmp",
		"undolog_pooler=transaction&undolog_listen_port=5432",
		"undolog_pooler=transaction&undolog_listen_host=db&undolog_listen_port=http",
		"undolog_pooler=transaction&search_path=elsewhere",
		"undolog_pooler=transaction&options=-c%20statement_timeout%3D5000",
		"undolog_pooler=session&undolog_listen_host=db",
	} {
		e := pgstore.New("postgres://nobody@127.0.0.1:1/db?connect_timeout=1&" + q)
		err := e.Update(t.Context(), nil)
		e.Close()
		if !errors.Is(err, model.ErrInvalidInput) {
			t.Errorf("%s: %v, want invalid input", q, err)
		}
	}
}
