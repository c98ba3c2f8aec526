package template

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestEval(t *testing.T) {
	in := Input{
		Args:    json.RawMessage(`{"entities":[{"name":"a"},{"name":"b"}],"relations":[{"from":"a","to":"b"}]}`),
		Result:  json.RawMessage(`{"structuredContent":{"results":[{"entityName":"a","addedObservations":["x"]}]}}`),
		Capture: json.RawMessage(`{"v":7}`),
	}
	cases := map[string]string{
		`{"entityNames":"{{ .args.entities | map(.name) }}"}`:                                                           `{"entityNames":["a","b"]}`,
		`{"relations":"{{.args.relations}}","fixed":1}`:                                                                 `{"fixed":1,"relations":[{"from":"a","to":"b"}]}`,
		`{"deletions":"{{ .result.structuredContent.results | map({entityName, observations: .addedObservations}) }}"}`: `{"deletions":[{"entityName":"a","observations":["x"]}]}`,
		`{"note":"restore to {{ .capture.v }} from {{ .args.entities[0].name }}"}`:                                      `{"note":"restore to 7 from a"}`,
		`["{{ .capture }}", "plain"]`:                                                                                   `[{"v":7},"plain"]`,
	}
	for tmpl, want := range cases {
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
}

func TestErrors(t *testing.T) {
	for _, tmpl := range []string{`{"a":"{{ .args | }}"}`, `{"a":`} {
		if err := Check(json.RawMessage(tmpl)); !errors.Is(err, ErrTemplate) {
			t.Errorf("Check(%s): %v", tmpl, err)
		}
	}
	if _, err := Eval(json.RawMessage(`{"a":"{{ .args.x | error(\"boom\") }}"}`), Input{Args: json.RawMessage(`{"x":1}`)}); !errors.Is(err, ErrTemplate) {
		t.Errorf("runtime error: %v", err)
	}
	if _, err := Eval(json.RawMessage(`{"a":"{{ empty }}"}`), Input{}); !errors.Is(err, ErrTemplate) {
		t.Errorf("no value: %v", err)
	}
}
