package logstore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/undolog/undolog/conformance"
	"github.com/undolog/undolog/logstore"
)

// The bbolt log keeps every rule of the suite.
func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T, now func() time.Time) logstore.Log {
		s := logstore.New(filepath.Join(t.TempDir(), "state", "undolog.db"), logstore.Options{LockTimeout: 2 * time.Second, Now: now})
		t.Cleanup(s.Pause) // the committer lets the log go before the directory goes
		return s
	})
}
