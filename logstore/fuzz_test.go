package logstore

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	sm "github.com/undolog/undolog/statemachine"
)

// FuzzOpenLog opens arbitrary bytes, and mutations of a real log, as a log:
// every operation returns a result or a clear error, never a panic.
func FuzzOpenLog(f *testing.F) {
	dir := f.TempDir()
	s := New(filepath.Join(dir, "seed.db"), Options{})
	for i := 0; i < 20; i++ {
		res, err := s.Intercept(InterceptRequest{Session: "s", Tool: "t", Tier: sm.Compensable, CreateSession: true, Args: json.RawMessage(`{"i":` + string(rune('0'+i%10)) + `}`), Key: string(rune('a' + i))})
		if err != nil {
			f.Fatal(err)
		}
		s.Start(res.Effect.ID, Change{})
	}
	seed, err := os.ReadFile(s.Path())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("not a log at all"))
	f.Add(seed[:len(seed)/3])
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "fuzz.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		st := New(path, Options{LockTimeout: 200 * time.Millisecond})
		check := func(what string, err error) {
			if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerSchema) && !errors.Is(err, ErrNotFound) &&
				!errors.Is(err, sm.ErrInvalidStateTransition) {
				t.Logf("%s: %v", what, err) // other clear errors are fine; a panic is not
			}
		}
		_, _, err := st.ListEffects(EffectFilter{})
		check("list", err)
		_, err = st.GetEffect(1)
		check("get", err)
		_, err = st.Verify()
		check("verify", err)
		_, err = st.PendingApprovals("")
		check("approvals", err)
		_, err = st.Intercept(InterceptRequest{Session: "s", Tool: "t", Tier: sm.Compensable, CreateSession: true})
		check("intercept", err)
	})
}
