package template

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// "}}" inside a jq expression belongs to it: an object literal, a string.
func TestBracesInsideExpressions(t *testing.T) {
	in := Input{Args: json.RawMessage(`{"path":"/a/b","n":2}`)}
	for tmpl, want := range map[string]string{
		`{"x":"{{ {p: {q: .args.path}} }}"}`:                            `{"x":{"p":{"q":"/a/b"}}}`,
		`{"x":"{{ {p: .args.n}}}"}`:                                     `{"x":{"p":2}}`,
		`{"x":"{{ \"}}\" }}"}`:                                          `{"x":"}}"}`,
		`{"x":"at {{ .args.path }} and {{ .args.n }}}"}`:                `{"x":"at /a/b and 2}"}`,
		`{"x":"{{ [.args | to_entries[] | {(.key): .value}] | add }}"}`: `{"x":{"n":2,"path":"/a/b"}}`,
	} {
		if err := Check(json.RawMessage(tmpl)); err != nil {
			t.Fatalf("%s: %v", tmpl, err)
		}
		got, err := Eval(json.RawMessage(tmpl), in)
		if err != nil {
			t.Fatalf("%s: %v", tmpl, err)
		}
		if string(got) != want {
			t.Errorf("%s:\n got  %s\n want %s", tmpl, got, want)
		}
	}
	for _, bad := range []string{`{"x":"{{ .args.path "}`, `{"x":"{{ .args[ }}"}`} {
		if err := Check(json.RawMessage(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestChooseACase(t *testing.T) {
	cs := Cases{Cases: []Case{
		{When: `.capture.isError`, Run: []string{"rm", "-f", "--", "{{ .args.path }}"}},
		{When: `{{ .args.mode == "bin" }}`, Run: []string{"sh", "-c", `cat > "$1"`, "sh", "{{ .args.path }}"}, StdinBase64: "{{ .capture.content[0].data }}"},
		{When: `.args.dirs`, Run: []string{"rmdir", "--", "{{ .args.dirs[] }}"}},
		{When: `.args.p`, Run: []string{"touch", "{{ .args.p }}"}},
		{Tool: "write_file", Args: json.RawMessage(`{"path":"{{ .args.path }}","content":"{{ .capture.content[0].text }}"}`)},
	}}
	if err := cs.Check(); err != nil {
		t.Fatal(err)
	}
	got, err := cs.Choose(Input{Args: json.RawMessage(`{"path":"/x y"}`), Capture: json.RawMessage(`{"isError":true}`)})
	if err != nil || got.Kind() != "command" || strings.Join(got.Argv, "|") != "rm|-f|--|/x y" || got.Index != 0 {
		t.Fatalf("%+v %v", got, err)
	}
	// Bytes no text holds come back exactly.
	bin := []byte{0, 0xff, 0xfe, '\n', 0x80}
	got, err = cs.Choose(Input{Args: json.RawMessage(`{"path":"p","mode":"bin"}`), Capture: json.RawMessage(`{"content":[{"data":"AP/+CoA="}]}`)})
	if err != nil || !bytes.Equal(got.Stdin, bin) || got.Index != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	got, err = cs.Choose(Input{Args: json.RawMessage(`{"dirs":["a/b","a"]}`)})
	if err != nil || strings.Join(got.Argv, "|") != "rmdir|--|a/b|a" {
		t.Fatalf("%+v %v", got, err)
	}
	// An array where the policy wrote one argument is an error: the agent
	// would choose options and targets (touch -d DATE victim).
	if got, err = cs.Choose(Input{Args: json.RawMessage(`{"p":["-d","2001-01-01","victim"]}`)}); err == nil || !strings.Contains(err.Error(), `write "{{ .args.p[] }}"`) {
		t.Fatalf("an array for one argument: %+v %v", got, err)
	}
	got, err = cs.Choose(Input{Args: json.RawMessage(`{"path":"p"}`), Capture: json.RawMessage(`{"content":[{"text":"old"}]}`)})
	if err != nil || got.Kind() != "mcp" || string(got.Args) != `{"content":"old","path":"p"}` {
		t.Fatalf("%+v %v", got, err)
	}
	// No case for the call: an error, never a silent nothing.
	only := Cases{Cases: []Case{{When: "false", Skip: "never"}}}
	if _, err := only.Choose(Input{}); err == nil {
		t.Fatal("no case matched, and no error")
	}
}

func TestCaseChecks(t *testing.T) {
	for _, c := range []Case{
		{},
		{Tool: "t", Skip: "x"},
		{Run: []string{"rm"}, Args: json.RawMessage(`{}`)},
		{Skip: "x", Stdin: "y"},
		{When: ".a[", Skip: "x"},
		{Run: []string{"{{ .a[ }}"}},
		{Run: []string{"cat"}, Stdin: "a", StdinBase64: "b"},
	} {
		if err := (Cases{Cases: []Case{c}}).Check(); err == nil {
			t.Errorf("%+v: accepted", c)
		}
	}
}

func TestTrue(t *testing.T) {
	in := Input{Args: json.RawMessage(`{"dryRun":true,"n":0}`)}
	for expr, want := range map[string]bool{".args.dryRun": true, ".args.missing": false, ".args.n": true, "{{ .args.dryRun == false }}": false} {
		if got, err := True(expr, in); err != nil || got != want {
			t.Errorf("%s: %v %v", expr, got, err)
		}
	}
}
