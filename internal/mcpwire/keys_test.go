package mcpwire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestRepeatedKey: keys encoding/json takes for one (ASCII case, ſ and s,
// K and k) or repeated, at any depth, are found with where they are;
// distinct keys, and equal strings that are values, are not.
func TestRepeatedKey(t *testing.T) {
	for msg, want := range map[string]KeyError{
		`{"name":1,"NAME":2}`:                     {Key: "NAME", Other: "name"},
		`{"a":{"argumentſ":1,"arguments":2}}`:     {Path: "a", Key: "arguments", Other: "argumentſ"},
		`{"a":[{"x":1},{"\u212a":1,"k":2}]}`:      {Path: "a.1", Key: "k", Other: "\u212a"},
		`{"p":{"_meta":{"t":1,"t":2}}}`:           {Path: "p._meta", Key: "t", Other: "t"},
		`{"i\u0064":1,"id":2}`:                    {Key: "id", Other: "id"},
		`[{"a":1},{"b":{"c":[1,{"d":1,"D":2}]}}]`: {Path: "1.b.c.1", Key: "D", Other: "d"},
	} {
		got := RepeatedKey([]byte(msg))
		if got == nil || *got != want {
			t.Errorf("%s: %+v, want %+v", msg, got, want)
		}
	}
	for _, msg := range []string{`{"a":"a","b":"A","c":{"a":1},"A1":[{"a":2}]}`, `{"s":1,"ſs":2}`, `{"i":1,"ı":2,"İ":3}`, `[]`, `"x"`} {
		if got := RepeatedKey([]byte(msg)); got != nil {
			t.Errorf("%s: %v", msg, got)
		}
	}
	if RepeatedKey([]byte(`{"a\"b":1,"a\"B":{}}`)) == nil {
		t.Error(`"a\"b" and "a\"B" are one key but for case`)
	}
}

// TestUnmarshalReadsKeysExactly: in an object read into a struct, at any
// depth of the type, a key that is a field's name but for case, or two keys
// one but for case, are refused; exact keys and unknown ones are not.
func TestUnmarshalReadsKeysExactly(t *testing.T) {
	type inner struct {
		ReadOnly bool `json:"readOnlyHint"`
	}
	type outer struct {
		Name  string  `json:"name"`
		Tools []inner `json:"tools"`
		Extra json.RawMessage
	}
	var v outer
	// What stays as it came (Extra) is not read here: its keys are its
	// reader's.
	if err := Unmarshal([]byte(`{"name":"a","tools":[{"readOnlyHint":true,"other":1}],"Extra":{"NAME":1,"name":2,"x":3,"x":4},"unknown":2}`), &v); err != nil {
		t.Fatal(err)
	}
	for msg, want := range map[string]KeyError{
		`{"NAME":"a"}`: {Key: "NAME", Other: "name", Field: true},
		`{"tools":[{"readOnlyHint":false},{"ReadOnlyHint":true}]}`: {Path: "tools.1", Key: "ReadOnlyHint", Other: "readOnlyHint", Field: true},
		`{"extra":1}`:             {Key: "extra", Other: "Extra", Field: true},
		`{"name":"a","NAME":"b"}`: {Key: "NAME", Other: "name"},
		`{"tools":[{"readOnlyHint":false,"readOnlyHint":true}]}`: {Path: "tools.0", Key: "readOnlyHint", Other: "readOnlyHint"},
	} {
		err := Unmarshal([]byte(msg), &v)
		var ke *KeyError
		if !errors.As(err, &ke) || *ke != want {
			t.Errorf("%s: %v, want %+v", msg, err, want)
		}
	}
}

// FuzzRepeatedKey: RepeatedKey finds a collision exactly when a reader of
// every object's keys finds two that strings.EqualFold (encoding/json's
// matching) takes for one.
func FuzzRepeatedKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"A":2}`, `{"s":{"ſ":1,"S":2}}`, `[{"k":1},{"\u212a":1,"K":1}]`, `{"a\"b":"x","c":["a","A"]}`, `{"ı":1,"I":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		if !json.Valid([]byte(msg)) {
			return
		}
		got := RepeatedKey([]byte(msg)) != nil
		if want := foldCollision(json.NewDecoder(strings.NewReader(msg))); got != want {
			t.Fatalf("%s: RepeatedKey says %v, a token reader %v", msg, got, want)
		}
	})
}

// foldCollision reads one value from dec and tells whether an object in it
// has two keys strings.EqualFold takes for one.
func foldCollision(dec *json.Decoder) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	switch tok {
	case json.Delim('{'):
		var keys []string
		found := false
		for dec.More() {
			k, _ := dec.Token()
			for _, other := range keys {
				if strings.EqualFold(other, k.(string)) {
					found = true
				}
			}
			keys = append(keys, k.(string))
			found = foldCollision(dec) || found
		}
		dec.Token()
		return found
	case json.Delim('['):
		found := false
		for dec.More() {
			found = foldCollision(dec) || found
		}
		dec.Token()
		return found
	}
	return false
}
