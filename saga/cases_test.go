package saga

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/template"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/mcpclient"
	"github.com/undolog/undolog/model"
)

func casesOf(t *testing.T, cs ...template.Case) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(template.Cases{Cases: cs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dirTools records the directory undo started the upstream in, and the calls.
type dirTools struct {
	dirs  []string
	calls []string
}

func (d *dirTools) dial(_ context.Context, _ []string, dir string) (ToolCaller, error) {
	d.dirs = append(d.dirs, dir)
	return (*dirCaller)(d), nil
}

type dirCaller dirTools

func (d *dirCaller) CallTool(_ context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	d.calls = append(d.calls, name+" "+string(args))
	return json.RawMessage(`{}`), nil
}
func (*dirCaller) Close() error { return nil }

// TestCasesCompensation: undo takes the case an effect's capture selects,
// runs a command case in the recorded directory with exact bytes on its
// standard input, calls an mcp case on the upstream started where it ran,
// and a skip case runs nothing.
func TestCasesCompensation(t *testing.T) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	work := t.TempDir()
	if _, err := store.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Upstream: []string{"srv", "rel/dir"}, UpstreamDir: work}); err != nil {
		t.Fatal(err)
	}
	cases := casesOf(t,
		template.Case{When: ".capture.isError", Run: []string{"rm", "-f", "--", "{{ .args.path }}"}},
		template.Case{When: ".args.mode == \"bytes\"", Run: []string{"sh", "-c", `cat > "$1"`, "sh", "{{ .args.path }}"},
			StdinBase64: "{{ .capture.content[0].resource.blob }}"},
		template.Case{When: ".args.mode == \"same\"", Skip: "it was there already"},
		template.Case{Tool: "write_file", Args: json.RawMessage(`{"path":"{{ .args.path }}","content":"{{ .capture.content[0].text }}"}`)},
	)
	bin := []byte{0xff, 0x00, 'a', 0x80, '\n', 0xfe}
	if err := os.WriteFile(filepath.Join(work, "new.txt"), []byte("made by the call"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "bin"), []byte("overwritten"), 0o600); err != nil {
		t.Fatal(err)
	}
	committed(t, store, "p", &model.Compensation{Kind: model.CompensationCases, Args: cases, Dir: work,
		Capture: json.RawMessage(`{"isError":true,"content":[{"type":"text","text":"ENOENT"}]}`)}, `{"path":"new.txt"}`)
	committed(t, store, "p", &model.Compensation{Kind: model.CompensationCases, Args: cases, Dir: work,
		Capture: json.RawMessage(`{"content":[{"type":"resource","resource":{"blob":"/wBhgAr+"}}]}`)}, `{"path":"bin","mode":"bytes"}`)
	committed(t, store, "p", &model.Compensation{Kind: model.CompensationCases, Args: cases, Dir: work,
		Capture: json.RawMessage(`{"content":[{"type":"text","text":"x"}]}`)}, `{"path":"same","mode":"same"}`)
	committed(t, store, "p", &model.Compensation{Kind: model.CompensationCases, Args: cases, Dir: work,
		Capture: json.RawMessage(`{"content":[{"type":"text","text":"old text"}]}`)}, `{"path":"t.txt"}`)

	plan, err := MakePlan(t.Context(), store, "p")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`mcp write_file {"content":"old text","path":"t.txt"}`, "nothing to undo: it was there already",
		`sh -c 'cat > "$1"' sh bin < (6 bytes)`, "rm -f -- new.txt"}
	for i, s := range plan.Steps {
		if s.Call != want[i] || s.Problem != "" {
			t.Errorf("step %d: %q (%s), want %q", i, s.Call, s.Problem, want[i])
		}
	}
	tools := &dirTools{}
	var progress bytes.Buffer
	res, err := (&Runner{Log: store, Actor: "test", StartServer: tools.dial, Progress: &progress}).Run(t.Context(), "p")
	if err != nil || res.State != "compensated" {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(work, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("new.txt not removed: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(work, "bin")); !bytes.Equal(got, bin) {
		t.Errorf("bin holds %q, want %q", got, bin)
	}
	if fi, _ := os.Stat(filepath.Join(work, "bin")); fi.Mode().Perm() != 0o600 {
		t.Errorf("bin's mode is %v", fi.Mode())
	}
	if len(tools.dirs) != 1 || tools.dirs[0] != work || len(tools.calls) != 1 || tools.calls[0] != `write_file {"content":"old text","path":"t.txt"}` {
		t.Errorf("dials %v calls %v", tools.dirs, tools.calls)
	}
	if !bytes.Contains(progress.Bytes(), []byte("nothing to undo: it was there already")) {
		t.Errorf("progress: %s", progress.Bytes())
	}
}

// noAnswerCaller sends each call and gets no answer (the connection ends).
type noAnswerCaller struct {
	calls      int
	unreadable bool // an answer came that says neither success nor failure
}

func (n *noAnswerCaller) CallTool(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	n.calls++
	if n.unreadable {
		return nil, fmt.Errorf("delete: %w: null", mcpclient.ErrUnreadableAnswer)
	}
	return nil, fmt.Errorf("delete: %w (the MCP server closed the connection)", mcpclient.ErrNoAnswer)
}
func (*noAnswerCaller) Close() error { return nil }

// TestCompensationWithoutAnAnswerIsInDoubt: an mcp compensation sent that
// got no answer may have run, and compensations are not assumed
// idempotent: it is not retried, the undo stops in doubt, and it runs again
// only with RetryInDoubt.
func TestCompensationWithoutAnAnswerIsInDoubt(t *testing.T) {
	t.Run("no answer", func(t *testing.T) { compensationInDoubt(t, &noAnswerCaller{}) })
	t.Run("an answer that says neither", func(t *testing.T) { compensationInDoubt(t, &noAnswerCaller{unreadable: true}) })
}

func compensationInDoubt(t *testing.T, caller *noAnswerCaller) {
	store := logaddr.File(filepath.Join(t.TempDir(), "u.db"), logaddr.Options{})
	if _, err := store.CreateSession(t.Context(), effectlog.NewSession{ID: "p", Upstream: []string{"srv"}}); err != nil {
		t.Fatal(err)
	}
	committed(t, store, "p", &model.Compensation{Kind: model.CompensationMCP, Tool: "delete", Args: json.RawMessage(`{}`)}, `{"n":1}`)
	dial := func(context.Context, []string, string) (ToolCaller, error) { return caller, nil }
	r := &Runner{Log: store, Actor: "test", StartServer: dial, Sleep: func(context.Context, time.Duration) error { return nil }}
	if _, err := r.Run(t.Context(), "p"); !errors.Is(err, ErrInDoubt) || caller.calls != 1 {
		t.Fatalf("first undo: %v after %d calls, want in doubt after 1", err, caller.calls)
	}
	r = &Runner{Log: store, Actor: "test", StartServer: dial}
	if _, err := r.Run(t.Context(), "p"); !errors.Is(err, ErrInDoubt) || caller.calls != 1 {
		t.Fatalf("undo again: %v after %d calls, want refused in doubt", err, caller.calls)
	}
	r = &Runner{Log: store, Actor: "test", StartServer: dial, RetryInDoubt: true}
	if _, err := r.Run(t.Context(), "p"); !errors.Is(err, ErrInDoubt) || caller.calls != 2 {
		t.Fatalf("--retry-in-doubt: %v after %d calls, want one more call", err, caller.calls)
	}
}
