package agenthook

import (
	_ "embed"

	"github.com/undolog/undolog/policy"
)

// DefaultPolicy is the policy of Claude Code's tools that undolog ships
// (claude-code-policy.yaml): `undolog init claude-code` writes it into a
// project, and the hook uses it when given none.
//
//go:embed claude-code-policy.yaml
var DefaultPolicy []byte

// LoadPolicy is the policy in file, or the default one when file is "".
// A file that holds the default policy as undolog ships it (as init wrote
// it) is parsed as the default is: a condition when a call asks it.
func LoadPolicy(file string) (*policy.Policy, error) {
	if file == "" {
		return policy.ParseShipped(DefaultPolicy)
	}
	return policy.LoadShipped(file, DefaultPolicy)
}
