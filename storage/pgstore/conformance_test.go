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
