// Package canonjson writes a JSON text in undolog's canonical form, the form
// a call's arguments are hashed in for its signature: equal calls share it,
// different calls never do. It is deliberately not RFC 8785 (JCS), though it
// follows it where it can: object members sorted by the UTF-16 code units of
// their names, no whitespace, strings with the minimal escapes, and numbers in
// ECMAScript's shortest form. Input that is not I-JSON (duplicate names,
// invalid UTF-8, numbers out of the double range) is refused rather than
// silently changed, so two different inputs never share one canonical form.
//
// It differs from RFC 8785 twice, each time so that a call an MCP server
// accepts can be recorded as it was sent.
//
// A lone surrogate escape (\ud83d, a string cut inside an emoji by a client
// counting UTF-16 units) is kept, written as the escape in lower-case hex,
// where RFC 8785 refuses it: MCP servers (JavaScript ones) accept such
// strings, so the log must be able to record such a call, and the same string
// always gets the same form. Inside the package such a string holds the
// surrogate as WTF-8 (the 3-byte form UTF-8 forbids), which raw input can
// never produce: invalid UTF-8 in the input is refused.
//
// A number keeps its exact value. Where the ECMAScript form of the nearest
// double is that value (1.0, 1e2, 4.50, every shortest form a double prints
// as), the output is RFC 8785's; where it is not (12345678901234567891,
// 0.1000000000000000055511151231257827021181583404541015625, 1e-400), the
// output is the exact decimal laid out the same way (an integer in plain
// digits, never an exponent form a JSON reader would take for a double), so
// numbers that differ never share a form and a log stores the digits that
// were sent.
package canonjson

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrInvalid is matched by every error Canonicalize returns.
var ErrInvalid = errors.New("invalid JSON")

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 1000

// Canonicalize returns the canonical form (the package comment says which)
// of the JSON text in.
func Canonicalize(in []byte) ([]byte, error) {
	p := parser{in: in}
	p.skipSpace()
	var out []byte
	out, err := p.value(out, 0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return nil, p.errorf("unexpected %q after the JSON value", p.in[p.pos])
	}
	return out, nil
}

type parser struct {
	in  []byte
	pos int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", ErrInvalid, p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(out []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, p.errorf("nesting deeper than %d", maxDepth)
	}
	if p.pos >= len(p.in) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(out, depth)
	case c == '[':
		return p.array(out, depth)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendString(out, s), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(out)
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if strings.HasPrefix(string(p.in[p.pos:min(len(p.in), p.pos+len(lit))]), lit) {
				p.pos += len(lit)
				return append(out, lit...), nil
			}
		}
		return nil, p.errorf("unexpected character %q", c)
	}
}

type member struct {
	key   string
	units []uint16
	value []byte
}

func (p *parser) object(out []byte, depth int) ([]byte, error) {
	p.pos++ // '{'
	var members []member
	seen := map[string]bool{}
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(out, "{}"...), nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return nil, p.errorf("expected a member name")
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, p.errorf("duplicate member name %q", key)
		}
		seen[key] = true
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return nil, p.errorf("expected ':' after member name")
		}
		p.pos++
		p.skipSpace()
		v, err := p.value(nil, depth+1)
		if err != nil {
			return nil, err
		}
		members = append(members, member{key: key, units: units(key), value: v})
		more, err := p.next('}', "object")
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	sort.Slice(members, func(i, j int) bool { return lessUTF16(members[i].units, members[j].units) })
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, m.key)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}'), nil
}

// writeSurrogate writes a lone surrogate code point as WTF-8.
func writeSurrogate(b *strings.Builder, r rune) {
	b.WriteByte(0xED)
	b.WriteByte(byte(0x80 | (r>>6)&0x3F))
	b.WriteByte(byte(0x80 | r&0x3F))
}

// surrogateAt returns the lone surrogate that s holds as WTF-8 at i, if any.
func surrogateAt(s string, i int) (rune, bool) {
	if i+2 < len(s) && s[i] == 0xED && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2]&0xC0 == 0x80 {
		return 0xD000 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), true
	}
	return 0, false
}

// units is the UTF-16 form of a decoded string, its lone surrogates as
// themselves: member names are sorted by it.
func units(s string) []uint16 {
	var u []uint16
	for i := 0; i < len(s); {
		if r, ok := surrogateAt(s, i); ok {
			u = append(u, uint16(r))
			i += 3
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		u = utf16.AppendRune(u, r)
		i += n
	}
	return u
}

func lessUTF16(a, b []uint16) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

func (p *parser) array(out []byte, depth int) ([]byte, error) {
	p.pos++ // '['
	out = append(out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return append(out, ']'), nil
	}
	for first := true; ; first = false {
		if !first {
			out = append(out, ',')
		}
		p.skipSpace()
		var err error
		if out, err = p.value(out, depth+1); err != nil {
			return nil, err
		}
		more, err := p.next(']', "array")
		if err != nil {
			return nil, err
		}
		if !more {
			return append(out, ']'), nil
		}
	}
}

// next reads what follows a member or an element: a comma (more to come) or
// the closing bracket of the object or array.
func (p *parser) next(closing byte, in string) (more bool, err error) {
	p.skipSpace()
	if p.pos >= len(p.in) {
		return false, p.errorf("unexpected end of input in %s", in)
	}
	switch p.in[p.pos] {
	case ',':
		p.pos++
		return true, nil
	case closing:
		p.pos++
		return false, nil
	}
	return false, p.errorf("expected ',' or '%c' in %s", closing, in)
}

// str parses a JSON string at p.pos and returns its decoded value.
func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	var b strings.Builder
	for {
		if p.pos >= len(p.in) {
			return "", p.errorf("unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return b.String(), nil
		case c == '\\':
			if p.pos+1 >= len(p.in) {
				return "", p.errorf("unterminated escape")
			}
			e := p.in[p.pos+1]
			p.pos += 2
			switch e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					if r < 0xDC00 && p.pos+6 <= len(p.in) && p.in[p.pos] == '\\' && p.in[p.pos+1] == 'u' {
						save := p.pos
						p.pos += 2
						r2, err := p.hex4()
						if err != nil {
							return "", err
						}
						if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
							b.WriteRune(pair)
							continue
						}
						p.pos = save // a high surrogate then something else: both stand alone
					}
					writeSurrogate(&b, r)
					continue
				}
				b.WriteRune(r)
			default:
				return "", p.errorf("invalid escape \\%c", e)
			}
		case c < 0x20:
			return "", p.errorf("control character 0x%02x in string", c)
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errorf("invalid UTF-8")
			}
			b.WriteString(string(p.in[p.pos : p.pos+size]))
			p.pos += size
		}
	}
}

func (p *parser) hex4() (rune, error) {
	if p.pos+4 > len(p.in) {
		return 0, p.errorf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(p.in[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, p.errorf("invalid \\u escape")
	}
	p.pos += 4
	return rune(v), nil
}

func (p *parser) number(out []byte) ([]byte, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	neg := p.in[p.pos] == '-'
	if neg {
		p.pos++
	}
	intStart := p.pos
	if n := digits(); n == 0 {
		return nil, p.errorf("invalid number")
	} else if n > 1 && p.in[intStart] == '0' {
		return nil, p.errorf("leading zero in number")
	}
	intPart, frac := string(p.in[intStart:p.pos]), ""
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		fracStart := p.pos
		if digits() == 0 {
			return nil, p.errorf("invalid number fraction")
		}
		frac = string(p.in[fracStart:p.pos])
	}
	exp := ""
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		expStart := p.pos
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.errorf("invalid number exponent")
		}
		exp = string(p.in[expStart:p.pos])
	}
	text := p.in[start:p.pos]
	// ParseFloat reads the value only to check its range: a value too small
	// for a double is kept, not read as 0.
	f, err := strconv.ParseFloat(string(text), 64)
	if math.IsInf(f, 0) || (err != nil && !errors.Is(err, strconv.ErrRange)) {
		return nil, p.errorf("number %s is outside the IEEE 754 double range", text)
	}
	sig := strings.TrimLeft(intPart+frac, "0")
	if sig == "" {
		return append(out, '0'), nil // also for -0
	}
	e := int64(0)
	if exp != "" {
		var err error
		if e, err = strconv.ParseInt(exp, 10, 64); err != nil || e < minExponent {
			return nil, p.errorf("number %s has an exponent out of range", text)
		}
	}
	// The value is 0.sig × 10^n; the range check bounds e from above.
	n := e - int64(len(frac)) + int64(len(sig))
	if n-1 < minExponent {
		return nil, p.errorf("number %s has an exponent out of range", text)
	}
	sign := ""
	if neg {
		sign = "-"
	}
	sig = strings.TrimRight(sig, "0")
	exact := layout(sign, sig, n)
	if int64(len(sig)) <= n && n > 21 && exact != FormatNumber(f) {
		// An integer a double does not hold: its digits, as sent, not an
		// exponent form that JSON readers would take for a double.
		exact = sign + sig + strings.Repeat("0", int(n-int64(len(sig))))
	}
	return append(out, exact...), nil
}

// minExponent bounds the exponents of values too small for a double, which
// are kept exactly rather than read as 0: far beyond any real value, and far
// enough from int64's limits that the arithmetic cannot overflow.
const minExponent = math.MinInt64 / 4

// FormatNumber writes f as ECMAScript's Number.prototype.toString does, which
// is the form RFC 8785 requires. NaN and infinities have no JSON form; they are
// never passed here.
func FormatNumber(f float64) string {
	if f == 0 {
		return "0" // also for -0
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// Shortest round-trip digits, as ECMAScript requires.
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
	e, _ := strconv.ParseInt(exp, 10, 64)
	return layout(sign, strings.Replace(mant, ".", "", 1), e+1)
}

// layout writes the number 0.digits × 10^n (digits without leading or
// trailing zeros) as ECMAScript's Number.prototype.toString lays out a
// double's shortest digits.
func layout(sign, digits string, n int64) string {
	k := int64(len(digits))
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", int(n-k))
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", int(-n)) + digits
	}
	expSign := "+"
	if n-1 < 0 {
		expSign = "-"
	}
	frac := ""
	if k > 1 {
		frac = "." + digits[1:]
	}
	return sign + digits[:1] + frac + "e" + expSign + strconv.FormatInt(abs(n-1), 10)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func appendString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			out = append(out, '\\', '"')
		case '\\':
			out = append(out, '\\', '\\')
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			if r, ok := surrogateAt(s, i); ok {
				out = append(out, fmt.Sprintf("\\u%04x", r)...)
				i += 2
			} else if c < 0x20 {
				out = append(out, fmt.Sprintf("\\u%04x", c)...)
			} else {
				out = append(out, c)
			}
		}
	}
	return append(out, '"')
}
