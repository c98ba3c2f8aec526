package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/undolog/undolog/internal/template"
	sm "github.com/undolog/undolog/statemachine"
)

func TestPolicyLanguage(t *testing.T) {
	p, err := ParsePolicy([]byte(`
tools:
  write_file:
    capture:
      before: {tool: read_media_file, args: {path: "{{ .args.path }}"}, optional: true}
      dirs: {tool: get_file_info, args: "{{ [.args.path, (.args.path | sub(\"/[^/]*$\"; \"\"))] | map({path: .}) }}", optional: true}
    compensate:
      - when: .capture.before.isError
        run: [rm, -f, --, "{{ .args.path }}"]
      - when: '{{ .capture.before | has("content") }}'
        run: [sh, -c, 'cat > "$1"', sh, "{{ .args.path }}"]
        stdin_base64: "{{ .capture.before.content[0].resource.blob }}"
      - skip: nothing to undo
  edit_file:
    tier:
      - {when: .args.dryRun == true, tier: safe}
      - {tier: compensable}
    capture: {tool: read_text_file, args: {path: "{{ .args.path }}"}}
    compensate: {tool: write_file, args: {path: "{{ .args.path }}", content: "{{ {a: {b: .capture}} | .a.b.content[0].text }}"}}
  move_file:
    compensate: {when: "true", tool: move_file, args: {source: "{{ .args.destination }}", destination: "{{ .args.source }}"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	none := func() (bool, bool) { return false, false }
	w := p.Classify("write_file", none).Rule
	if w.Tier != sm.Compensable || len(w.Captures) != 2 || w.Captures[0].Name != "before" || !w.Captures[0].Call.Optional || w.Cases == nil || len(w.Cases.Cases) != 3 {
		t.Fatalf("%+v", w)
	}
	e := p.Classify("edit_file", none).Rule
	for args, want := range map[string]sm.Tier{`{"dryRun":true}`: sm.Safe, `{"dryRun":false}`: sm.Compensable, `{}`: sm.Compensable} {
		if got, _, err := e.TierFor(json.RawMessage(args)); err != nil || got != want {
			t.Errorf("edit_file %s: %s %v", args, got, err)
		}
	}
	if e.Compensate == nil || e.Capture == nil || e.Capture.Optional {
		t.Fatalf("%+v", e)
	}
	if m := p.Classify("move_file", none).Rule; m.Cases == nil || m.Cases.Cases[0].Tool != "move_file" || m.Tier != sm.Compensable {
		t.Fatalf("%+v", m)
	}
}

func TestBadPolicyLanguage(t *testing.T) {
	for bad, why := range map[string]string{
		"tools:\n  x: {compensate: {tool: y, optinal: true}}":                                        `unknown key "optinal"`,
		"tools:\n  x: {tier: compensable, retry: 3}":                                                 `unknown key "retry"`,
		"tools:\n  x: {tier: [{when: .a, tier: safe}]}":                                              "the last tier case is the default",
		"tools:\n  x: {tier: [{tier: safe}, {tier: compensable}]}":                                   "only the last tier case",
		"tools:\n  x: {tier: [{when: '.a[', tier: safe}, {tier: compensable}]}":                      "when",
		"tools:\n  x: {tier: [{when: .a, tier: safe}, {tier: irreversible}], compensate: {tool: y}}": "for compensable tools",
		"tools:\n  x: {compensate: [{when: .a}]}":                                                    "exactly one of tool, run and skip",
		"tools:\n  x: {compensate: [{run: [rm], tool: y}]}":                                          "exactly one of tool, run and skip",
		"tools:\n  x: {compensate: [{skip: x, stdin: y}]}":                                           "stdin is for a run",
		"tools:\n  x: {compensate: [{run: [rm], args: {}}]}":                                         "args are for a tool",
		"tools:\n  x: {compensate: [{run: ['{{ .a[ }}']}]}":                                          "template",
		"tools:\n  x: {compensate: {run: [rm]}, capture: {a: {args: {}}}}":                           "needs a tool",
		"tools:\n  x: {compensate: {run: [rm]}, capture: [1]}":                                       "capture is a call",
		"tools:\n  x: {compensate: {tool: y, args: {a: \"{{ {b: 1} \"}}}":                            "no }}",
	} {
		_, err := ParsePolicy([]byte(bad))
		if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), why) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v (want %q)", bad, err, why)
		}
	}
}

// The shipped policies parse.
func TestShippedPolicies(t *testing.T) {
	for _, f := range []string{"../examples/memory-policy.yaml", "../examples/filesystem-policy.yaml"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPolicy(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// The filesystem policy's conditions: relative paths and paths not in
// normal form are irreversible, a dry run safe; create_directory removes
// exactly the directories that did not exist.
func TestFilesystemPolicyRules(t *testing.T) {
	p, err := LoadPolicy("../examples/filesystem-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	none := func() (bool, bool) { return false, false }
	for _, c := range []struct {
		tool, args string
		want       sm.Tier
	}{
		{"write_file", `{"path":"/s/a.txt"}`, sm.Compensable},
		{"write_file", `{"path":"/s/.hidden"}`, sm.Compensable},
		{"write_file", `{"path":"a.txt"}`, sm.Irreversible},
		{"write_file", `{"path":"~/a.txt"}`, sm.Irreversible},
		{"write_file", `{"path":"/s/x/../a.txt"}`, sm.Irreversible},
		{"write_file", `{"path":"/s/./a.txt"}`, sm.Irreversible},
		{"write_file", `{"path":"/s//a.txt"}`, sm.Irreversible},
		{"write_file", `{"path":"/s/old.txt/"}`, sm.Irreversible},
		{"edit_file", `{"path":"/s/old.txt/","dryRun":false}`, sm.Irreversible},
		// The server may map a name onto another Unicode form of one that
		// exists (NFD "cafe\u0301" onto "café"): not what undo would remove.
		{"write_file", `{"path":"/s/cafe\u0301/a.txt"}`, sm.Irreversible},
		{"edit_file", `{"path":"/s/café.txt","dryRun":false}`, sm.Irreversible},
		{"create_directory", `{"path":"/s/né/"}`, sm.Irreversible},
		{"edit_file", `{"path":"a.txt","dryRun":true}`, sm.Safe},
		{"edit_file", `{"path":"/s/a.txt","dryRun":false}`, sm.Compensable},
		{"create_directory", `{"path":"/s/n1/n2/"}`, sm.Compensable},
		{"move_file", `{"source":"a","destination":"b"}`, sm.Compensable},
		{"read_text_file", `{"path":"a"}`, sm.Safe},
	} {
		cls, err := p.Classify(c.tool, none).ForArgs(json.RawMessage(c.args))
		if err != nil || cls.Tier != c.want {
			t.Errorf("%s %s: %s %v, want %s", c.tool, c.args, cls.Tier, err, c.want)
		}
	}
	r := p.Classify("create_directory", none).Rule
	capArgs, err := template.Eval(r.Capture.Args, template.Input{Args: json.RawMessage(`{"path":"/s/n1/n2/n3/"}`)})
	if err != nil || string(capArgs) != `[{"path":"/s/n1/n2/n3"},{"path":"/s/n1/n2"},{"path":"/s/n1"},{"path":"/s"}]` {
		t.Fatalf("capture args %s %v", capArgs, err)
	}
	enoent := `{"isError":true,"content":[{"type":"text","text":"ENOENT: no such file or directory, stat"}]}`
	exists := `{"content":[{"type":"text","text":"isDirectory: true"}]}`
	for capture, want := range map[string]string{
		"[" + enoent + "," + enoent + "," + exists + "," + exists + "]": "rmdir -- /s/n1/n2/n3 /s/n1/n2",
		"[" + enoent + "," + exists + "," + enoent + "," + exists + "]": "rmdir -- /s/n1/n2/n3",
		"[" + exists + "," + exists + "," + exists + "," + exists + "]": "skip the directory existed",
	} {
		ch, err := r.Cases.Choose(template.Input{Args: json.RawMessage(`{"path":"/s/n1/n2/n3/"}`), Capture: json.RawMessage(capture)})
		got := strings.Join(ch.Argv, " ")
		if ch.Kind() == "skip" {
			got = "skip " + ch.Skip
		}
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", capture, got, err, want)
		}
	}
}

// TestDocsCreateDirectoryIsTheShippedOne: docs/policy.md's create_directory
// example captures and compensates as the shipped filesystem policy does (a
// copy that drifted failed at undo).
func TestDocsCreateDirectoryIsTheShippedOne(t *testing.T) {
	doc, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, b := range strings.Split(string(doc), "```yaml\n")[1:] {
		if b, _, _ = strings.Cut(b, "```"); strings.HasPrefix(b, "  create_directory:\n") {
			block = b
		}
	}
	if block == "" {
		t.Fatal("docs/policy.md has no create_directory example")
	}
	file := filepath.Join(t.TempDir(), "doc.yaml")
	os.WriteFile(file, []byte("tools:\n"+block), 0o644)
	fromDoc, err := LoadPolicy(file)
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := LoadPolicy("../examples/filesystem-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	none := func() (bool, bool) { return false, false }
	d, s := fromDoc.Classify("create_directory", none).Rule, shipped.Classify("create_directory", none).Rule
	if !reflect.DeepEqual(d.Capture, s.Capture) || !reflect.DeepEqual(d.Cases, s.Cases) {
		t.Fatalf("docs/policy.md's create_directory is not the shipped one:\n%+v %+v\n%+v %+v", d.Capture, d.Cases, s.Capture, s.Cases)
	}
}
