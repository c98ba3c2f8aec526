package mcpwire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// KeyError is a key a message may be read two ways by: one that another
// key of its object repeats, or equals but for case (as encoding/json
// matches keys: ASCII case and Unicode's simple folds, so "ſ" is "s" and
// "K" (U+212A) is "k"), or one that equals a name the reader looks for but
// for case. A server in JavaScript reads keys as sent and the last of two
// equal ones; a server in Go may fold case, or take the first: whichever it
// is, what the proxy logged and what the server ran would differ.
type KeyError struct {
	Path  string // where the object is: "" for the message itself, else like "params.arguments"
	Key   string // the key, as sent
	Other string // the key it collides with, as sent or looked for
	Field bool   // Other is a name the reader looks for, not a key of the object
}

func (e *KeyError) Error() string {
	where := "the message"
	if e.Path != "" {
		where = e.Path
	}
	switch {
	case e.Field:
		return fmt.Sprintf("the key %s in %s is %s but for case; a server may read it as that or not at all", strconv.Quote(e.Key), where, strconv.Quote(e.Other))
	case e.Key == e.Other:
		return fmt.Sprintf("the key %s appears twice in %s; a server may read either", strconv.Quote(e.Key), where)
	}
	return fmt.Sprintf("the keys %s and %s in %s are one key but for case; a server may read either", strconv.Quote(e.Other), strconv.Quote(e.Key), where)
}

// TopLevel tells whether the key is one of the message's own (its id or
// method, say), not one inside its params or result.
func (e *KeyError) TopLevel() bool { return e.Path == "" }

// RepeatedKey is the first key of msg (valid JSON) that another key of its
// object repeats or equals but for case, at any depth; nil if none.
func RepeatedKey(msg []byte) *KeyError { return repeatedKey(msg, true) }

// repeatedKey is RepeatedKey, of every object in msg (deep) or of the
// object msg only.
func repeatedKey(msg []byte, deep bool) *KeyError {
	type frame struct {
		object    bool
		expectKey bool
		keys      map[string]string // folded -> as sent
		name      string            // the member's key, or its index, in the parent
		index     int
		key       string // the key of the member being read (objects)
	}
	var stack []*frame
	path := func() string {
		var parts []string
		for i, f := range stack {
			if i == 0 {
				continue
			}
			parts = append(parts, f.name)
		}
		return strings.Join(parts, ".")
	}
	child := func() string {
		if len(stack) == 0 {
			return ""
		}
		top := stack[len(stack)-1]
		if top.object {
			return top.key
		}
		return strconv.Itoa(top.index)
	}
	for i := 0; i < len(msg); i++ {
		switch c := msg[i]; c {
		case '{', '[':
			stack = append(stack, &frame{object: c == '{', expectKey: c == '{', name: child()})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				top.expectKey = top.object
				top.index++
			}
		case '"':
			end := i + 1
			plain := true
			for ; end < len(msg) && msg[end] != '"'; end++ {
				if msg[end] == '\\' {
					end++
					plain = false
				} else if msg[end] >= utf8.RuneSelf {
					plain = false
				}
			}
			if end >= len(msg) {
				return nil // not JSON: its reader refuses it
			}
			if len(stack) > 0 && stack[len(stack)-1].expectKey && (deep || len(stack) == 1) {
				top := stack[len(stack)-1]
				key := string(msg[i+1 : end])
				if !plain {
					json.Unmarshal(msg[i:end+1], &key) // as a reader decodes it
				}
				folded := foldKey(key)
				if other, seen := top.keys[folded]; seen {
					return &KeyError{Path: path(), Key: key, Other: other}
				}
				if top.keys == nil {
					top.keys = map[string]string{}
				}
				top.keys[folded] = key
				top.key, top.expectKey = key, false
			}
			i = end
		}
	}
	return nil
}

// foldKey is key folded as encoding/json folds keys (bytes.EqualFold's
// equivalence): each rune as the least of its Unicode simple-fold orbit, so
// "s", "S" and "ſ" fold alike, and "ı" only as itself.
func foldKey(key string) string {
	plain := true
	for i := 0; i < len(key); i++ {
		if key[i] >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return strings.ToUpper(key) // an ASCII capital is the least of its orbit
	}
	var b strings.Builder
	for _, r := range key {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// Unmarshal decodes data (a message, or a part of one) into v as a reader
// that matches keys exactly (a server in JavaScript) reads it, and as one
// that folds case (encoding/json) does: in an object it decodes into a
// struct, two keys one but for case (or one key twice), or a key that is
// the name of a field but for case, is refused with a *KeyError, so that
// the two readings are one. Objects it keeps as they came (json.RawMessage,
// maps of them) it leaves to whoever reads them.
func Unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	if e := ambiguousKey(data, reflect.TypeOf(v), ""); e != nil {
		return e
	}
	return nil
}

// ambiguousKey is the first key of data, decoded as type t, that Unmarshal
// refuses; nil if none. data has decoded into t already.
func ambiguousKey(data []byte, t reflect.Type, path string) *KeyError {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || len(data) == 0 || t == reflect.TypeFor[json.RawMessage]() {
		return nil
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch t.Kind() {
	case reflect.Struct:
		var members map[string]json.RawMessage
		if json.Unmarshal(data, &members) != nil {
			return nil // null, say
		}
		if e := repeatedKey(data, false); e != nil {
			e.Path = path
			return e
		}
		fields := map[string]reflect.StructField{}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fields[name] = f
		}
		for k, v := range members {
			if f, ok := fields[k]; ok {
				if e := ambiguousKey(v, f.Type, join(k)); e != nil {
					return e
				}
				continue
			}
			for name := range fields {
				if strings.EqualFold(k, name) {
					return &KeyError{Path: path, Key: k, Other: name, Field: true}
				}
			}
		}
	case reflect.Slice, reflect.Array:
		var elems []json.RawMessage
		if json.Unmarshal(data, &elems) != nil {
			return nil
		}
		for i, e := range elems {
			if ke := ambiguousKey(e, t.Elem(), join(strconv.Itoa(i))); ke != nil {
				return ke
			}
		}
	case reflect.Map:
		var members map[string]json.RawMessage
		if json.Unmarshal(data, &members) != nil {
			return nil
		}
		for k, v := range members {
			if e := ambiguousKey(v, t.Elem(), join(k)); e != nil {
				return e
			}
		}
	}
	return nil
}
