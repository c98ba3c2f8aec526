// Package template owns the argument templates of MCP compensations and
// captures: JSON in which a string "{{ EXPR }}" is replaced by the value of the
// jq expression EXPR, evaluated over {"args": ..., "result": ..., "capture": ...}.
// A string with text around "{{ EXPR }}" interpolates the value as text.
// EXPR is any jq expression, "}}" inside it included (an object literal, a
// string): a placeholder ends at the first "}}" before which EXPR parses.
package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrTemplate is matched by every error of this package.
var ErrTemplate = errors.New("template")

// Check parses every expression of tmpl without evaluating it.
func Check(tmpl json.RawMessage) error {
	var v any
	if err := json.Unmarshal(tmpl, &v); err != nil {
		return fmt.Errorf("%w: not JSON: %v", ErrTemplate, err)
	}
	return walk(v, func(expr string) error {
		if err := queryOf(expr).err; err != nil {
			return fmt.Errorf("%w: %q: %v", ErrTemplate, expr, err)
		}
		return nil
	})
}

func walk(v any, fn func(string) error) error {
	switch x := v.(type) {
	case string:
		ms, err := placeholders(x)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if err := fn(m.expr); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := walk(e, fn); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range x {
			if err := walk(e, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// Input is what expressions see.
type Input struct {
	Args    json.RawMessage
	Result  json.RawMessage
	Capture json.RawMessage
}

// decode reads one JSON value with its numbers as json.Number, which gojq
// computes with and encoding/json writes back digit for digit: a number a
// double cannot hold reaches the compensation as it was sent.
func decode(data []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}

// inputOf decodes what expressions see.
func inputOf(in Input) (map[string]any, error) {
	input := map[string]any{}
	for name, raw := range map[string]json.RawMessage{"args": in.Args, "result": in.Result, "capture": in.Capture} {
		var x any
		if err := loneSurrogate(raw); err != nil {
			return nil, fmt.Errorf("%w: .%s: %v", ErrTemplate, name, err)
		}
		if len(raw) > 0 {
			if err := decode(raw, &x); err != nil {
				return nil, fmt.Errorf("%w: %s is not JSON", ErrTemplate, name)
			}
		}
		input[name] = x
	}
	return input, nil
}

// Eval fills tmpl from in and returns the JSON.
func Eval(tmpl json.RawMessage, in Input) (json.RawMessage, error) {
	var v any
	if err := decode(tmpl, &v); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrTemplate, err)
	}
	input, err := inputOf(in)
	if err != nil {
		return nil, err
	}
	out, err := fill(v, input)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

func fill(v any, input map[string]any) (any, error) {
	switch x := v.(type) {
	case string:
		return fillString(x, input)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			f, err := fill(e, input)
			if err != nil {
				return nil, err
			}
			out[i] = f
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			f, err := fill(e, input)
			if err != nil {
				return nil, err
			}
			out[k] = f
		}
		return out, nil
	}
	return v, nil
}

// run evaluates one jq expression and returns its single value.
// runAll is every value expr yields over input, in order.
func runAll(expr string, input map[string]any) ([]any, error) {
	q, err := queryOf(expr).compiled()
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrTemplate, expr, err)
	}
	var vs []any
	for iter := q.Run(input); ; {
		v, ok := iter.Next()
		if !ok {
			return vs, nil
		}
		if err, isErr := v.(error); isErr {
			return nil, fmt.Errorf("%w: %q: %v", ErrTemplate, expr, err)
		}
		vs = append(vs, v)
	}
}

func run(expr string, input map[string]any) (any, error) {
	q, err := queryOf(expr).compiled()
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrTemplate, expr, err)
	}
	iter := q.Run(input)
	v, ok := iter.Next()
	if !ok {
		return nil, fmt.Errorf("%w: %q gave no value", ErrTemplate, expr)
	}
	if err, isErr := v.(error); isErr {
		return nil, fmt.Errorf("%w: %q: %v", ErrTemplate, expr, err)
	}
	return v, nil
}

// loneSurrogate refuses JSON text with a lone surrogate escape (a string cut
// inside an emoji, which the log keeps): decoded, it would become U+FFFD, and
// a compensation or capture would name another string than the call did
// (an undo that deletes nothing, and says it compensated).
func loneSurrogate(data []byte) error {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
			return 0, false
		}
		var r rune
		for _, c := range data[i+2 : i+6] {
			switch {
			case c >= '0' && c <= '9':
				r = r<<4 | rune(c-'0')
			case c >= 'a' && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case c >= 'A' && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // another escape: skip what it escapes
			continue
		}
		if r >= 0xD800 && r < 0xDC00 {
			if r2, ok := hex4(i + 6); ok && r2 >= 0xDC00 && r2 < 0xE000 {
				i += 11
				continue
			}
		}
		if r >= 0xD800 && r < 0xE000 {
			return fmt.Errorf("a string holds a lone surrogate (\\u%04x, a string cut inside a character), which cannot pass through jq unchanged", r)
		}
		i += 5
	}
	return nil
}
