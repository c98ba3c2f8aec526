package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
)

// Redacted replaces the value of every redacted field.
const Redacted = "[redacted]"

// ValidRedactions checks redaction patterns (globs over dotted field paths).
func ValidRedactions(patterns []string) error {
	for _, p := range patterns {
		if p == "" {
			return fmt.Errorf("%w: an empty redaction pattern", ErrInvalidInput)
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("%w: redaction pattern %q: %v", ErrInvalidInput, p, err)
		}
	}
	return nil
}

// Redact replaces, in the JSON doc, the value of each field whose dotted path
// (user.password, items.0.token) matches one of the patterns; "*.password"
// also matches a top-level password. The result is canonical JSON again.
func Redact(doc json.RawMessage, patterns []string) (json.RawMessage, error) {
	if len(patterns) == 0 || len(doc) == 0 {
		return doc, nil
	}
	// doc is canonical JSON, one value; json.Number keeps its numbers' digits.
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: redact: %v", ErrInvalidInput, err)
	}
	v = redactValue(v, "", patterns)
	out, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return CanonicalArgs(out)
}

func redactValue(v any, at string, patterns []string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := joinPath(at, k)
			if matchesAny(p, patterns) {
				x[k] = Redacted
				continue
			}
			x[k] = redactValue(e, p, patterns)
		}
	case []any:
		for i, e := range x {
			p := joinPath(at, strconv.Itoa(i))
			if matchesAny(p, patterns) {
				x[i] = Redacted
				continue
			}
			x[i] = redactValue(e, p, patterns)
		}
	}
	return v
}

func joinPath(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

func matchesAny(p string, patterns []string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, p); ok {
			return true
		}
		if ok, _ := path.Match(pat, "."+p); ok {
			return true
		}
	}
	return false
}
