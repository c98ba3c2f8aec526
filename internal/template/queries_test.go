package template

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/itchyny/gojq"
)

// A condition asked again is not parsed or compiled again: what a run of
// it allocates, once warm, is well under what parsing and compiling it
// alone does (a policy's conditions are asked for every call).
func TestConditionCompiledOnce(t *testing.T) {
	const cond = `.args.name == "git" and any(.args.argv[1:][]; . == null or IN("push", "send-email", "-c") or startswith("--exec-path"))`
	in := Input{Args: json.RawMessage(`{"name":"git","argv":["git","push","origin"]}`)}
	if ok, err := True(cond, in); err != nil || !ok {
		t.Fatalf("True = %v, %v", ok, err)
	}
	asked := testing.AllocsPerRun(20, func() {
		if ok, err := True(cond, in); err != nil || !ok {
			t.Fatalf("True = %v, %v", ok, err)
		}
	})
	built := testing.AllocsPerRun(20, func() {
		q, err := gojq.Parse(cond)
		if err == nil {
			_, err = gojq.Compile(q)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	if asked*2 > built {
		t.Errorf("asking a condition again allocates %.0f times, parsing and compiling it %.0f: is it compiled each time?", asked, built)
	}
}

// An expression that does not parse or compile is an error each time it
// is asked, in the same words.
func TestBadConditionsStayErrors(t *testing.T) {
	for _, cond := range []string{`.args[`, `nosuchfunction(1)`} {
		var first string
		for i := range 2 {
			_, err := True(cond, Input{Args: json.RawMessage(`{}`)})
			if !errors.Is(err, ErrTemplate) {
				t.Fatalf("%s, ask %d: %v", cond, i+1, err)
			}
			if i == 0 {
				first = err.Error()
			} else if err.Error() != first {
				t.Errorf("%s: %q, then %q", cond, first, err)
			}
		}
	}
}
