package model

import (
	"strings"
	"testing"
)

// Two long values that differ deep inside read apart in a short line: the
// part where they differ, "..." where cut, quoted; short ones are whole.
func TestApartCutsLongSidesWhereTheyDiffer(t *testing.T) {
	long := strings.Repeat("refund order 17 ", 4096)
	for _, c := range []struct{ a, b, wantA, wantB string }{
		{"alice", "\u0430lice", `"alice"`, `"\u0430lice"`},
		{long + "bob", long + "b\u043eb", `..."der 17 refund order 17 bob"`, `..."der 17 refund order 17 b\u043eb"`},
		{"bob" + long, "b\u043eb" + long, `"bob` + long[:93] + `"...`, `"b\u043eb` + long[:92] + `"...`},
		{long, long, `"` + long[:96] + `"...`, `"` + long[:96] + `"...`},
		{long, long + " ", `..."rder 17 refund order 17 "`, `..."rder 17 refund order 17  "`},
	} {
		a, b := Apart(c.a, c.b)
		if a != c.wantA || b != c.wantB {
			t.Errorf("Apart(%.20q..., %.20q...) = %q, %q; want %q, %q", c.a, c.b, a, b, c.wantA, c.wantB)
		}
	}
}
