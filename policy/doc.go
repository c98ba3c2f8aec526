// Package policy owns the policy language every door classifies its calls
// by (docs/policy.md): tool names and globs, each with a tier or tier cases
// over the call's args, captures and compensations. A tool no rule names is
// irreversible: undolog fails closed.
package policy
