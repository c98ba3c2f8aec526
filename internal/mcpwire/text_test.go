package mcpwire

import "testing"

func TestTextReadTwoWays(t *testing.T) {
	for msg, want := range map[string]int{
		`{"a":"x"}`:                 -1,
		`{"a":"\ud800"}`:            -1, // an escape: the log keeps it as sent
		"{\"a\":\"\xe2\x82\"}":      6,
		"{\"a\xff\":1}":             3,
		"{\"a\":\"\xef\xbf\xbd\"}":  -1, // U+FFFD itself
		"{\"a\":\"é\xed\xa0\x80\"}": 8,  // a surrogate encoded in UTF-8
	} {
		e := TextReadTwoWays([]byte(msg))
		got := -1
		if e != nil {
			got = e.Offset
		}
		if got != want {
			t.Errorf("%q: at %d (%v), want %d", msg, got, e, want)
		}
	}
}
