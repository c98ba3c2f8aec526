package saga

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// TestUndoHoldsItsEnvironmentToTheSessionsState: undo starts a session's MCP
// server only where what locates its state is as the proxy had it: set to
// the same value, or unset where it was unset (the server's default state,
// told apart from nothing recorded). Else it refuses before it starts the
// server, naming the variable, and the session and its entry stay as they
// were. A session that recorded nothing (an earlier undolog's) is undone
// as before. A walk of command compensations only starts no server: it runs.
func TestUndoHoldsItsEnvironmentToTheSessionsState(t *testing.T) {
	const name = "UNDOLOG_TEST_STATE_PLACE"
	a := "/state/a"
	cases := []struct {
		name     string
		recorded model.StateEnv
		here     *string // nil: unset
		refused  string  // what the refusal says; "": it runs
	}{
		{"nothing recorded", nil, &a, ""},
		{"the same", model.StateEnv{name: &a}, &a, ""},
		{"unset both", model.StateEnv{name: nil}, nil, ""},
		{"elsewhere", model.StateEnv{name: &a}, ptr("/state/b"), name + ` is "/state/b" here but was "/state/a"`},
		{"unset here", model.StateEnv{name: &a}, nil, name + ` is unset here but was "/state/a"`},
		{"set here, unset then", model.StateEnv{name: nil}, &a, name + ` is "/state/a" here but was unset`},
		{"empty here, unset then", model.StateEnv{name: nil}, ptr(""), name + ` is "" here but was unset`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(name, "")
			if c.here == nil {
				os.Unsetenv(name)
			} else {
				os.Setenv(name, *c.here)
			}
			store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
			if _, err := store.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Upstream: []string{"mcp-server"}, UpstreamDir: t.TempDir(), UpstreamEnv: c.recorded}); err != nil {
				t.Fatal(err)
			}
			id := committed(t, store, "p", &model.Compensation{Kind: model.CompensationMCP, Tool: "delete"}, `1`)
			plan, err := MakePlan(t.Context(), store, "p")
			if err != nil {
				t.Fatal(err)
			}
			tools := &stubTools{}
			res, err := (&Runner{Log: store, Actor: "test", StartServer: tools.dial}).Run(context.Background(), "p")
			if c.refused == "" {
				if err != nil || res.State != string(sm.SessionCompensated) || len(tools.started) != 1 || plan.Steps[0].Problem != "" {
					t.Fatalf("undo: %+v %v, started %v, plan's problem %q", res, err, tools.started, plan.Steps[0].Problem)
				}
				return
			}
			if !errors.Is(err, ErrStateElsewhere) || !errors.Is(err, model.ErrInvalidInput) || !strings.Contains(err.Error(), c.refused) {
				t.Fatalf("undo: %v, want a refusal saying %q", err, c.refused)
			}
			if !strings.Contains(plan.Steps[0].Problem, c.refused) {
				t.Fatalf("the plan's problem: %q", plan.Steps[0].Problem)
			}
			if len(tools.started) != 0 {
				t.Fatalf("a refused undo started %v", tools.started)
			}
			if s, err := store.GetSession(t.Context(), "p"); err != nil || s.State != sm.SessionActive {
				t.Fatalf("the session after a refused undo: %v %v", s.State, err)
			}
			if d, err := store.GetEffect(t.Context(), id); err != nil || d.Undo.State != sm.EntryPending {
				t.Fatalf("the entry after a refused undo: %+v %v", d.Undo, err)
			}
		})
	}
	t.Run("commands only", func(t *testing.T) {
		t.Setenv(name, "/state/b")
		store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
		if _, err := store.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Upstream: []string{"mcp-server"}, UpstreamEnv: model.StateEnv{name: &a}}); err != nil {
			t.Fatal(err)
		}
		committed(t, store, "p", &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"true"}}, `1`)
		if res, err := (&Runner{Log: store, Actor: "test"}).Run(context.Background(), "p"); err != nil || res.State != string(sm.SessionCompensated) {
			t.Fatalf("undo of command compensations: %+v %v", res, err)
		}
	})
}

func ptr(s string) *string { return &s }

// TestUndoRefusesASessionMadeOnTwoStates: a proxy that joined the session
// with its server's state located otherwise (another MEMORY_FILE_PATH)
// leaves calls on two states; undo reaches one only, whatever the
// environment here, and refuses before it starts the server: the calls on
// the other state would be left as they are under "compensated".
func TestUndoRefusesASessionMadeOnTwoStates(t *testing.T) {
	const name = "UNDOLOG_TEST_STATE_PLACE"
	a, b := "/state/a", "/state/b"
	joins := []struct {
		name    string
		env     model.StateEnv
		refused string
	}{
		{"joined at b", model.StateEnv{name: &b}, name + ` was "/state/a", then "/state/b"`},
		// a server that locates no state here (a wrapper undolog does not know)
		{"joined recording none", nil, name + ` was "/state/a", then not recorded`},
	}
	for _, join := range joins {
		for label, here := range map[string]*string{"the first": &a, "the second": &b, "unset": nil} {
			testTwoStates(t, name, join.name+", here "+label, here, join.env, join.refused)
		}
	}
}

// testTwoStates: undo of a session made with name at /state/a and then
// joined with it as joined, here set to here (nil: unset).
func testTwoStates(t *testing.T, name, label string, here *string, joined model.StateEnv, refused string) {
	a := "/state/a"
	t.Run(label, func(t *testing.T) {
		if here == nil {
			os.Unsetenv(name)
		} else {
			t.Setenv(name, *here)
		}
		store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
		if _, err := store.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Upstream: []string{"mcp-server"}, UpstreamDir: "/srv", UpstreamEnv: model.StateEnv{name: &a}}); err != nil {
			t.Fatal(err)
		}
		first := committed(t, store, "p", &model.Compensation{Kind: model.CompensationMCP, Tool: "delete"}, `1`)
		if _, err := store.SetUpstreamAt(t.Context(), "p", []string{"mcp-server"}, "/srv", joined); err != nil {
			t.Fatal(err)
		}
		second := committed(t, store, "p", &model.Compensation{Kind: model.CompensationMCP, Tool: "delete"}, `2`)
		plan, err := MakePlan(t.Context(), store, "p")
		if err != nil || !strings.Contains(plan.Steps[0].Problem, refused) {
			t.Fatalf("plan: %+v %v", plan.Steps, err)
		}
		tools := &stubTools{}
		_, err = (&Runner{Log: store, Actor: "test", StartServer: tools.dial}).Run(context.Background(), "p")
		if !errors.Is(err, ErrStateElsewhere) || !strings.Contains(err.Error(), refused) || strings.Contains(err.Error(), "run undo again") {
			t.Fatalf("undo with %s here: %v, want a refusal saying %q", label, err, refused)
		}
		if len(tools.started) != 0 {
			t.Fatalf("a refused undo started %v", tools.started)
		}
		if s, err := store.GetSession(t.Context(), "p"); err != nil || s.State != sm.SessionActive {
			t.Fatalf("the session after a refused undo: %v %v", s.State, err)
		}
		for _, id := range []uint64{first, second} {
			if d, err := store.GetEffect(t.Context(), id); err != nil || d.Undo.State != sm.EntryPending {
				t.Fatalf("entry %d after a refused undo: %+v %v", id, d.Undo, err)
			}
		}
	})
}

// TestTheStateRefusalPastesTheRecordedValue: a recorded value with a
// newline or an ESC (a path may hold either) is named on the refusal's one
// line, and the "set" it says to run, pasted into a shell, sets exactly
// that value (single quotes kept the newline, and the line printed was cut
// there: it set another value, or left a quote open).
func TestTheStateRefusalPastesTheRecordedValue(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	const name = "UNDOLOG_TEST_STATE_PLACE"
	recorded := "/state/x\n\x1b[31mred 'q' \\n \u202etxt.exe"
	t.Setenv(name, "/state/b")
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	if _, err := store.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Upstream: []string{"mcp-server"}, UpstreamEnv: model.StateEnv{name: &recorded}}); err != nil {
		t.Fatal(err)
	}
	committed(t, store, "p", &model.Compensation{Kind: model.CompensationMCP, Tool: "delete"}, `1`)
	_, err = (&Runner{Log: store, Actor: "test", StartServer: (&stubTools{}).dial}).Run(context.Background(), "p")
	if !errors.Is(err, ErrStateElsewhere) {
		t.Fatal(err)
	}
	msg := err.Error()
	if strings.ContainsFunc(msg, textfmt.Unsafe) || !strings.HasSuffix(msg, "then run undo again (nothing was undone)") {
		t.Fatalf("the refusal is not one safe line: %q", msg)
	}
	_, set, _ := strings.Cut(msg, ": set ")
	set, _, _ = strings.Cut(set, "; then")
	out, err := exec.Command(bash, "-c", "export "+set+"; printf %s \"$"+name+"\"").Output()
	if err != nil || string(out) != recorded {
		t.Fatalf("pasting set %s gives %q (%v), want %q", set, out, err, recorded)
	}
}
