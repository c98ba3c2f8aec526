package statemachine

// State is an effect state; its value is the spec's DB value.
type State string

// The nine effect states of the spec.
const (
	Pending            State = "pending"
	Executing          State = "executing"
	Committed          State = "committed"
	Compensating       State = "compensating"
	Compensated        State = "compensated"
	CompensationFailed State = "compensation_failed"
	Approved           State = "approved"
	Rejected           State = "rejected"
	Replayed           State = "replayed"
)

// States lists every effect state in the spec's order.
var States = []State{Pending, Executing, Committed, Compensating, Compensated, CompensationFailed, Approved, Rejected, Replayed}

// IsTerminal reports whether the spec allows no transition out of s.
func (s State) IsTerminal() bool {
	switch s {
	case Committed, Compensated, CompensationFailed, Rejected, Replayed:
		return true
	}
	return false
}

// Valid reports whether s is one of the spec's states.
func (s State) Valid() bool { return contains(States, s) }

// ParseState turns a DB value into a State.
func ParseState(name string) (State, error) {
	s := State(name)
	if !s.Valid() {
		names := make([]string, len(States))
		for i, v := range States {
			names[i] = string(v)
		}
		return "", unknown("state", name, names)
	}
	return s, nil
}

// Tier says how reversible a tool call is.
type Tier string

// The three tiers.
const (
	Safe         Tier = "safe"
	Compensable  Tier = "compensable"
	Irreversible Tier = "irreversible"
)

// Tiers lists every tier.
var Tiers = []Tier{Safe, Compensable, Irreversible}

// Valid reports whether t is a known tier.
func (t Tier) Valid() bool { return t == Safe || t == Compensable || t == Irreversible }

// ParseTier turns a name into a Tier.
func ParseTier(name string) (Tier, error) {
	t := Tier(name)
	if !t.Valid() {
		return "", unknown("tier", name, []string{"safe", "compensable", "irreversible"})
	}
	return t, nil
}

// Reachable reports whether an effect of tier t can ever be in state s
// (the spec's "Compensable only" and "Irreversible only" rules).
func (t Tier) Reachable(s State) bool {
	switch s {
	case Compensating, Compensated, CompensationFailed:
		return t == Compensable
	case Approved, Rejected:
		return t == Irreversible
	}
	return t != Safe && s.Valid()
}

// Transition is one row of the spec's table of valid transitions.
type Transition struct {
	From        State
	To          State
	Trigger     string
	Description string
}

// transitions is the spec's "Valid Transitions" table, row for row. Its
// triggers are persisted: every history record holds its move's trigger,
// under the record's hash, and PostgreSQL's role checks compare some of
// them (the Trigger constants). A changed text breaks the logs stored and
// the database's checks.
var transitions = []Transition{
	{Pending, Executing, "Intercept → Execute", "New tool call routed for execution."},
	{Pending, Approved, "Human approves via dashboard", "Irreversible tool approved, awaiting proxy to resume."},
	{Pending, Rejected, "Human rejects via dashboard", "Irreversible tool rejected, session halted."},
	{Pending, Replayed, "Intercept → Replay", "Duplicate call signature detected, cached result returned."},
	{Executing, Committed, "Commit RPC", "Tool executed successfully."},
	{Executing, Pending, TriggerFail, "Tool execution failed. Effect is reset to retry."},
	{Executing, Compensating, "Saga orchestrator on session failure", "LIFO undo of a Compensable effect."},
	{Approved, Executing, "Proxy resumes tool call", "Irreversible tool starts execution after approval."},
	{Compensating, Compensated, "Compensation succeeds", "Undo completed successfully."},
	{Compensating, CompensationFailed, "Compensation exhausted retries", "Permanent compensation failure."},
}

// Transitions returns a copy of the spec's valid-transition table.
func Transitions() []Transition { return append([]Transition(nil), transitions...) }

// specificReasons is the spec's "Invalid Transitions" table, for its named pairs.
var specificReasons = map[[2]State]string{
	{Pending, Compensating}:   "Compensation requires prior execution.",
	{Committed, Compensating}: "Compensation retry path not implemented.",
	{Executing, Approved}:     "Approval is only from Pending.",
	{Pending, Committed}:      "Must execute first.",
}

// Reasons used by Validate besides the spec's named pairs.
const (
	ReasonTerminal        = "Terminal state. No further transitions."
	ReasonSafe            = "Safe tier never enters the effect state machine."
	ReasonCompensableOnly = "Compensating / Compensated / CompensationFailed are only reachable for Compensable tier effects."
	ReasonIrreversible    = "Approved / Rejected are only reachable for Irreversible tier effects."
	ReasonNoSkipping      = "No skipping: not a transition of the spec; every transition must go through the defined path."
	ReasonUnknownState    = "Unknown state."
)

func tierReason(s State) string {
	switch s {
	case Approved, Rejected:
		return ReasonIrreversible
	}
	return ReasonCompensableOnly
}

// Validate checks the transition from -> to for an effect of the given tier and
// returns the matching row of the spec's table, or a *TransitionError carrying
// the spec's reason. Precedence, most fundamental first: unknown state, safe
// tier, tier rules, the spec's named invalid pairs, terminal states, then
// anything not in the table.
func Validate(tier Tier, from, to State) (Transition, error) {
	fail := func(reason string) (Transition, error) {
		return Transition{}, &TransitionError{Machine: "effect", Tier: tier, From: string(from), To: string(to), Reason: reason}
	}
	if !from.Valid() || !to.Valid() {
		return fail(ReasonUnknownState)
	}
	if !tier.Valid() || tier == Safe {
		return fail(ReasonSafe)
	}
	if !tier.Reachable(from) {
		return fail(tierReason(from))
	}
	if !tier.Reachable(to) {
		return fail(tierReason(to))
	}
	if r, ok := specificReasons[[2]State{from, to}]; ok {
		return fail(r)
	}
	if from.IsTerminal() {
		return fail(ReasonTerminal)
	}
	for _, t := range transitions {
		if t.From == from && t.To == to {
			return t, nil
		}
	}
	return fail(ReasonNoSkipping)
}

// Next lists the states an effect of this tier may move to from `from`, in the
// spec's table order.
func Next(tier Tier, from State) []State {
	var out []State
	for _, t := range transitions {
		if t.From != from {
			continue
		}
		if _, err := Validate(tier, from, t.To); err == nil {
			out = append(out, t.To)
		}
	}
	return out
}

// The triggers of effect moves that PostgreSQL's role checks compare
// (storage/pgstore's schema): persisted, as stored records and the
// database's triggers hold them. Changing one breaks both.
const (
	// TriggerFail is the runner's fail (executing -> pending): an agent's.
	TriggerFail = "Fail RPC"
	// TriggerResolvedInDoubt is the trigger of a person's resolve of a call
	// in doubt (executing -> pending, as a fail): a decision, not the
	// runner's fail, so that the database can tell it is an approver's.
	TriggerResolvedInDoubt = "Person resolves the call in doubt"
)
