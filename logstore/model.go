package logstore

// The domain vocabulary lives in package model; these names keep the
// callers of logstore compiling while they move to it (issue 13).

import "github.com/undolog/undolog/model"

type (
	Approval      = model.Approval
	ApprovalRound = model.ApprovalRound
	Change        = model.Change
	Compensation  = model.Compensation
	Decision      = model.Decision
	Effect        = model.Effect
	EffectDetail  = model.EffectDetail
	HistoryRecord = model.HistoryRecord
	Liveness      = model.Liveness
	Outcome       = model.Outcome
	Owner         = model.Owner
	Session       = model.Session
	UndoEntry     = model.UndoEntry
)

const (
	ApprovalApproved    = model.ApprovalApproved
	ApprovalClosed      = model.ApprovalClosed
	ApprovalPending     = model.ApprovalPending
	ApprovalRejected    = model.ApprovalRejected
	ApprovalTimedOut    = model.ApprovalTimedOut
	CompensationCommand = model.CompensationCommand
	CompensationMCP     = model.CompensationMCP
	CompensationManual  = model.CompensationManual
	DecisionApproved    = model.DecisionApproved
	DecisionClosed      = model.DecisionClosed
	DecisionExpired     = model.DecisionExpired
	DecisionRejected    = model.DecisionRejected
	DecisionTaken       = model.DecisionTaken
	DecisionWaiting     = model.DecisionWaiting
	KindEffect          = model.KindEffect
	KindSession         = model.KindSession
	KindUndo            = model.KindUndo
	OutcomeInProgress   = model.OutcomeInProgress
	OutcomeNew          = model.OutcomeNew
	OutcomeRejected     = model.OutcomeRejected
	OutcomeReplayed     = model.OutcomeReplayed
	OutcomeRetry        = model.OutcomeRetry
	OutcomeSafe         = model.OutcomeSafe
	OwnerAlive          = model.OwnerAlive
	OwnerDead           = model.OwnerDead
	OwnerElsewhere      = model.OwnerElsewhere
	OwnerNone           = model.OwnerNone
	Redacted            = model.Redacted
	SessionActor        = model.SessionActor
	TimeoutActor        = model.TimeoutActor
)

var (
	ErrBusy             = model.ErrBusy
	ErrConflict         = model.ErrConflict
	ErrCorrupt          = model.ErrCorrupt
	ErrInDoubt          = model.ErrInDoubt
	ErrInProgress       = model.ErrInProgress
	ErrInvalidInput     = model.ErrInvalidInput
	ErrNewerSchema      = model.ErrNewerSchema
	ErrNotFound         = model.ErrNotFound
	ErrSessionNotActive = model.ErrSessionNotActive
	CallStillRunning    = model.CallStillRunning
	CanonicalArgs       = model.CanonicalArgs
	FieldsHash          = model.FieldsHash
	NewOwner            = model.NewOwner
	NewSessionID        = model.NewSessionID
	Redact              = model.Redact
	Signature           = model.Signature
	ValidRedactions     = model.ValidRedactions
	ValidSessionID      = model.ValidSessionID
	ValidToolName       = model.ValidToolName
)
