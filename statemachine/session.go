package statemachine

// SessionState is the state of a session (one agent run or CI pipeline).
type SessionState string

// The session states of the design.
const (
	SessionActive           SessionState = "active"
	SessionAwaitingApproval SessionState = "awaiting_approval"
	SessionCompleted        SessionState = "completed"
	SessionFailed           SessionState = "failed"
	SessionHalted           SessionState = "halted"
	SessionCompensating     SessionState = "compensating"
	SessionCompensated      SessionState = "compensated"
)

// SessionStates lists every session state.
var SessionStates = []SessionState{SessionActive, SessionAwaitingApproval, SessionCompleted, SessionFailed, SessionHalted, SessionCompensating, SessionCompensated}

// Valid reports whether s is a known session state.
func (s SessionState) Valid() bool { return contains(SessionStates, s) }

// AcceptsEffects reports whether new effects may be registered in a session in
// this state: a waiting session still accepts the other calls of a live agent.
func (s SessionState) AcceptsEffects() bool {
	return s == SessionActive || s == SessionAwaitingApproval
}

// IsTerminal reports whether no transition leaves s. A completed session
// is not: rolling back a run that finished is the most common undo of all.
func (s SessionState) IsTerminal() bool { return s == SessionCompensated }

// ParseSessionState turns a name into a SessionState.
func ParseSessionState(name string) (SessionState, error) {
	s := SessionState(name)
	if !s.Valid() {
		names := make([]string, len(SessionStates))
		for i, v := range SessionStates {
			names[i] = string(v)
		}
		return "", unknown("session state", name, names)
	}
	return s, nil
}

// SessionTransition is one row of the session table.
type SessionTransition struct {
	From, To SessionState
	Trigger  string
}

// sessionTransitions is the session table of the design. Its triggers are
// persisted, as the effect table's are (see transitions).
var sessionTransitions = []SessionTransition{
	{SessionActive, SessionAwaitingApproval, "Irreversible effect awaits approval"},
	{SessionAwaitingApproval, SessionActive, "No effect waits for approval any more"},
	{SessionActive, SessionHalted, "Effect rejected"},
	{SessionAwaitingApproval, SessionHalted, "Effect rejected"},
	{SessionActive, SessionCompleted, "Caller completes the session"},
	{SessionAwaitingApproval, SessionCompleted, "Caller completes the session"},
	{SessionActive, SessionFailed, "Caller fails the session"},
	{SessionAwaitingApproval, SessionFailed, "Caller fails the session"},
	{SessionActive, SessionCompensating, "Undo starts"},
	{SessionFailed, SessionCompensating, "Undo starts"},
	{SessionHalted, SessionCompensating, "Undo starts"},
	{SessionAwaitingApproval, SessionCompensating, "Undo starts"},
	{SessionCompleted, SessionCompensating, "Undo starts"},
	{SessionCompensating, SessionCompensated, "Undo stack empty"},
	{SessionCompensating, SessionHalted, TriggerSessionCompensationFailed},
	// Not in the spec, which halts a session for good: a person who
	// rejected one call (or another who looked) lets the agent go on.
	{SessionHalted, SessionActive, TriggerSessionResumed},
}

// The triggers of session moves that PostgreSQL's role checks compare
// (storage/pgstore's schema): persisted, as stored records and the
// database's triggers hold them. Changing one breaks both.
const (
	// TriggerSessionResumed is the trigger of a halted session's
	// resumption: an approver's, as the rejection that halted it was.
	TriggerSessionResumed = "Person resumes the session"
	// TriggerSessionCompensationFailed halts a session whose undo failed
	// for good: an approver's, as the undo is.
	TriggerSessionCompensationFailed = "Compensation failed permanently"
)

// SessionTransitions returns a copy of the session table.
func SessionTransitions() []SessionTransition {
	return append([]SessionTransition(nil), sessionTransitions...)
}

// Reasons for refused session transitions.
const (
	ReasonSessionTerminal = "Terminal session state. No further transitions."
	ReasonSessionNoSuch   = "Not a transition of the session table."
)

// ValidateSession checks a session transition against the table.
func ValidateSession(from, to SessionState) (SessionTransition, error) {
	fail := func(reason string) (SessionTransition, error) {
		return SessionTransition{}, &TransitionError{Machine: "session", From: string(from), To: string(to), Reason: reason}
	}
	if !from.Valid() || !to.Valid() {
		return fail(ReasonUnknownState)
	}
	if from.IsTerminal() {
		return fail(ReasonSessionTerminal)
	}
	for _, t := range sessionTransitions {
		if t.From == from && t.To == to {
			return t, nil
		}
	}
	return fail(ReasonSessionNoSuch)
}

// EntryState is the state of an undo-stack entry. An entry mirrors its effect
// where the spec allows and carries the compensation where it does not (a
// committed effect stays committed; its entry records the undo).
type EntryState string

// Undo-entry states. EntryResolved records an operator's manual fix of a failed
// compensation, so that the next undo walks on.
const (
	EntryPending            EntryState = "pending"
	EntryCompensating       EntryState = "compensating"
	EntryCompensated        EntryState = "compensated"
	EntryCompensationFailed EntryState = "compensation_failed"
	EntrySkipped            EntryState = "skipped"
	EntryResolved           EntryState = "resolved"
)

// ParseEntryState turns a name into an EntryState.
func ParseEntryState(name string) (EntryState, error) {
	s := EntryState(name)
	if !s.Valid() {
		return "", unknown("undo entry state", name, words(EntryStates))
	}
	return s, nil
}

func words[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// EntryStates lists every undo-entry state.
var EntryStates = []EntryState{EntryPending, EntryCompensating, EntryCompensated, EntryCompensationFailed, EntrySkipped, EntryResolved}

// Valid reports whether s is a known entry state.
func (s EntryState) Valid() bool { return contains(EntryStates, s) }

// Done reports whether the LIFO walk may pass over this entry.
func (s EntryState) Done() bool {
	return s == EntryCompensated || s == EntrySkipped || s == EntryResolved
}

// entryTransitions is the undo-entry table. Its triggers are persisted, as
// the effect table's are (see transitions).
var entryTransitions = map[[2]EntryState]string{
	{EntryPending, EntryCompensating}:            "Undo walk reaches the entry",
	{EntryPending, EntrySkipped}:                 "Effect never ran",
	{EntryCompensating, EntryCompensated}:        "Compensation succeeds",
	{EntryCompensating, EntryCompensationFailed}: "Compensation exhausted retries",
	{EntryCompensationFailed, EntryResolved}:     "Operator resolved by hand",
}

// ValidateEntry checks an undo-entry transition and returns its trigger.
func ValidateEntry(from, to EntryState) (string, error) {
	if !from.Valid() || !to.Valid() {
		return "", &TransitionError{Machine: "undo entry", From: string(from), To: string(to), Reason: ReasonUnknownState}
	}
	if trigger, ok := entryTransitions[[2]EntryState{from, to}]; ok {
		return trigger, nil
	}
	reason := "Not a transition of the undo-entry table."
	if from.Done() {
		reason = "Terminal entry state. No further transitions."
	}
	return "", &TransitionError{Machine: "undo entry", From: string(from), To: string(to), Reason: reason}
}
