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
// looks like another, a space that is not one). A side longer than
// apartLong is cut to where the two first differ, a little before and
// after it (two alike, to their start), "..." outside the quotes where
// cut: a problem stays a line that reads, whatever a reason, an error or
// an argument holds.
func Apart(a, b string) (string, string) {
	var cutA, cutB [2]bool
	if a == b && len(a) > apartLong { // nothing to tell apart in it: its start
		a, cutA = window(a, 0, 0)
		b, cutB = a, cutA
	} else if len(a) > apartLong || len(b) > apartLong {
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		from := max(0, i-apartBefore)
		for from > 0 && !utf8.RuneStart(a[from]) { // a[:i] and b[:i] agree: one start for both
			from--
		}
		a, cutA = window(a, from, i)
		b, cutB = window(b, from, i)
	}
	quote := strconv.Quote
	if a != b && (!isASCII(a) || !isASCII(b)) {
		quote = strconv.QuoteToASCII
	}
	return marked(quote(a), cutA), marked(quote(b), cutB)
}

// How much of a long side Apart shows: apartBefore bytes before where the
// sides first differ, up to apartLong in all.
const (
	apartLong   = 96
	apartBefore = 24
)

// window is s from byte from, up to apartLong bytes and past differ,
// ending on a character's start; cut says whether it left out a start or
// an end.
func window(s string, from, differ int) (string, [2]bool) {
	end := min(len(s), from+apartLong)
	for end < len(s) && end > differ+1 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[from:end], [2]bool{from > 0, end < len(s)}
}

func marked(quoted string, cut [2]bool) string {
	if cut[0] {
		quoted = "..." + quoted
	}
	if cut[1] {
		quoted += "..."
	}
	return quoted
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
