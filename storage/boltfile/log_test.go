package boltfile

import (
	"time"

	"github.com/undolog/undolog/effectlog"
)

// testOptions are the options of a test's log: the engine's and the rules'.
type testOptions struct {
	LockTimeout time.Duration
	Now         func() time.Time
}

// testLog is the effect log over an Engine, with the engine's own methods
// at hand.
type testLog struct {
	effectlog.Log
	*Engine
}

func newTestLog(path string, o testOptions) *testLog {
	e := New(path, Options{LockTimeout: o.LockTimeout})
	return &testLog{Log: effectlog.New(e, effectlog.Options{Now: o.Now}), Engine: e}
}

func (l *testLog) Close() error { return l.Engine.Close() }

// The engine's own: the log's reach it through storage.Holder and Suspender.
func (l *testLog) ExpectWrite() (done func()) { return l.Engine.ExpectWrite() }
func (l *testLog) Suspend() (resume func())   { return l.Engine.Suspend() }
