package logaddr

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
)

// A path is a log file: the first write makes it there.
func TestAPathIsALogFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	// x y://z is not a URL: a scheme has no space.
	for _, addr := range []string{filepath.Join(dir, "u.db"), dir + "/odd://name/u.db", "x y://z/u.db", "./a.b://c/u.db"} {
		log := Open(addr, Options{})
		fl, ok := log.(effectlog.FileLog)
		if !ok || fl.Path() != addr {
			t.Fatalf("%s: %T, not the log file at the path", addr, log)
		}
		if _, err := log.CreateSession(t.Context(), effectlog.NewSession{ID: "s"}); err != nil {
			t.Fatal(err)
		}
		log.Close()
		if _, err := os.Stat(addr); err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
	}
}

// An address no engine serves refuses every operation with one clear line,
// and makes nothing.
func TestAnAddressNoEngineServesIsRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, addr := range []string{"mysql://db/undolog", "file://x", "a://b", "a.b+c-d://x", "HTTP://[::1]/x"} {
		log := Open(addr, Options{})
		_, err := log.CreateSession(t.Context(), effectlog.NewSession{ID: "s"})
		if !errors.Is(err, model.ErrInvalidInput) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), addr) {
			t.Fatalf("%s: %v", addr, err)
		}
		if _, _, err := log.ListEffects(t.Context(), effectlog.EffectFilter{}); !errors.Is(err, model.ErrInvalidInput) {
			t.Fatalf("%s: a read: %v", addr, err)
		}
		if _, ok := log.(effectlog.FileLog); ok {
			t.Fatalf("%s is not a file", addr)
		}
		log.Close()
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Fatalf("made %v", entries)
	}
}

func TestShownLeavesThePasswordOut(t *testing.T) {
	for addr, want := range map[string]string{
		"/var/lib/undolog.db":                                     "/var/lib/undolog.db",
		"postgres://ci:s3cret@db.internal:5432/undolog":           "postgres://ci:xxxxx@db.internal:5432/undolog",
		"postgres://ci@db/undolog?sslmode=require":                "postgres://ci@db/undolog?sslmode=require",
		"postgresql://db/undolog?password=s3cret&sslmode=require": "postgresql://db/undolog?password=xxxxx&sslmode=require",
		"postgres://ci:s3cret@db:port/undolog":                    "postgres://... (not shown: it does not parse as a URL, and may hold a password)",
	} {
		if got := Shown(addr); got != want {
			t.Errorf("Shown(%q) = %q, want %q", addr, got, want)
		}
	}
}

// Another person reaches the same database with their own user: a hint
// names neither user nor password, and spells out what a PG* environment
// named.
func TestSharedAddressIsTheDatabaseNotTheUser(t *testing.T) {
	t.Setenv("PGHOST", "db.internal")
	t.Setenv("PGPORT", "5433")
	t.Setenv("PGDATABASE", "undolog")
	t.Setenv("PGUSER", "ci")
	for addr, want := range map[string]string{
		"/var/lib/undolog.db": "/var/lib/undolog.db",
		"postgres://ci:s3cret@db.example.com/undolog?sslmode=require": "postgres://db.example.com/undolog?sslmode=require",
		"postgres://": "postgres://db.internal:5433/undolog",
	} {
		if got := SharedAddress(addr); got != want {
			t.Errorf("SharedAddress(%q) = %q, want %q", addr, got, want)
		}
	}
}
