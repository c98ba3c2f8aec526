// Package model owns undolog's domain vocabulary, shared by every layer above
// storage: effects, sessions, their history, undo entries, approvals, the
// outcomes of an intercept, the errors, owners (which process runs a call),
// call signatures and canonical args, names and redaction. It does no I/O but
// reading which processes live.
package model

import (
	"encoding/json"
	"time"

	sm "github.com/undolog/undolog/statemachine"
)

// Effect is one intercepted call. JSON names are part of undolog's stable output.
type Effect struct {
	ID             uint64          `json:"id"`
	Session        string          `json:"session"`
	Tool           string          `json:"tool"`
	Tier           sm.Tier         `json:"tier"`
	State          sm.State        `json:"state"`
	CallSignature  string          `json:"call_signature"`
	Args           json.RawMessage `json:"args"`
	Result         json.RawMessage `json:"result"`
	Error          string          `json:"error"`
	ReplayOf       *uint64         `json:"replay_of"`
	ReplayCount    int             `json:"replay_count"`
	LastReplayedAt *time.Time      `json:"last_replayed_at"`
	Compensation   *Compensation   `json:"compensation"`
	Key            string          `json:"key,omitempty"`
	// Redact is the redaction patterns applied to args and result.
	Redact    []string  `json:"redact,omitempty"`
	Owner     *Owner    `json:"owner,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// HistoryLen and HistoryHead pin the end of the hash chain, so that
	// dropping the newest history records is detected too.
	HistoryLen  uint32 `json:"history_len"`
	HistoryHead string `json:"history_head"`
	// Damage is set by a read, never stored: what of the effect could not
	// be read (a record that does not decode). When its own record is what
	// failed, only ID is known and State is StateDamaged.
	Damage string `json:"damage,omitempty"`
}

// StateDamaged, EntryDamaged and SessionDamaged are what a read shows for
// an effect, an undo entry or a session whose record could not be read: no state of the spec's, so
// that no rule acts on it.
const (
	StateDamaged   sm.State        = "damaged"
	EntryDamaged   sm.EntryState   = "damaged"
	SessionDamaged sm.SessionState = "damaged"
)

// Compensation describes how to undo an effect.
type Compensation struct {
	// Kind is "command" (Argv run without a shell), "mcp" (Tool called on the
	// session's upstream server with Args), "cases" (Args holds a proxy
	// policy's cases, one chosen at undo: an mcp call or a command run in
	// Dir) or "manual" (an operator confirms).
	Kind string   `json:"kind"`
	Argv []string `json:"argv,omitempty"`
	// Dir is the working directory for Argv; empty: the undo runner's own.
	Dir  string `json:"dir,omitempty"`
	Tool string `json:"tool,omitempty"`
	// Args is a template for the mcp call's arguments.
	Args json.RawMessage `json:"args,omitempty"`
	// Capture is the pre-image an mcp capture call returned before the call.
	Capture json.RawMessage `json:"capture,omitempty"`
	Note    string          `json:"note,omitempty"`
	// MaxRetries and InitialBackoffMS tune the undo runner; zero means its defaults.
	MaxRetries       int `json:"max_retries,omitempty"`
	InitialBackoffMS int `json:"initial_backoff_ms,omitempty"`
}

// Compensation kinds.
const (
	CompensationCommand = "command"
	CompensationMCP     = "mcp"
	CompensationManual  = "manual"
	CompensationCases   = "cases"
)

// Owner records which process is executing an effect, so that a later caller
// can tell a live owner from one that died (an effect in doubt).
type Owner struct {
	PID       int       `json:"pid"`
	Host      string    `json:"host"`
	StartedAt time.Time `json:"started_at"`
	// ProcessStart is when the process started, as its system counts it
	// (Linux: clock ticks after boot), so that a reused pid is not taken
	// for the owner; 0 where unknown (other systems, older logs).
	ProcessStart uint64 `json:"process_start,omitempty"`
	// LeaseUntil is when the owner's lease runs out unless its process
	// renews it: past it, another host judges the owner gone (see
	// Owner.LivenessAt). Zero: no lease (older logs, owners that do not
	// renew). Renewals change it without a history record.
	LeaseUntil time.Time `json:"lease_until,omitzero"`
}

// Record kinds of the history.
const (
	KindEffect  = "effect"
	KindUndo    = "undo"
	KindSession = "session"
	// KindAnswer records that a committed call's answer was written to
	// its client (the proxy's replay rule asks it; see effectlog.Answered).
	KindAnswer = "answer"
	// KindInput records an input round of an executing call: its server
	// asked the client for input, or the client's next round went to it
	// (see effectlog.InputRound).
	KindInput = "input"
)

// HistoryRecord is one append-only entry of an effect's (or a session's)
// history. Hash covers every field and PrevHash, chaining the records; from
// HashWithContent on, also what the effect says at that point.
type HistoryRecord struct {
	Seq      uint32 `json:"seq"`
	Kind     string `json:"kind"`
	EffectID uint64 `json:"effect_id,omitempty"`
	Session  string `json:"session"`
	From     string `json:"from"`
	To       string `json:"to"`
	Trigger  string `json:"trigger"`
	Actor    string `json:"actor"`
	// Role is the database role the engine was authenticated as when it
	// wrote the record (a shared log's); "" where an engine authenticates
	// no one (a log file). Actor is who the caller says it is (--as).
	Role     string    `json:"role,omitempty"`
	Reason   string    `json:"reason"`
	Error    string    `json:"error,omitempty"`
	At       time.Time `json:"at"`
	PrevHash string    `json:"prev_hash"`
	Hash     string    `json:"hash"`
	// HashVersion is how Hash was taken: 0 (records of earlier undologs) or
	// HashWithContent.
	HashVersion int `json:"hash_version,omitempty"`
}

// HashWithContent is the HashVersion of the records this undolog writes:
// the hash also covers what the effect (or session) says at that point, so
// that an args, result, error, compensation or meta changed on disk breaks
// the chain. Records of earlier undologs (version 0) keep verifying under
// their rule.
const HashWithContent = 2

// Session groups the effects of one agent run or CI pipeline.
type Session struct {
	ID        string            `json:"id"`
	State     sm.SessionState   `json:"state"`
	Meta      map[string]string `json:"meta"`
	Reason    string            `json:"reason"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	// Counts holds the number of the session's effects in each state.
	Counts           map[sm.State]int `json:"counts"`
	Effects          int              `json:"effects"`
	PendingApprovals int              `json:"pending_approvals"`
	// Upstream is the MCP server command a proxy session runs behind.
	Upstream []string `json:"upstream,omitempty"`
	// UpstreamDir is the directory the upstream ran in: undo starts it
	// there, so that a relative path in its command names the same place.
	UpstreamDir string `json:"upstream_dir,omitempty"`
	// UpstreamEnv is what located the upstream's state where it ran (see
	// StateEnv); nil: nothing recorded. Only the session's history states
	// it: VerifySession reads it from there, other reads leave it nil.
	UpstreamEnv StateEnv `json:"upstream_env,omitempty"`
	// UpstreamEnvMoved says which variable of UpstreamEnv the session's
	// history states otherwise before (a proxy joined it on another
	// state), and how; "": none. Set by VerifySession as UpstreamEnv.
	UpstreamEnvMoved string `json:"upstream_env_moved,omitempty"`
	HistoryLen       uint32 `json:"history_len"`
	HistoryHead      string `json:"history_head"`
	// Seq orders sessions by creation (the sessions_by_time index key).
	Seq uint64 `json:"seq"`
	// Damage is set by a listing, never stored: the session's record could
	// not be read (only ID and Seq are known; State is SessionDamaged).
	Damage string `json:"damage,omitempty"`
}

// StateEnv is what locates an MCP server's state, as a proxy ran it: the
// environment variables its policy names, each with its value then, nil for
// one that was unset (the server's own default place). These are places,
// not secrets: no other variable is recorded.
type StateEnv map[string]*string

// Who is who a record says made it: the --as name, and the database role
// it was written as (which the database checks) where the log has one.
func (r HistoryRecord) Who() string {
	if r.Role == "" {
		return r.Actor
	}
	return r.Actor + " (role " + r.Role + ")"
}

// UndoEntry is one entry of a session's undo stack.
type UndoEntry struct {
	EffectID     uint64        `json:"effect_id"`
	Session      string        `json:"session"`
	Tool         string        `json:"tool"`
	State        sm.EntryState `json:"state"`
	Compensation Compensation  `json:"compensation"`
	Attempts     int           `json:"attempts"`
	LastError    string        `json:"last_error"`
	CreatedAt    time.Time     `json:"created_at"`
	UpdatedAt    time.Time     `json:"updated_at"`
	// Owner is the process running the compensation while it is compensating.
	Owner *Owner `json:"owner,omitempty"`
}

// Approval outcomes.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
	ApprovalTimedOut = "timed_out"
	// ApprovalClosed: the session stopped accepting effects while the request
	// waited; nobody decided, and the effect stays pending.
	ApprovalClosed = "closed"
)

// TimeoutActor is the actor that closes expired approval requests.
const TimeoutActor = "system:timeout"

// SessionActor is the actor that closes the requests of a session that
// stopped accepting effects.
const SessionActor = "system:session"

// WindowActorPrefix starts the actor of a decision made by the person in an
// MCP client's window (the proxy's approval channel), followed by the
// client's name. It is reserved for the proxy: a command line cannot act
// under it, so that such a record always comes from the window.
const WindowActorPrefix = "client-user:"

// Approval is the request for a human decision on an irreversible effect.
type Approval struct {
	EffectID uint64          `json:"effect_id"`
	Session  string          `json:"session"`
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"args"`
	Reason   string          `json:"reason"`
	// ApprovalRound is the request as it stands now, and its decision.
	ApprovalRound
	// Earlier holds the decisions of the executions before this one, oldest
	// first: an effect that failed after its approval is asked again.
	Earlier []ApprovalRound `json:"earlier,omitempty"`
}

// ApprovalRound is one earlier request of an approval and its decision.
type ApprovalRound struct {
	RequestedAt time.Time  `json:"requested_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
	Outcome     string     `json:"outcome"`
	DecidedBy   string     `json:"decided_by"`
	DecidedAt   *time.Time `json:"decided_at"`
	Decision    string     `json:"decision_reason"`
}

// Outcome says what Intercept did with a call.
type Outcome string

// Intercept outcomes.
const (
	OutcomeNew        Outcome = "new"         // a new effect, pending
	OutcomeReplayed   Outcome = "replayed"    // owner committed: cached result, nothing to run
	OutcomePending    Outcome = "pending"     // owner registered before and never started: start it, run it
	OutcomeRetry      Outcome = "retry"       // owner pending again after a failure: run it again
	OutcomeInProgress Outcome = "in_progress" // owner executing or awaiting a decision
	OutcomeRejected   Outcome = "rejected"    // owner rejected: the answer stands
	OutcomeSafe       Outcome = "safe"        // safe tier: nothing written, run directly
	// OutcomeUnregistered: asked with NoNewEffect, the call would be a new
	// effect; nothing was written.
	OutcomeUnregistered Outcome = "unregistered"
)

// Change carries who asks for a transition, why, and what it brings.
type Change struct {
	Actor  string
	Reason string
	Result json.RawMessage // commit: the result snapshot (JSON)
	Error  string          // fail, compensation failure: what went wrong
	Owner  *Owner          // start, compensating: the process that runs it
	// ExpectOwner makes a reclaim conditional: the move happens only while
	// the effect (or undo entry) is still owned by exactly this owner, the one
	// judged dead; a zero Owner expects none recorded.
	ExpectOwner *Owner
	// ExpectCall makes a decision conditional on what a person was shown:
	// the move happens only while the effect is still that call (its call
	// signature), not another that took its id (a log replaced under a
	// view). "" expects nothing.
	ExpectCall string
	// ExpectState makes a move conditional on the state a person was shown:
	// an effect another process moved since is not moved on from a state
	// nobody saw (pending -> failed confirmed, executing -> failed done).
	// "" expects nothing.
	ExpectState sm.State
	// Attempts is how many times the undo runner tried the compensation.
	Attempts int
	// Resolve marks a fail of a call in doubt as a person's resolve of it
	// (statemachine.TriggerResolvedInDoubt), which the roles give approvers
	// alone; an agent's reclaim, to run the call again, is a plain fail.
	Resolve bool
}

// EffectDetail is an effect with everything recorded about it.
type EffectDetail struct {
	Effect   Effect          `json:"effect"`
	History  []HistoryRecord `json:"history"`
	Undo     *UndoEntry      `json:"undo"`
	Approval *Approval       `json:"approval"`
}

// Decision is where an irreversible effect stands with its approval request.
type Decision int

// Decisions, as a waiting caller sees them.
const (
	DecisionWaiting  Decision = iota // pending, still in time
	DecisionApproved                 // go ahead: approved for this execution
	DecisionRejected                 // rejected by a person or by system:timeout
	DecisionExpired                  // time is up, not yet recorded: ExpireApprovals records it
	DecisionTaken                    // another caller has moved the effect on
	DecisionClosed                   // the session stopped accepting effects: nobody will decide
)

// Decision reads the effect's approval as a waiting caller needs it.
func (d EffectDetail) Decision(now time.Time) Decision {
	a := d.Approval
	switch {
	case d.Effect.State == sm.Approved:
		return DecisionApproved
	case d.Effect.State == sm.Rejected:
		return DecisionRejected
	case d.Effect.State != sm.Pending:
		return DecisionTaken
	case a != nil && a.Outcome == ApprovalTimedOut:
		return DecisionRejected // not run; the same call asks again
	case a != nil && a.Outcome == ApprovalClosed:
		return DecisionClosed
	case a != nil && a.Outcome == ApprovalPending && a.ExpiresAt != nil && !now.Before(*a.ExpiresAt):
		return DecisionExpired
	}
	return DecisionWaiting
}
