// Package statemachine owns the rules of undolog: the effect states and tiers of
// spec/effect-states.txt, the session states of the design, the undo-entry states,
// and the tables that say which transitions are valid. It is pure: no I/O and no
// imports from the rest of the project, so every rule can be tested exhaustively.
package statemachine

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidStateTransition is matched (errors.Is) by every error that refuses a
// transition, whatever table it came from.
var ErrInvalidStateTransition = errors.New("invalid state transition")

// ErrUnknownName is matched by errors for state or tier names that do not exist.
var ErrUnknownName = errors.New("unknown name")

// TransitionError says which transition was refused and the spec's reason.
type TransitionError struct {
	Machine string // "effect", "session" or "undo entry"
	Tier    Tier   // empty for session and undo-entry transitions
	From    string
	To      string
	Reason  string
}

func (e *TransitionError) Error() string {
	from := e.From
	if from == "" {
		from = "(none)"
	}
	tier := ""
	if e.Tier != "" {
		tier = " (" + string(e.Tier) + ")"
	}
	return fmt.Sprintf("invalid state transition: %s%s %s -> %s: %s", e.Machine, tier, from, e.To, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidStateTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidStateTransition }

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// NameError is a state or tier name that does not exist.
type NameError struct {
	Kind  string // "state", "tier", "session state", ...
	Name  string
	Valid []string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("unknown %s %q (valid: %s)", e.Kind, e.Name, strings.Join(e.Valid, ", "))
}

// Is makes errors.Is(err, ErrUnknownName) true.
func (e *NameError) Is(target error) bool { return target == ErrUnknownName }

func unknown(kind, name string, valid []string) error {
	return &NameError{Kind: kind, Name: name, Valid: valid}
}
