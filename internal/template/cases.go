package template

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Case is one way of undoing a call, as a policy states it: taken when its
// When (a jq expression over args, result and capture) is true, or always
// when it has none. It does one of three things: calls Tool with Args (a
// template), runs Run (argv templates, no shell) with Stdin or the bytes
// StdinBase64 decodes to on its standard input, or nothing (Skip, the reason
// why nothing needs undoing).
type Case struct {
	When        string          `json:"when,omitempty"`
	Tool        string          `json:"tool,omitempty"`
	Args        json.RawMessage `json:"args,omitempty"`
	Run         []string        `json:"run,omitempty"`
	Stdin       string          `json:"stdin,omitempty"`
	StdinBase64 string          `json:"stdin_base64,omitempty"`
	Skip        string          `json:"skip,omitempty"`
}

// Cases is the compensation of a policy rule: its cases, tried in order.
type Cases struct {
	Cases []Case `json:"cases"`
}

// Chosen is the case a call's record selects, filled in.
type Chosen struct {
	// Index is the case's place in Cases (from 0).
	Index int
	When  string
	Tool  string
	Args  json.RawMessage
	Argv  []string
	// Stdin is what the command reads; nil: nothing (it reads /dev/null).
	Stdin []byte
	Skip  string
}

// Kind is what the chosen case does: "mcp", "command" or "skip".
func (c Chosen) Kind() string {
	switch {
	case c.Tool != "":
		return "mcp"
	case len(c.Argv) > 0:
		return "command"
	}
	return "skip"
}

// Check parses every expression of the cases and checks that each does one
// thing.
func (cs Cases) Check() error {
	if len(cs.Cases) == 0 {
		return fmt.Errorf("%w: no cases", ErrTemplate)
	}
	for i, c := range cs.Cases {
		if err := c.check(); err != nil {
			return fmt.Errorf("case %d: %w", i+1, err)
		}
	}
	return nil
}

func (c Case) check() error {
	n := 0
	for _, set := range []bool{c.Tool != "", len(c.Run) > 0, c.Skip != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%w: a case has exactly one of tool, run and skip", ErrTemplate)
	}
	if c.Tool == "" && len(c.Args) > 0 {
		return fmt.Errorf("%w: args are for a tool", ErrTemplate)
	}
	if len(c.Run) == 0 && (c.Stdin != "" || c.StdinBase64 != "") {
		return fmt.Errorf("%w: stdin is for a run", ErrTemplate)
	}
	if c.Stdin != "" && c.StdinBase64 != "" {
		return fmt.Errorf("%w: stdin or stdin_base64, not both", ErrTemplate)
	}
	if c.When != "" {
		if err := CheckCondition(c.When); err != nil {
			return err
		}
	}
	if len(c.Args) > 0 {
		if err := Check(c.Args); err != nil {
			return err
		}
	}
	// placeholders parses every expression it finds.
	for _, s := range append(append([]string{}, c.Run...), c.Stdin, c.StdinBase64) {
		if _, err := placeholders(s); err != nil {
			return err
		}
	}
	return nil
}

// condition is a When's expression: bare jq, or one "{{ EXPR }}".
func condition(expr string) string {
	expr = strings.TrimSpace(expr)
	if e, ok, err := whole(expr); err == nil && ok {
		return e
	}
	return expr
}

// CheckCondition parses a condition without evaluating it.
func CheckCondition(expr string) error {
	e := condition(expr)
	if e == "" {
		return fmt.Errorf("%w: an empty condition", ErrTemplate)
	}
	if err := queryOf(e).err; err != nil {
		return fmt.Errorf("%w: %q: %v", ErrTemplate, e, err)
	}
	return nil
}

// True evaluates a condition: true unless its value is false or null, as
// jq's if and select have it.
func True(expr string, in Input) (bool, error) {
	input, err := inputOf(in)
	if err != nil {
		return false, err
	}
	return truth(expr, input)
}

func truth(expr string, input map[string]any) (bool, error) {
	v, err := run(condition(expr), input)
	if err != nil {
		return false, err
	}
	return v != nil && v != false, nil
}

// Choose selects the first case whose condition holds and fills it in.
// None holding is an error: the policy did not say how to undo this call.
func (cs Cases) Choose(in Input) (Chosen, error) {
	input, err := inputOf(in)
	if err != nil {
		return Chosen{}, err
	}
	for i, c := range cs.Cases {
		if c.When != "" {
			ok, err := truth(c.When, input)
			if err != nil {
				return Chosen{}, fmt.Errorf("case %d: when: %w", i+1, err)
			}
			if !ok {
				continue
			}
		}
		ch, err := c.fill(input)
		if err != nil {
			return Chosen{}, fmt.Errorf("case %d: %w", i+1, err)
		}
		ch.Index, ch.When = i, c.When
		return ch, nil
	}
	return Chosen{}, fmt.Errorf("%w: no case's condition holds for this call", ErrTemplate)
}

func (c Case) fill(input map[string]any) (Chosen, error) {
	ch := Chosen{Tool: c.Tool, Skip: c.Skip}
	if c.Tool != "" {
		args := c.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		var v any
		if err := decode(args, &v); err != nil {
			return ch, fmt.Errorf("%w: not JSON: %v", ErrTemplate, err)
		}
		out, err := fill(v, input)
		if err != nil {
			return ch, err
		}
		if ch.Args, err = json.Marshal(out); err != nil {
			return ch, err
		}
		return ch, nil
	}
	for _, a := range c.Run {
		// One placeholder gives an argument for each value its expression
		// yields: `.args.paths[]` is that many arguments, as the policy's
		// author wrote. An array is an error, never spread: the agent
		// chooses an argument's type, and would make one into several
		// (options, other targets).
		if expr, ok, _ := whole(a); ok {
			vs, err := runAll(expr, input)
			if err != nil {
				return ch, err
			}
			for _, v := range vs {
				s, err := argText(expr, v)
				if err != nil {
					return ch, err
				}
				ch.Argv = append(ch.Argv, s)
			}
			continue
		}
		v, err := fillString(a, input)
		if err != nil {
			return ch, err
		}
		ch.Argv = append(ch.Argv, text(v))
	}
	if len(c.Run) > 0 && len(ch.Argv) == 0 {
		return ch, fmt.Errorf("%w: run expands to no command", ErrTemplate)
	}
	switch {
	case c.Stdin != "":
		v, err := fillString(c.Stdin, input)
		if err != nil {
			return ch, err
		}
		ch.Stdin = []byte(text(v))
	case c.StdinBase64 != "":
		v, err := fillString(c.StdinBase64, input)
		if err != nil {
			return ch, err
		}
		s, ok := v.(string)
		if !ok {
			return ch, fmt.Errorf("%w: stdin_base64 %q gives %s, not a string", ErrTemplate, c.StdinBase64, text(v))
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return ch, fmt.Errorf("%w: stdin_base64 is not base64: %v", ErrTemplate, err)
		}
		ch.Stdin = b
	}
	return ch, nil
}

// Unguarded is the run arguments of c that begin with a value filled in
// (the call's args, its result, a capture) before a `--`: there a value
// that begins with - is an option of the command (-rf, --help). One that
// begins with fixed text (/base/{{ }}, --file={{ }}) is not, nor are the
// ARGs of a shell's `-c SCRIPT NAME ARG...`, its positional parameters.
func (c Case) Unguarded() []string {
	if len(c.Run) > 2 && c.Run[1] == "-c" && slices.Contains([]string{"sh", "bash", "dash", "zsh"}, filepath.Base(c.Run[0])) {
		return nil
	}
	var out []string
	for i, a := range c.Run {
		if a == "--" {
			break
		}
		if i > 0 && strings.HasPrefix(strings.TrimLeft(a, " "), "{{") {
			out = append(out, a)
		}
	}
	return out
}

// argText is one argument of a command: a string, number or boolean as
// text; null, an object or an array is a mistake.
func argText(expr string, v any) (string, error) {
	switch v.(type) {
	case []any:
		return "", fmt.Errorf("%w: %q gives an array, %s, which is no command argument (for an argument of each element, write %q)", ErrTemplate, expr, text(v), "{{ "+strings.TrimSpace(expr)+"[] }}")
	case nil, map[string]any:
		return "", fmt.Errorf("%w: %q gives %s, which is no command argument", ErrTemplate, expr, text(v))
	}
	return text(v), nil
}
