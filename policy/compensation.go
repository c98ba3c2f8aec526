package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/undolog/undolog/internal/template"
	"github.com/undolog/undolog/internal/textfmt"
	sm "github.com/undolog/undolog/statemachine"
)

// The policy's forms beyond a tier word and one mcp call (docs/policy.md):
//
//	tier: [{when: JQ, tier: safe}, {tier: compensable}]
//	capture: {tool: T, args: {...}, optional: true}      # .capture
//	capture: {NAME: {tool: T, args: {...}}, ...}          # .capture.NAME
//	compensate: {tool: T, args: {...}}                    # as before: kind mcp
//	compensate: [{when: JQ, run: [ARGV...], stdin_base64: TMPL}, {when: JQ, tool: T, args: {...}}, {skip: WHY}]
//	compensate: files                                     # the door restores the files (undolog hook)

// knownKeys refuses a mapping key not in keys: a misspelt "optinal" would
// otherwise be dropped without a word, and the policy do less than it says.
func knownKeys(n *yaml.Node, what string, keys ...string) error {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i < len(n.Content); i += 2 {
		if k := n.Content[i]; !slices.Contains(keys, k.Value) {
			return fmt.Errorf("line %d: unknown key %q (%s has %s)", k.Line, k.Value, what, strings.Join(keys, ", "))
		}
	}
	return nil
}

func hasKey(n *yaml.Node, key string) bool {
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

func tierCases(n *yaml.Node) ([]TierCase, error) {
	var out []TierCase
	for i, c := range n.Content {
		if c.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("line %d: a tier case is a mapping: {when: JQ, tier: TIER}", c.Line)
		}
		if err := knownKeys(c, "a tier case", "when", "tier"); err != nil {
			return nil, err
		}
		var y struct {
			When string `yaml:"when"`
			Tier string `yaml:"tier"`
		}
		if err := c.Decode(&y); err != nil {
			return nil, fmt.Errorf("line %d: %v", c.Line, textfmt.OneLine(err.Error()))
		}
		t, err := sm.ParseTier(y.Tier)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", c.Line, err)
		}
		last := i == len(n.Content)-1
		switch {
		case y.When == "" && !last:
			return nil, fmt.Errorf("line %d: only the last tier case goes without a when", c.Line)
		case y.When != "" && last:
			return nil, fmt.Errorf("line %d: the last tier case is the default: no when", c.Line)
		case y.When != "":
			if err := template.CheckCondition(y.When); err != nil {
				return nil, fmt.Errorf("line %d: when: %v", c.Line, err)
			}
		}
		out = append(out, TierCase{When: y.When, Tier: t})
	}
	if len(out) == 0 {
		return nil, errors.New("tier: an empty list of cases")
	}
	return out, nil
}

type callYAML struct {
	Tool     string `yaml:"tool"`
	Args     any    `yaml:"args"` // a mapping, or one "{{ }}" that gives it (or, for a capture, an array of them)
	Optional bool   `yaml:"optional"`
}

func parseCall(n *yaml.Node, what string, keys ...string) (*Call, error) {
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: %s is a mapping with a tool and args", n.Line, what)
	}
	if err := knownKeys(n, what, keys...); err != nil {
		return nil, err
	}
	var c callYAML
	if err := n.Decode(&c); err != nil {
		return nil, fmt.Errorf("line %d: %s: %v", n.Line, what, textfmt.OneLine(err.Error()))
	}
	if c.Tool == "" {
		return nil, fmt.Errorf("%s needs a tool", what)
	}
	raw, err := templateJSON(c.Args, what)
	if err != nil {
		return nil, err
	}
	return &Call{Tool: c.Tool, Args: raw, Optional: c.Optional}, nil
}

func templateJSON(args any, what string) (json.RawMessage, error) {
	switch a := args.(type) {
	case nil:
		args = map[string]any{}
	case map[string]any:
	case string:
		if !strings.HasPrefix(strings.TrimSpace(a), "{{") {
			return nil, fmt.Errorf("%s args are a mapping, or a \"{{ }}\" that gives one", what)
		}
	default:
		return nil, fmt.Errorf("%s args are a mapping, or a \"{{ }}\" that gives one", what)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%s args: %v", what, err)
	}
	if err := template.Check(raw); err != nil {
		return nil, fmt.Errorf("%s args: %v", what, err)
	}
	return raw, nil
}

// captures reads a capture: one call (it has a tool), or named calls.
func captures(n *yaml.Node) (*Call, []NamedCapture, error) {
	switch {
	case n.Kind == 0:
		return nil, nil, nil
	case n.Kind != yaml.MappingNode:
		return nil, nil, fmt.Errorf("line %d: capture is a call {tool, args, optional} or named calls {NAME: {tool, args}}", n.Line)
	case hasKey(n, "tool"):
		c, err := parseCall(n, "capture", "tool", "args", "optional")
		return c, nil, err
	}
	var named []NamedCapture
	for i := 0; i+1 < len(n.Content); i += 2 {
		name := n.Content[i].Value
		c, err := parseCall(n.Content[i+1], "capture "+name, "tool", "args", "optional")
		if err != nil {
			return nil, nil, err
		}
		named = append(named, NamedCapture{Name: name, Call: c})
	}
	if len(named) == 0 {
		return nil, nil, fmt.Errorf("line %d: capture names no call", n.Line)
	}
	return nil, named, nil
}

var caseKeys = []string{"when", "tool", "args", "run", "stdin", "stdin_base64", "skip"}

// compensation reads compensate: one mcp call as before (kind mcp), one
// case or a list of them (kind cases), or files (the door's snapshots).
func compensation(n *yaml.Node) (*Call, *template.Cases, bool, error) {
	switch n.Kind {
	case 0:
		return nil, nil, false, nil
	case yaml.ScalarNode:
		if n.Value == "files" {
			return nil, nil, true, nil
		}
	case yaml.MappingNode:
		if !hasKey(n, "when") && !hasKey(n, "run") && !hasKey(n, "skip") {
			c, err := parseCall(n, "compensate", "tool", "args")
			return c, nil, false, err
		}
		c, err := parseCase(n)
		if err != nil {
			return nil, nil, false, err
		}
		cs := &template.Cases{Cases: []template.Case{c}}
		return nil, cs, false, cs.Check()
	case yaml.SequenceNode:
		cs := &template.Cases{}
		for _, e := range n.Content {
			c, err := parseCase(e)
			if err != nil {
				return nil, nil, false, err
			}
			cs.Cases = append(cs.Cases, c)
		}
		if err := cs.Check(); err != nil {
			return nil, nil, false, fmt.Errorf("compensate: %v", err)
		}
		return nil, cs, false, nil
	}
	return nil, nil, false, fmt.Errorf("line %d: compensate is a call {tool, args}, a case {when, run | tool | skip}, a list of cases, or files (undolog hook restores the files)", n.Line)
}

func parseCase(n *yaml.Node) (template.Case, error) {
	if n.Kind != yaml.MappingNode {
		return template.Case{}, fmt.Errorf("line %d: a compensate case is a mapping", n.Line)
	}
	if err := knownKeys(n, "a compensate case", caseKeys...); err != nil {
		return template.Case{}, err
	}
	var y struct {
		When        string   `yaml:"when"`
		Tool        string   `yaml:"tool"`
		Args        any      `yaml:"args"`
		Run         []string `yaml:"run"`
		Stdin       string   `yaml:"stdin"`
		StdinBase64 string   `yaml:"stdin_base64"`
		Skip        string   `yaml:"skip"`
	}
	if err := n.Decode(&y); err != nil {
		return template.Case{}, fmt.Errorf("line %d: %v", n.Line, textfmt.OneLine(err.Error()))
	}
	c := template.Case{When: y.When, Tool: y.Tool, Run: y.Run, Stdin: y.Stdin, StdinBase64: y.StdinBase64, Skip: y.Skip}
	if y.Tool != "" {
		raw, err := templateJSON(y.Args, "compensate")
		if err != nil {
			return c, fmt.Errorf("line %d: %v", n.Line, err)
		}
		c.Args = raw
	} else if y.Args != nil {
		return c, fmt.Errorf("line %d: args are for a tool", n.Line)
	}
	if err := (template.Cases{Cases: []template.Case{c}}).Check(); err != nil {
		return c, fmt.Errorf("line %d: %v", n.Line, err)
	}
	return c, nil
}
