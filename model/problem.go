package model

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Problem is one inconsistency verify found: in a record, a history, an
// index, a count.
type Problem struct {
	Kind    string `json:"kind"`
	Effect  uint64 `json:"effect,omitempty"`
	Session string `json:"session,omitempty"`
	Detail  string `json:"detail"`
}

func (p Problem) String() string {
	where := ""
	switch {
	case p.Effect != 0:
		where = fmt.Sprintf("effect %d: ", p.Effect)
	case p.Session != "":
		where = fmt.Sprintf("session %s: ", p.Session)
	}
	return fmt.Sprintf("%s: %s%s", p.Kind, where, p.Detail)
}

// Apart renders the two sides of a disagreement a Problem states so that,
// when they differ, they read apart: each quoted as Go quotes a string (a
// trailing space, a control character, a stray byte shows), and with every
// character outside ASCII escaped when either side has one (a letter that
// looks like another, a space that is not one).
func Apart(a, b string) (string, string) {
	if a != b && (!isASCII(a) || !isASCII(b)) {
		return strconv.QuoteToASCII(a), strconv.QuoteToASCII(b)
	}
	return strconv.Quote(a), strconv.Quote(b)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
