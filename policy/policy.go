package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/undolog/undolog/internal/template"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// ErrPolicy is matched by every policy error.
var ErrPolicy = errors.New("invalid policy")

// Call is an MCP tool call made by undolog: a capture before the call, or a
// compensation. Args is a template (see internal/template) over the original
// call's args, its result and the capture. A capture's Args may give an
// array: the tool is then called once per element, and the capture is the
// array of the results.
type Call struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
	// Optional: a capture that fails does not stop the call; the capture
	// is then the failure, a tool result with isError true.
	Optional bool `json:"optional,omitempty"`
}

// NamedCapture is one capture of several: .capture.NAME.
type NamedCapture struct {
	Name string
	Call *Call
}

// TierCase chooses a rule's tier by a condition over .args.
type TierCase struct {
	When string // a jq expression; "" for the default, always last
	Tier sm.Tier
}

// Rule classifies the calls of the tools its pattern matches.
type Rule struct {
	Pattern string
	// Tier is the rule's tier, the default of Tiers when it has them.
	Tier sm.Tier
	// Tiers, when set, choose the tier of each call by its args.
	Tiers []TierCase
	// Capture is the one capture (.capture), Captures the named ones
	// (.capture.NAME); at most one of them is set.
	Capture  *Call
	Captures []NamedCapture
	// Compensate is a single mcp compensation (kind mcp); Cases the
	// compensation cases chosen at undo (kind cases).
	Compensate *Call
	Cases      *template.Cases
	// Files (compensate: files): the door undoes a call by restoring the
	// files it changed, captured before it ran (undolog hook's snapshots);
	// the rule itself says no call to make.
	Files bool
	// Shell names the arg that holds a shell script: the tier cases are
	// asked of each command it runs, and the highest tier counts
	// (shell.go).
	Shell string
	// Path names the arg that holds a file's path (Claude Code's Write:
	// file_path): the tier cases see the args with .path_guarded added,
	// whether the file, symbolic links followed as for a shell's writes,
	// is the agent's or git's configuration (shell.go's guarded).
	Path string
	// ReplayAlways (replay: always) answers a repeat from the log whenever
	// its arguments are the same; by default (replay: retry) only a retry
	// is, and a call made again after its answer reached the client runs.
	ReplayAlways bool
	// ReplayRetry: the rule says replay: retry (the proxy's default), which
	// a door whose default is the other asks (agenthook's irreversible calls).
	ReplayRetry bool
	// ApproveInClient (approve_in_client: true) lets the person in the
	// client's window decide the rule's irreversible calls too, asked by
	// elicitation; off, only undolog approve (or the view) decides them.
	ApproveInClient bool
}

// Compensable tells whether a call of the rule can be compensable.
func (r *Rule) Compensable() bool {
	if r.Tier == sm.Compensable {
		return true
	}
	for _, t := range r.Tiers {
		if t.Tier == sm.Compensable {
			return true
		}
	}
	return false
}

// mayBeIrreversible tells whether a call of the rule can be irreversible.
func (r *Rule) mayBeIrreversible() bool {
	for _, t := range r.Tiers {
		if t.Tier == sm.Irreversible {
			return true
		}
	}
	return r.Tier == sm.Irreversible
}

// alwaysSafe tells whether no call of the rule is ever logged.
func (r *Rule) alwaysSafe() bool {
	for _, t := range r.Tiers {
		if t.Tier != sm.Safe {
			return false
		}
	}
	return r.Tier == sm.Safe
}

// HasCompensation tells whether the rule says how to undo its calls with
// a call of its own (Compensate or Cases); Files leaves it to the door.
func (r *Rule) HasCompensation() bool { return r.Compensate != nil || r.Cases != nil }

// FilesRule is the first rule that says compensate: files, or nil: a door
// that captures no files (the proxy) refuses a policy with one.
func (p *Policy) FilesRule() *Rule {
	for i := range p.Rules {
		if p.Rules[i].Files {
			return &p.Rules[i]
		}
	}
	return nil
}

// HasCapture tells whether the rule captures before its calls.
func (r *Rule) HasCapture() bool { return r.Capture != nil || len(r.Captures) > 0 }

// TierFor is the tier of a call of the rule with args, and why; a shell
// script's relative paths are read from the working directory.
func (r *Rule) TierFor(args json.RawMessage) (sm.Tier, string, error) {
	return r.tierFor(args, where{})
}

func (r *Rule) tierFor(args json.RawMessage, at where) (sm.Tier, string, error) {
	if r.Shell != "" {
		return r.shellTier(args, at)
	}
	if r.Path != "" {
		var err error
		if args, err = pathFacts(args, r.Path, at); err != nil {
			return "", "", err
		}
	}
	return r.tierCase(args)
}

// tierCase is the tier of the first of the rule's cases that args meet.
func (r *Rule) tierCase(args json.RawMessage) (sm.Tier, string, error) {
	for i, t := range r.Tiers {
		if t.When == "" {
			return t.Tier, "", nil
		}
		ok, err := template.True(t.When, template.Input{Args: args})
		if err != nil {
			return "", "", fmt.Errorf("tier case %d: %w", i+1, err)
		}
		if ok {
			return t.Tier, caseReason(i, t.When), nil
		}
	}
	return r.Tier, "", nil
}

// caseReason names the tier case a call met, for the person who decides
// on it: its condition when that reads in a line, else its number (a
// shell rule's conditions run to pages; policy check shows them).
func caseReason(i int, when string) string {
	if len(when) <= 80 && !strings.ContainsAny(when, "\n\r") {
		return " (when " + when + ")"
	}
	return fmt.Sprintf(" (tier case %d)", i+1)
}

// Policy maps tool names and globs to rules; the first match in file order
// wins, exact names before globs.
type Policy struct {
	Rules  []Rule
	Redact []string
	// StateEnv names the environment variables that locate the server's
	// state (state_env): see Proxy.StateEnv.
	StateEnv []string
	// Project is the directory a shell rule's scripts run in, whose files
	// a door's snapshot covers (.args.outside); "": the working directory.
	Project string
	// LogFile is the effect log's file ("": none, or PostgreSQL): a write
	// to it, or to a directory it is in, is guarded wherever it is.
	LogFile string
}

// ruleYAML is a rule as written: tier a word or a list of cases, capture
// one call or named calls, compensate one call or case or a list of cases
// (see compensation.go).
type ruleYAML struct {
	Tier       yaml.Node `yaml:"tier"`
	Capture    yaml.Node `yaml:"capture"`
	Compensate yaml.Node `yaml:"compensate"`
	Replay     string    `yaml:"replay"`
	Shell      string    `yaml:"shell"`
	Path       string    `yaml:"path"`
	// ApproveInClient is a pointer so that "false", written, is told from unset.
	ApproveInClient *bool `yaml:"approve_in_client"`
}

// ruleKeys are the keys a rule may have.
var ruleKeys = []string{"tier", "capture", "compensate", "replay", "shell", "path", "approve_in_client"}

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
		return nil, fmt.Errorf("%w: %v", ErrPolicy, textfmt.OneLine(err.Error()))
	}
	if len(root.Content) == 0 {
		return &Policy{}, nil
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: line %d: a policy is a mapping with the keys tools, redact and state_env", ErrPolicy, top.Line)
	}
	for i := 0; i < len(top.Content); i += 2 {
		if k := top.Content[i].Value; k != "tools" && k != "redact" && k != "state_env" {
			return nil, fmt.Errorf("%w: line %d: unknown key %q (a policy has tools, redact and state_env)", ErrPolicy, top.Content[i].Line, k)
		}
	}
	var doc struct {
		Tools    yaml.Node `yaml:"tools"`
		Redact   []string  `yaml:"redact"`
		StateEnv []string  `yaml:"state_env"`
	}
	if err := top.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, textfmt.OneLine(err.Error()))
	}
	for _, name := range doc.StateEnv {
		if err := model.ValidEnvName(name); err != nil {
			return nil, fmt.Errorf("%w: state_env: %v", ErrPolicy, err)
		}
	}
	p := &Policy{Redact: doc.Redact, StateEnv: doc.StateEnv}
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
		if err := knownKeys(v, "a rule", ruleKeys...); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrPolicy, k.Value, err)
		}
		if err := v.Decode(&ry); err != nil {
			return nil, fmt.Errorf("%w: line %d: %s: %v", ErrPolicy, v.Line, k.Value, textfmt.OneLine(err.Error()))
		}
		r, err := ry.rule(k.Value)
		if err != nil {
			if strings.HasPrefix(err.Error(), "line ") { // it names its own line
				return nil, fmt.Errorf("%w: %s: %v", ErrPolicy, k.Value, err)
			}
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
	hasComp := ry.Compensate.Kind != 0
	var err error
	switch {
	case ry.Tier.Kind == yaml.SequenceNode:
		if r.Tiers, err = tierCases(&ry.Tier); err != nil {
			return Rule{}, err
		}
		r.Tier = r.Tiers[len(r.Tiers)-1].Tier
	case ry.Tier.Kind != 0:
		if r.Tier, err = sm.ParseTier(ry.Tier.Value); err != nil || ry.Tier.Kind != yaml.ScalarNode {
			if err == nil {
				err = errors.New("tier is a word (safe, compensable or irreversible) or a list of cases")
			}
			return Rule{}, err
		}
	case hasComp:
		r.Tier = sm.Compensable
	default:
		return Rule{}, errors.New("needs a tier (safe, compensable or irreversible) or a compensate call")
	}
	if ry.Shell != "" {
		if len(r.Tiers) == 0 {
			return Rule{}, errors.New("shell is for tier cases, asked of each command of the script")
		}
		r.Shell = ry.Shell
	}
	if ry.Path != "" {
		if len(r.Tiers) == 0 || ry.Shell != "" {
			return Rule{}, errors.New("path is for tier cases, and not with shell")
		}
		r.Path = ry.Path
	}
	switch ry.Replay {
	case "":
	case "retry":
		r.ReplayRetry = true
	case "always":
		r.ReplayAlways = true
	default:
		return Rule{}, fmt.Errorf("replay %q: use retry (the default: a repeat after the answer reached the client runs again) or always", ry.Replay)
	}
	if ry.Replay != "" && r.alwaysSafe() {
		return Rule{}, errors.New("replay is for logged calls; a safe one is never logged")
	}
	if ry.ApproveInClient != nil {
		if !r.mayBeIrreversible() {
			return Rule{}, errors.New("approve_in_client is for irreversible tools; this one never is")
		}
		r.ApproveInClient = *ry.ApproveInClient
	}
	if hasComp && !r.Compensable() {
		return Rule{}, fmt.Errorf("a compensate call is for compensable tools; this one is %s", r.Tier)
	}
	if ry.Capture.Kind != 0 && (!hasComp || ry.Compensate.Kind == yaml.ScalarNode) {
		return Rule{}, errors.New("a capture is only useful with a compensate call that uses it")
	}
	if r.Capture, r.Captures, err = captures(&ry.Capture); err != nil {
		return Rule{}, err
	}
	if r.Compensate, r.Cases, r.Files, err = compensation(&ry.Compensate); err != nil {
		return Rule{}, err
	}
	return r, nil
}

// Classification is how one call is treated, and why.
type Classification struct {
	Tier   sm.Tier
	Rule   *Rule
	Reason string
	// at is what the call's paths are judged against: the policy's
	// Project and LogFile, and, if set, the directory the call's shell
	// script starts in (In).
	at where
}

// In is the classification of a call whose shell script starts in dir, an
// absolute path (an agent's shell stays where it changed to), not in the
// policy's Project.
func (cls Classification) In(dir string) Classification {
	cls.at.dir = dir
	return cls
}

// Classify finds the rule for a tool: its exact name, else the first glob
// that matches, else its readOnlyHint annotation (safe), else irreversible:
// undolog fails closed. annotation is asked only when no rule matches.
func (p *Policy) Classify(tool string, annotation func() (readOnly, known bool)) Classification {
	if p != nil {
		for i := range p.Rules {
			if p.Rules[i].Pattern == tool {
				return Classification{Tier: p.Rules[i].Tier, Rule: &p.Rules[i], Reason: "policy: " + tool, at: where{project: p.Project, log: p.LogFile}}
			}
		}
		for i := range p.Rules {
			if ok, _ := path.Match(p.Rules[i].Pattern, tool); ok {
				return Classification{Tier: p.Rules[i].Tier, Rule: &p.Rules[i], Reason: "policy: " + p.Rules[i].Pattern, at: where{project: p.Project, log: p.LogFile}}
			}
		}
	}
	if readOnly, known := annotation(); known && readOnly {
		return Classification{Tier: sm.Safe, Reason: "annotation readOnlyHint"}
	}
	return Classification{Tier: sm.Irreversible, Reason: "no policy entry: irreversible (fail closed)"}
}

// ForArgs is the classification of a call with args: the rule's tier
// cases asked with them.
func (cls Classification) ForArgs(args json.RawMessage) (Classification, error) {
	if cls.Rule == nil || len(cls.Rule.Tiers) == 0 {
		return cls, nil
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	t, why, err := cls.Rule.tierFor(args, cls.at)
	if err != nil {
		return cls, err
	}
	cls.Tier, cls.Reason = t, cls.Reason+why
	return cls, nil
}

// RunsAgainAnswered tells whether a call of tool made again after its
// answer reached the client runs again (the default) rather than being
// answered from the log (replay: always).
func (p *Policy) RunsAgainAnswered(tool string) bool {
	r := p.Classify(tool, func() (bool, bool) { return false, false }).Rule
	return r == nil || !r.ReplayAlways
}

// RepeatsAreNew tells whether tool's rule says replay: retry: a repeat of
// a call whose answer reached the client is a new call.
func (p *Policy) RepeatsAreNew(tool string) bool {
	r := p.Classify(tool, func() (bool, bool) { return false, false }).Rule
	return r != nil && r.ReplayRetry
}

// knownStateEnv is what locates the state of the MCP servers undolog knows,
// by their package's name: a proxy of one records it without a policy
// saying so, so that undo does not act on another state than the session's.
var knownStateEnv = sync.OnceValue(func() map[string][]string {
	return map[string][]string{
		"server-memory": {"MEMORY_FILE_PATH"},
	}
})

// KnownStateEnv is what locates the state of the server command starts,
// when undolog knows that server: its executable (mcp-server-memory) or
// its npm package (@modelcontextprotocol/server-memory@VERSION, or a path
// into it, node .../@modelcontextprotocol/server-memory/dist/index.js) is
// named in the command, also as a word of a shell's script (sh -c "exec
// mcp-server-memory 2>/dev/null"). A word taken for one that is not only
// records one variable more.
func KnownStateEnv(command []string) []string {
	var names []string
	for _, arg := range command {
		for _, word := range strings.FieldsFunc(arg, shellSeparator) {
			name := filepath.Base(word)
			if _, pkg, ok := strings.Cut(word, "@modelcontextprotocol/"); ok {
				name, _, _ = strings.Cut(pkg, "@")
				name, _, _ = strings.Cut(name, "/")
			} else if !strings.HasPrefix(name, "mcp-") {
				continue
			}
			names = append(names, knownStateEnv()[strings.TrimPrefix(name, "mcp-")]...)
		}
	}
	return names
}

// shellSeparator is what ends a word of a shell's script: blanks,
// operators, redirections and quotes.
func shellSeparator(r rune) bool {
	return unicode.IsSpace(r) || strings.ContainsRune(`;&|()<>'"`+"`", r)
}
