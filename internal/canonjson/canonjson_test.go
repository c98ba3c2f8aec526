package canonjson

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// RFC 8785 section 3.2.2, the example of the whole process, with one
// deliberate difference: 333333333.33333329 is not a double, and RFC 8785
// would write the double it rounds to (333333333.3333333), a number the caller
// did not send; its exact digits are kept.
func TestRFC8785Example(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.33333329,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// RFC 8785 section 3.2.3, sorting by UTF-16 code units.
func TestRFC8785Sorting(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, part := range strings.Split(string(got), `","`) {
		_, v, _ := strings.Cut(part, `":"`)
		order = append(order, strings.Trim(v, `"}`))
	}
	want := []string{"Carriage Return", "One", "Control", "Latin Small Letter O With Diaeresis", "Euro Sign", "Emoji: Grinning Face", "Hebrew Letter Dalet With Dagesh"}
	if !reflect.DeepEqual(order, want) {
		t.Fatalf("order %q\nwant  %q\n(%s)", order, want, got)
	}
	if !strings.HasPrefix(string(got), `{"\r":"Carriage Return","1":"One","`+"\u0080"+`":"Control"`) {
		t.Fatalf("escaping of names: %s", got)
	}
}

// RFC 8785 appendix B: IEEE 754 doubles and their ECMAScript form.
func TestRFC8785Numbers(t *testing.T) {
	cases := map[string]string{
		"0000000000000000": "0",
		"8000000000000000": "0",
		"0000000000000001": "5e-324",
		"8000000000000001": "-5e-324",
		"7fefffffffffffff": "1.7976931348623157e+308",
		"ffefffffffffffff": "-1.7976931348623157e+308",
		"4340000000000000": "9007199254740992",
		"c340000000000000": "-9007199254740992",
		"4430000000000000": "295147905179352830000",
		"44b52d02c7e14af5": "9.999999999999997e+22",
		"44b52d02c7e14af6": "1e+23",
		"44b52d02c7e14af7": "1.0000000000000001e+23",
		"444b1ae4d6e2ef4e": "999999999999999700000",
		"444b1ae4d6e2ef4f": "999999999999999900000",
		"444b1ae4d6e2ef50": "1e+21",
		"3eb0c6f7a0b5ed8c": "9.999999999999997e-7",
		"3eb0c6f7a0b5ed8d": "0.000001",
		"41b3de4355555553": "333333333.3333332",
		"41b3de4355555554": "333333333.33333325",
		"41b3de4355555555": "333333333.3333333",
		"41b3de4355555556": "333333333.3333334",
		"41b3de4355555557": "333333333.33333343",
		"becbf647612f3696": "-0.0000033333333333333333",
		"43143ff3c1cb0959": "1424953923781206.2",
	}
	for h, want := range cases {
		b, _ := hex.DecodeString(h)
		f := math.Float64frombits(binary.BigEndian.Uint64(b))
		if got := FormatNumber(f); got != want {
			t.Errorf("%s: got %s want %s", h, got, want)
		}
		// The same value written as JSON text canonicalizes to the same form.
		text, _ := json.Marshal(f)
		if got, err := Canonicalize(text); err != nil || string(got) != want {
			t.Errorf("%s via text %s: got %s %v", h, text, got, err)
		}
	}
}

// Numbers keep their exact value: the RFC 8785 form where that form is the
// value sent, else the exact decimal in the same layout. Values a double
// cannot hold never collide with the double they round to.
func TestNumbersKeepTheirValue(t *testing.T) {
	cases := map[string]string{
		"12345678901234567891":  "12345678901234567891",
		"12345678901234567000":  "12345678901234567000",
		"-12345678901234567891": "-12345678901234567891",
		"9007199254740993":      "9007199254740993",
		"9007199254740992":      "9007199254740992",
		"295147905179352825856": "295147905179352825856", // 2^68, which RFC 8785 writes 295147905179352830000
		"295147905179352830000": "295147905179352830000",
		"333333333.33333329":    "333333333.33333329",
		"0.1":                   "0.1",
		"0.1000000000000000055511151231257827021181583404541015625": "0.1000000000000000055511151231257827021181583404541015625",
		"1e-400":                       "1e-400",
		"-1.50e-400":                   "-1.5e-400",
		"123456789012345678901234":     "123456789012345678901234", // an integer no double holds keeps its digits
		"1.23456789012345678901234e23": "123456789012345678901234",
		"1180591620717411303424":       "1180591620717411303424", // 2^70: RFC 8785 writes 1.1805916207174113e+21
		"1e23":                         "1e+23",                  // a double's own shortest form stays RFC 8785's
		"12345678901234567890e-20":     "0.1234567890123456789",
		"0.00000012345678901234567":    "1.2345678901234567e-7",
		"0.000000123456789012345678":   "1.23456789012345678e-7",
		"1000000000000000000000.0000":  "1e+21",
		"100000000000000000000":        "100000000000000000000",
		// Equal values share one form, as before.
		"1.0": "1", "1e2": "100", "100": "100", "1E+2": "100", "-0": "0", "-0.0e-5": "0",
		"0e99999999999999999999999": "0", "0.0000010": "0.000001", "4.50": "4.5", "2e-3": "0.002",
		"1e-99999999999999": "1e-99999999999999",
	}
	for in, want := range cases {
		got, err := Canonicalize([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("%s: got %s %v, want %s", in, got, err, want)
		}
	}
}

func TestInvalidInput(t *testing.T) {
	for _, in := range []string{
		``, `{`, `{"a":1,}`, `[1,]`, `{"a":1,"a":2}`, "\"\xff\"", "\"\xed\xa0\xbd\"", `"\ud83d\uzzzz"`,
		`01`, `1.`, `-`, `1e`, `1e999`, `-1.8e308`, `1e99999999999999999999`, `1e-99999999999999999999`, `nul`, `{"a" 1}`, `[1 2]`, `1 2`, "\"a\x01\"", `"\x"`,
		strings.Repeat("[", 2000) + strings.Repeat("]", 2000),
	} {
		if out, err := Canonicalize([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%.40q: got %s, %v; want ErrInvalid", in, out, err)
		}
	}
}

// A lone surrogate (a string cut inside an emoji) is kept as its escape, in
// one form whatever case its hex digits had, distinct from U+FFFD and from
// every other string; a real pair is still the character.
func TestLoneSurrogatesAreKept(t *testing.T) {
	cases := map[string]string{
		`"\ud83d"`:             `"\ud83d"`,
		`"\uD83D"`:             `"\ud83d"`,
		`"x\ude00y"`:           `"x\ude00y"`,
		`"\ud83d\u0041"`:       `"\ud83dA"`,
		`"\ud83d\ud83d\ude00"`: `"\ud83d😀"`,
		`"\ude00\ud83d"`:       `"\ude00\ud83d"`,
		`"\ud83d\ude00"`:       `"😀"`,
		`{"\ud83d\ude00":1,"\ud83d":2,"\ufb33":3,"a":4}`: `{"a":4,"\ud83d":2,"😀":1,"דּ":3}`,
		`{"\ud83d":1,"\ud83e":2}`:                        `{"\ud83d":1,"\ud83e":2}`,
	}
	seen := map[string]string{}
	for in, want := range cases {
		got, err := Canonicalize([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("%s: got %s %v, want %s", in, got, err, want)
			continue
		}
		if again, err := Canonicalize(got); err != nil || string(again) != want {
			t.Errorf("%s: not a fixed point: %s %v", want, again, err)
		}
		if other, dup := seen[want]; dup && !strings.EqualFold(other, in) {
			t.Errorf("%s and %s share %s", in, other, want)
		}
		seen[want] = in
	}
	for _, in := range []string{`"\ufffd"`, "\"\uFFFD\"", `"\ud83c"`} {
		if got, _ := Canonicalize([]byte(in)); string(got) == `"\ud83d"` {
			t.Errorf("%s shares the form of a lone surrogate", in)
		}
	}
	if _, err := Canonicalize([]byte(`{"\ud83d":1,"\uD83D":2}`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("one lone surrogate as two names: %v", err)
	}
}

// jsonValue generates arbitrary JSON values as Go values.
func jsonValue(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		kind := rapid.IntRange(0, 6).Draw(t, "kind")
		if depth > 3 && kind >= 5 {
			kind = 3
		}
		switch kind {
		case 0:
			return nil
		case 1:
			return rapid.Bool().Draw(t, "b")
		case 2:
			return rapid.Float64().Filter(func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }).Draw(t, "f")
		case 3:
			return rapid.String().Draw(t, "s")
		case 4:
			return float64(rapid.Int64Range(-1<<53, 1<<53).Draw(t, "i"))
		case 5:
			return rapid.SliceOfN(jsonValue(depth+1), 0, 4).Draw(t, "arr")
		default:
			return rapid.MapOfN(rapid.String(), jsonValue(depth+1), 0, 4).Draw(t, "obj")
		}
	})
}

// write serializes v with a random member order and random whitespace.
func write(t *rapid.T, v any, sb *strings.Builder) {
	ws := func() { sb.WriteString(rapid.SampledFrom([]string{"", " ", "\n\t", "  \r\n"}).Draw(t, "ws")) }
	ws()
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		perm := rapid.Permutation(keys).Draw(t, "perm")
		sb.WriteByte('{')
		for i, k := range perm {
			if i > 0 {
				sb.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			sb.Write(kb)
			ws()
			sb.WriteByte(':')
			write(t, x[k], sb)
		}
		sb.WriteByte('}')
	case []any:
		sb.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				sb.WriteByte(',')
			}
			write(t, e, sb)
		}
		sb.WriteByte(']')
	default:
		b, _ := json.Marshal(x)
		sb.Write(b)
	}
	ws()
}

func TestPropertyOrderAndSpaceNeverMatter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := jsonValue(0).Draw(t, "v")
		var a, b strings.Builder
		write(t, v, &a)
		write(t, v, &b)
		ca, err := Canonicalize([]byte(a.String()))
		if err != nil {
			t.Fatalf("%s: %v", a.String(), err)
		}
		cb, err := Canonicalize([]byte(b.String()))
		if err != nil {
			t.Fatalf("%s: %v", b.String(), err)
		}
		if string(ca) != string(cb) {
			t.Fatalf("same value, different forms:\n%s\n%s", ca, cb)
		}
		// Canonical output is valid JSON, a fixed point, and means the same value.
		again, err := Canonicalize(ca)
		if err != nil || string(again) != string(ca) {
			t.Fatalf("not a fixed point: %s -> %s %v", ca, again, err)
		}
		var back any
		if err := json.Unmarshal(ca, &back); err != nil || !reflect.DeepEqual(normalize(back), normalize(v)) {
			t.Fatalf("value changed: %s (%v)", ca, err)
		}
	})
}

func TestPropertyDifferentValuesDiffer(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v1 := jsonValue(0).Draw(t, "v1")
		v2 := jsonValue(0).Draw(t, "v2")
		b1, _ := json.Marshal(v1)
		b2, _ := json.Marshal(v2)
		c1, err1 := Canonicalize(b1)
		c2, err2 := Canonicalize(b2)
		if err1 != nil || err2 != nil {
			t.Fatalf("%v %v", err1, err2)
		}
		same := reflect.DeepEqual(normalize(v1), normalize(v2))
		if same != (string(c1) == string(c2)) {
			t.Fatalf("values equal=%v but forms %s vs %s", same, c1, c2)
		}
	})
}

// normalize maps -0 to 0 (JSON and JCS do not tell them apart).
func normalize(v any) any {
	switch x := v.(type) {
	case float64:
		if x == 0 {
			return 0.0
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = normalize(x[i])
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	}
	return v
}

// decimal is the number sign × digits × 10^exp.
type decimal struct {
	neg    bool
	digits string
	exp    int
}

func decimalGen() *rapid.Generator[decimal] {
	return rapid.Custom(func(t *rapid.T) decimal {
		return decimal{
			neg:    rapid.Bool().Draw(t, "neg"),
			digits: rapid.StringMatching(`[0-9]{1,30}`).Draw(t, "digits"),
			exp:    rapid.IntRange(-40, 40).Draw(t, "exp"),
		}
	})
}

// text writes d as one of its many JSON spellings: zeros around the digits,
// the point anywhere, an exponent or none.
func (d decimal) text(t *rapid.T) string {
	lead, trail := rapid.IntRange(0, 8).Draw(t, "lead"), rapid.IntRange(0, 8).Draw(t, "trail")
	all := strings.Repeat("0", lead) + d.digits + strings.Repeat("0", trail)
	f := rapid.IntRange(0, len(all)-1).Draw(t, "frac")
	intPart := strings.TrimLeft(all[:len(all)-f], "0")
	if intPart == "" {
		intPart = "0"
	}
	var sb strings.Builder
	if d.neg {
		sb.WriteByte('-')
	}
	sb.WriteString(intPart)
	if f > 0 {
		sb.WriteString("." + all[len(all)-f:])
	}
	if x := d.exp - trail + f; x != 0 || rapid.Bool().Draw(t, "e0") {
		sb.WriteString(rapid.SampledFrom([]string{"e", "E"}).Draw(t, "e"))
		if x >= 0 {
			sb.WriteString(rapid.SampledFrom([]string{"", "+"}).Draw(t, "plus"))
		}
		sb.WriteString(strconv.Itoa(x))
	}
	return sb.String()
}

func ratOf(t *rapid.T, text string) *big.Rat {
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		t.Fatalf("big.Rat cannot read %s", text)
	}
	return r
}

// Numbers are equal in canonical form exactly when they are equal values, and
// the canonical form is the value sent, however it was spelled.
func TestPropertyNumbersDifferExactly(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d1 := decimalGen().Draw(t, "d1")
		d2 := d1
		if rapid.Bool().Draw(t, "other") {
			d2 = decimalGen().Draw(t, "d2")
			if rapid.Bool().Draw(t, "near") { // the same digits but the last
				last := byte('0' + (d1.digits[len(d1.digits)-1]-'0'+1)%10)
				d2 = decimal{d1.neg, d1.digits[:len(d1.digits)-1] + string(last), d1.exp}
			}
		}
		t1, t2 := d1.text(t), d2.text(t)
		c1, err1 := Canonicalize([]byte(t1))
		c2, err2 := Canonicalize([]byte(t2))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v; %s: %v", t1, err1, t2, err2)
		}
		for _, pair := range [][2]string{{t1, string(c1)}, {t2, string(c2)}} {
			if ratOf(t, pair[0]).Cmp(ratOf(t, pair[1])) != 0 {
				t.Fatalf("%s canonicalized to %s, another value", pair[0], pair[1])
			}
		}
		same := ratOf(t, t1).Cmp(ratOf(t, t2)) == 0
		if same != (string(c1) == string(c2)) {
			t.Fatalf("%s and %s: equal=%v but forms %s vs %s", t1, t2, same, c1, c2)
		}
		// Where RFC 8785's form (of the nearest double) is the value sent, the
		// form is RFC 8785's.
		f, _ := strconv.ParseFloat(t1, 64)
		if rfc := FormatNumber(f); ratOf(t, rfc).Cmp(ratOf(t, t1)) == 0 && rfc != string(c1) {
			t.Fatalf("%s: RFC 8785 writes %s, got %s", t1, rfc, c1)
		}
	})
}

// sameNumbers says whether a and b (decoded with UseNumber) are the same JSON
// with the same number values.
func sameNumbers(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, _ := strconv.ParseFloat(string(x), 64)
		fy, _ := strconv.ParseFloat(string(y), 64)
		if fx != fy {
			return false
		}
		// big.Rat spells out 10^exp: compare exactly where that is cheap.
		if smallExponent(string(x)) && smallExponent(string(y)) {
			rx, _ := new(big.Rat).SetString(string(x))
			ry, _ := new(big.Rat).SetString(string(y))
			return rx != nil && ry != nil && rx.Cmp(ry) == 0
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameNumbers(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !sameNumbers(x[k], y[k]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func smallExponent(n string) bool {
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return len(n) < 2000
	}
	e, err := strconv.Atoi(n[i+1:])
	return err == nil && e > -2000 && e < 2000
}

func decodeNumbers(t *testing.T, in []byte) any {
	d := json.NewDecoder(bytes.NewReader(in))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%q: %v", in, err)
	}
	return v
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x"]}`, `1e30`, `"\u20ac"`, `{"a":{"b":{}}}`, `[]`, `-0.0`,
		`[12345678901234567891,0.10000000000000000555,1e-400,-0.00120e+5]`, `{"\ud83d":"a\ude00\ud83d\ude00"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output %q", out)
		}
		again, err := Canonicalize(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not a fixed point: %q -> %q %v", out, again, err)
		}
		// The output means what the input said, numbers to the last digit.
		if !sameNumbers(decodeNumbers(t, in), decodeNumbers(t, out)) {
			t.Fatalf("value changed: %q -> %q", in, out)
		}
	})
}
