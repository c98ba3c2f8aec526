package boltfile_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/undolog/undolog/conformance"
	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/storage/boltfile"
)

// The bbolt engine keeps every rule of the suite.
func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T, now func() time.Time) effectlog.Log {
		engine := boltfile.New(filepath.Join(t.TempDir(), "state", "undolog.db"), boltfile.Options{LockTimeout: 2 * time.Second})
		t.Cleanup(func() { engine.Close() }) // the committer lets the log go before the directory goes
		return effectlog.New(engine, effectlog.Options{Now: now})
	})
}
