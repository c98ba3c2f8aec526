package pgstore_test

import (
	"testing"
	"time"

	"github.com/undolog/undolog/conformance"
	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/storage/pgstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The PostgreSQL engine keeps every rule of the suite, each test on a
// database of its own.
func TestConformance(t *testing.T) {
	server := pgtest.Server(t)
	conformance.Run(t, func(t *testing.T, now func() time.Time) effectlog.Log {
		engine := pgstore.New(server.NewDatabase(t))
		t.Cleanup(func() { engine.Close() })
		return effectlog.New(engine, effectlog.Options{Now: now})
	})
}

// Behind PgBouncer in transaction pooling mode the engine keeps every rule
// of the suite too, its waits listening on a direct connection. Every log
// of the random operations is a new database, so a new pool and new
// backends behind the pooler, and so is every import of the exports
// while written: they check fewer of them than direct.
func TestConformanceThroughAPooler(t *testing.T) {
	server := pgtest.Server(t)
	server.Pooler(t)
	conformance.RunWith(t, func(t *testing.T, now func() time.Time) effectlog.Log {
		engine := pgstore.New(server.NewPooledDatabase(t, true))
		t.Cleanup(func() { engine.Close() })
		return effectlog.New(engine, effectlog.Options{Now: now})
	}, conformance.Options{RandomChecks: 25, Exports: 3})
}
