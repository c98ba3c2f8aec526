package template

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/itchyny/gojq"
)

// placeholder is one "{{ EXPR }}" of a string: its bytes [start, end).
type placeholder struct {
	start, end int
	expr       string
}

// placeholders finds the placeholders of s. A placeholder ends at the first
// "}}" before which its expression parses as jq, so "}}" may appear inside
// the expression ({{ {a: {b: 1}} }}, {{ "}}" }}); a "{{" with no such end is
// an error rather than text, as it is almost always a mistake.
func placeholders(s string) ([]placeholder, error) {
	var out []placeholder
	for i := 0; i < len(s); {
		open := strings.Index(s[i:], "{{")
		if open < 0 {
			break
		}
		open += i
		found := false
		var firstErr error
		for j := open + 2; j+2 <= len(s); j++ {
			if s[j] != '}' || s[j+1] != '}' {
				continue
			}
			expr := strings.TrimSpace(s[open+2 : j])
			if _, err := gojq.Parse(expr); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			out = append(out, placeholder{start: open, end: j + 2, expr: expr})
			i, found = j+2, true
			break
		}
		if !found {
			if firstErr != nil {
				return nil, fmt.Errorf("%w: %q: %v", ErrTemplate, s[open:], firstErr)
			}
			return nil, fmt.Errorf("%w: %q: a {{ with no }} after it", ErrTemplate, s[open:])
		}
	}
	return out, nil
}

// whole tells whether s is one placeholder and nothing else: its value
// is then the expression's, of any JSON type.
func whole(s string) (string, bool, error) {
	ms, err := placeholders(s)
	if err != nil {
		return "", false, err
	}
	if len(ms) == 1 && ms[0].start == 0 && ms[0].end == len(s) {
		return ms[0].expr, true, nil
	}
	return "", false, nil
}

func fillString(x string, input map[string]any) (any, error) {
	ms, err := placeholders(x)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return x, nil
	}
	if len(ms) == 1 && ms[0].start == 0 && ms[0].end == len(x) {
		return run(ms[0].expr, input)
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		b.WriteString(x[last:m.start])
		val, err := run(m.expr, input)
		if err != nil {
			return nil, err
		}
		b.WriteString(text(val))
		last = m.end
	}
	b.WriteString(x[last:])
	return b.String(), nil
}

// text is a value as it is interpolated: a string as itself, anything
// else as its JSON.
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	j, _ := json.Marshal(v)
	return string(j)
}
