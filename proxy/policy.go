package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"

	"go.yaml.in/yaml/v3"

	"github.com/undolog/undolog/internal/template"
	sm "github.com/undolog/undolog/statemachine"
)

// ErrPolicy is matched by every policy error.
var ErrPolicy = errors.New("invalid policy")

// Call is an MCP tool call made by undolog: a capture before the call, or a
// compensation. Args is a template (see internal/template) over the original
// call's args, its result and the capture.
type Call struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// Rule classifies the calls of the tools its pattern matches.
type Rule struct {
	Pattern    string
	Tier       sm.Tier
	Capture    *Call
	Compensate *Call
	// ReplayAlways (replay: always) answers a repeat from the log whenever
	// its arguments are the same; by default (replay: retry) only a retry
	// is, and a call made again after its answer reached the client runs.
	ReplayAlways bool
}

// Policy maps tool names and globs to rules; the first match in file order
// wins, exact names before globs.
type Policy struct {
	Rules  []Rule
	Redact []string
}

type ruleYAML struct {
	Tier       string    `yaml:"tier"`
	Capture    *callYAML `yaml:"capture"`
	Compensate *callYAML `yaml:"compensate"`
	Replay     string    `yaml:"replay"`
}

type callYAML struct {
	Tool string         `yaml:"tool"`
	Args map[string]any `yaml:"args"`
}

// LoadPolicy reads and checks a policy file.
func LoadPolicy(file string) (*Policy, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

// ParsePolicy parses and checks a policy.
func ParsePolicy(data []byte) (*Policy, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, oneLine(err.Error()))
	}
	if len(root.Content) == 0 {
		return &Policy{}, nil
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: line %d: a policy is a mapping with the keys tools and redact", ErrPolicy, top.Line)
	}
	for i := 0; i < len(top.Content); i += 2 {
		if k := top.Content[i].Value; k != "tools" && k != "redact" {
			return nil, fmt.Errorf("%w: line %d: unknown key %q (a policy has tools and redact)", ErrPolicy, top.Content[i].Line, k)
		}
	}
	var doc struct {
		Tools  yaml.Node `yaml:"tools"`
		Redact []string  `yaml:"redact"`
	}
	if err := top.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, oneLine(err.Error()))
	}
	p := &Policy{Redact: doc.Redact}
	if doc.Tools.Kind == 0 {
		return p, nil
	}
	if doc.Tools.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: line %d: tools must map tool names or globs to rules", ErrPolicy, doc.Tools.Line)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(doc.Tools.Content); i += 2 {
		k, v := doc.Tools.Content[i], doc.Tools.Content[i+1]
		var ry ruleYAML
		if err := v.Decode(&ry); err != nil {
			return nil, fmt.Errorf("%w: line %d: %s: %v", ErrPolicy, v.Line, k.Value, oneLine(err.Error()))
		}
		r, err := ry.rule(k.Value)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %s: %v", ErrPolicy, k.Line, k.Value, err)
		}
		if seen[k.Value] {
			return nil, fmt.Errorf("%w: line %d: %s appears twice", ErrPolicy, k.Line, k.Value)
		}
		seen[k.Value] = true
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

func (ry ruleYAML) rule(pattern string) (Rule, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return Rule{}, fmt.Errorf("bad glob: %v", err)
	}
	r := Rule{Pattern: pattern}
	switch {
	case ry.Tier != "":
		t, err := sm.ParseTier(ry.Tier)
		if err != nil {
			return Rule{}, err
		}
		r.Tier = t
	case ry.Compensate != nil:
		r.Tier = sm.Compensable
	default:
		return Rule{}, errors.New("needs a tier (safe, compensable or irreversible) or a compensate call")
	}
	switch ry.Replay {
	case "", "retry":
	case "always":
		r.ReplayAlways = true
	default:
		return Rule{}, fmt.Errorf("replay %q: use retry (the default: a repeat after the answer reached the client runs again) or always", ry.Replay)
	}
	if ry.Replay != "" && r.Tier == sm.Safe {
		return Rule{}, errors.New("replay is for logged calls; a safe one is never logged")
	}
	if ry.Compensate != nil && r.Tier != sm.Compensable {
		return Rule{}, fmt.Errorf("a compensate call is for compensable tools; this one is %s", r.Tier)
	}
	if ry.Capture != nil && ry.Compensate == nil {
		return Rule{}, errors.New("a capture is only useful with a compensate call that uses it")
	}
	var err error
	if r.Capture, err = ry.Capture.call("capture"); err != nil {
		return Rule{}, err
	}
	if r.Compensate, err = ry.Compensate.call("compensate"); err != nil {
		return Rule{}, err
	}
	return r, nil
}

func (c *callYAML) call(what string) (*Call, error) {
	if c == nil {
		return nil, nil
	}
	if c.Tool == "" {
		return nil, fmt.Errorf("%s needs a tool", what)
	}
	args := c.Args
	if args == nil {
		args = map[string]any{}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%s args: %v", what, err)
	}
	if err := template.Check(raw); err != nil {
		return nil, fmt.Errorf("%s args: %v", what, err)
	}
	return &Call{Tool: c.Tool, Args: raw}, nil
}

// Classification is how one call is treated, and why.
type Classification struct {
	Tier   sm.Tier
	Rule   *Rule
	Reason string
}

// Classify finds the rule for a tool: its exact name, else the first glob
// that matches, else its readOnlyHint annotation (safe), else irreversible:
// undolog fails closed. annotation is asked only when no rule matches.
func (p *Policy) Classify(tool string, annotation func() (readOnly, known bool)) Classification {
	if p != nil {
		for i := range p.Rules {
			if p.Rules[i].Pattern == tool {
				return Classification{Tier: p.Rules[i].Tier, Rule: &p.Rules[i], Reason: "policy: " + tool}
			}
		}
		for i := range p.Rules {
			if ok, _ := path.Match(p.Rules[i].Pattern, tool); ok {
				return Classification{Tier: p.Rules[i].Tier, Rule: &p.Rules[i], Reason: "policy: " + p.Rules[i].Pattern}
			}
		}
	}
	if readOnly, known := annotation(); known && readOnly {
		return Classification{Tier: sm.Safe, Reason: "annotation readOnlyHint"}
	}
	return Classification{Tier: sm.Irreversible, Reason: "no policy entry: irreversible (fail closed)"}
}

func oneLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
