package mcpwire

import "testing"

func TestTextReadTwoWays(t *testing.T) {
	for msg, want := range map[string]int{
		`{"a":"x"}`:                  -1,
		`{"a":"\ud83d\ude00"}`:       -1,
		`{"a":"\\ud800"}`:            -1, // a backslash, then "ud800"
		`{"a":"\"\ud800"}`:           8,
		`{"a":"x\ud800"}`:            7,
		`{"a":"\ud800\u0041"}`:       6,
		`{"a":"\udc00\ud800"}`:       6,
		`{"a":"\ud83d\ude00\ude00"}`: 18,
		`{"\uDBFF":1}`:               2,
		"{\"a\":\"\xe2\x82\"}":       6,
		"{\"a\xff\":1}":              3,
		"{\"a\":\"\xef\xbf\xbd\"}":   -1, // U+FFFD itself
		`{"a":"\ud800`:               6,
		`{"a":"é\u00e9"}`:            -1,
		`{"a":["\\","\udfff"]}`:      12,
	} {
		e := TextReadTwoWays([]byte(msg))
		got := -1
		if e != nil {
			got = e.Offset
			if e.Error() == "" {
				t.Errorf("%s: no message", msg)
			}
		}
		if got != want {
			t.Errorf("%s: at %d (%v), want %d", msg, got, e, want)
		}
	}
}
