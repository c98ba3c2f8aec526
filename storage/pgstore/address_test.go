package pgstore

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A log's address, as errors print it, never shows a password: in the
// user part, in the query, or in a URL that does not parse.
func TestRedactURLShowsNoPassword(t *testing.T) {
	for _, addr := range []string{
		"postgres://ci:SECRET@db/undolog",
		"postgres://ci@db/undolog?password=SECRET&sslmode=require",
		"postgres://ci:cipw%ZZSECRET@127.0.0.1:5432/undolog",
		"host=db password=SECRET dbname=undolog",
	} {
		if got := redactURL(addr); strings.Contains(got, "SECRET") {
			t.Errorf("redactURL(%q) = %q", addr, got)
		}
	}
	if got := redactURL("postgres://ci@db/undolog?sslmode=require"); got != "postgres://ci@db/undolog?sslmode=require" {
		t.Errorf("an address without a password changed: %q", got)
	}
}

// The server a PG* environment names is written out as a URL that parses
// back to it: a socket directory in the query, where a URL holds one.
func TestAnEnvironmentsServerIsAURL(t *testing.T) {
	for _, c := range []struct{ host, want, shared string }{
		{"/run/postgresql", "postgres://alice@/db?host=%2Frun%2Fpostgresql&port=5433 (from the PG* environment)", "postgres:///db?host=%2Frun%2Fpostgresql&port=5433"},
		{"db.internal", "postgres://alice@db.internal:5433/db (from the PG* environment)", "postgres://db.internal:5433/db"},
	} {
		t.Setenv("PGHOST", c.host)
		t.Setenv("PGPORT", "5433")
		t.Setenv("PGUSER", "alice")
		t.Setenv("PGDATABASE", "db")
		if got := Redacted("postgres://"); got != c.want {
			t.Errorf("PGHOST=%s: Redacted = %q, want %q", c.host, got, c.want)
		}
		shared := SharedAddress("postgres://")
		if shared != c.shared {
			t.Errorf("PGHOST=%s: SharedAddress = %q, want %q", c.host, shared, c.shared)
		}
		t.Setenv("PGHOST", "elsewhere")
		if cfg, err := pgconn.ParseConfig(shared); err != nil || cfg.Host != c.host || cfg.Port != 5433 || cfg.Database != "db" {
			t.Errorf("PGHOST=%s: %q parses to %+v, %v", c.host, shared, cfg, err)
		}
	}
}
