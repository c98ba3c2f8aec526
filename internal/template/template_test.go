package template

import (
	"encoding/json"
	"errors"
	"strings"
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

// Numbers a double cannot hold reach the compensation's args as they were
// sent: from the args, the result and the template itself.
func TestEvalKeepsNumbers(t *testing.T) {
	in := Input{
		Args:   json.RawMessage(`{"to":12345678901234567891,"small":1e-400}`),
		Result: json.RawMessage(`{"id":98765432109876543210.5}`),
	}
	cases := map[string]string{
		`{"to":"{{ .args.to }}","id":"{{ .result.id }}","small":"{{ .args.small }}"}`: `{"id":98765432109876543210.5,"small":1e-400,"to":12345678901234567891}`,
		`{"note":"refund {{ .args.to }}","fixed":9007199254740993}`:                   `{"fixed":9007199254740993,"note":"refund 12345678901234567891"}`,
		`{"all":"{{ .args }}"}`:         `{"all":{"small":1e-400,"to":12345678901234567891}}`,
		`{"next":"{{ .args.to + 1 }}"}`: `{"next":12345678901234567892}`,
	}
	for tmpl, want := range cases {
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

// A lone surrogate (which the log keeps) cannot pass through jq unchanged:
// the template refuses it rather than name another string (U+FFFD); a real
// pair, an escaped backslash before "u", and text with none pass.
func TestLoneSurrogateIsRefused(t *testing.T) {
	tmpl := json.RawMessage(`{"names":"{{ .args.names }}"}`)
	for _, args := range []string{`{"names":["cut \ud83d"]}`, `{"names":["\ude00 cut"]}`, `{"names":["\uD83D\u0041"]}`} {
		if out, err := Eval(tmpl, Input{Args: json.RawMessage(args)}); !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), "lone surrogate") {
			t.Errorf("%s: %s %v", args, out, err)
		}
	}
	for args, want := range map[string]string{`{"names":["\ud83d\ude00"]}`: `{"names":["😀"]}`, `{"names":["\\ud83d"]}`: `{"names":["\\ud83d"]}`} {
		if out, err := Eval(tmpl, Input{Args: json.RawMessage(args)}); err != nil || string(out) != want {
			t.Errorf("%s: %s %v, want %s", args, out, err, want)
		}
	}
}
