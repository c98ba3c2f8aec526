package textfmt

import (
	"strconv"
	"strings"
)

// The vocabulary a person reads, the commands' and the view's, in one
// place: the spec's state and trigger names stay the log's and JSON's (for
// machines); these are the words shown beside them. They take the names as
// strings: this package sits below the state machine.

// undoWords name an undo entry's states so that none reads like an
// effect's (the entry's "pending" is "not undone yet", not "not run yet").
var undoWords = map[string]string{
	"pending":             "not undone",
	"compensating":        "undoing",
	"compensated":         "undone",
	"compensation_failed": "undo failed",
	"skipped":             "nothing to undo",
	"resolved":            "resolved by hand",
}

// UndoWord is an undo entry's state as a person reads it; "-" for none.
func UndoWord(entry string) string {
	if entry == "" || entry == "-" {
		return "-"
	}
	if w, ok := undoWords[entry]; ok {
		return w
	}
	return entry
}

// effectUndoWords are the effect states an undo moves an effect to (one
// undone while it was executing): they say what the undo did.
var effectUndoWords = map[string]string{
	"compensating":        "undoing",
	"compensated":         "undone",
	"compensation_failed": "undo failed",
}

// EffectStatus is an effect's state and its undo entry's (entry "" or "-":
// none) in words a person understands: "committed, undone" for a committed
// effect an undo compensated, "undone" for one undone while it ran, the
// state alone while nothing was undone.
func EffectStatus(state, entry string) string {
	if w, ok := effectUndoWords[state]; ok {
		return w
	}
	switch entry {
	case "", "-", "pending", "skipped":
		return state
	}
	return state + ", " + UndoWord(entry)
}

// StatusColor is the colour of an EffectStatus: the undo's, once there is one.
func StatusColor(state, entry string) string {
	switch {
	case effectUndoWords[state] != "":
		return state
	case entry == "compensating" || entry == "compensated" || entry == "compensation_failed" || entry == "resolved":
		return entry
	}
	return state
}

// Record is what HistoryWords reads of one history record.
type Record struct {
	Kind, From, To, Trigger, Actor string
}

// HistoryWords says what a history record records, in plain words that
// name no producer (an exec step's approval is no proxy's): "ran",
// "committed", "approved by alice", "undone by bob". The record keeps the
// spec's trigger for machines.
func HistoryWords(r Record) string {
	by := ""
	if r.Actor != "" {
		by = " by " + r.Actor
	}
	switch r.Kind {
	case "answer":
		return "answer reached the client"
	case "input":
		// An input round's record: its trigger says which side of it
		// (the server asked; the client's next round went out).
		return r.Trigger
	}
	// An undo moves an effect, its undo entry and its session alike.
	switch {
	case r.From != "" && r.To == "compensating":
		return "undo started" + by
	case r.To == "compensated":
		return "undone" + by
	case r.To == "compensation_failed":
		return "undo failed"
	}
	switch r.Kind {
	case "undo":
		switch r.To {
		case "pending":
			return "undo entry made: not undone"
		case "skipped":
			return "nothing to undo: it never ran"
		case "resolved":
			return "resolved by hand" + by
		}
	case "session":
		switch {
		case r.From == "":
			return "started" + by
		case r.To == "halted" && r.From == "compensating":
			return "halted: an undo failed"
		case r.To == "halted":
			return "halted: a call was rejected"
		case r.From == "halted" && r.To == "active":
			return "resumed" + by
		case r.To == "awaiting_approval":
			return "waits for an approval"
		case r.From == "awaiting_approval" && r.To == "active":
			return "goes on"
		}
		return strings.ReplaceAll(r.To, "_", " ") + by
	default:
		switch {
		case r.From == "":
			return "registered" + by
		case r.To == "executing":
			return "ran"
		case r.To == "approved":
			return "approved" + by
		case r.To == "rejected" && r.Actor == "system:timeout":
			return "approval request expired"
		case r.To == "rejected":
			return "rejected" + by
		case r.To == "replayed":
			return "replayed: answered from the log"
		case r.To == "committed":
			return "committed"
		case r.From == "executing" && r.To == "pending" && r.Trigger == "Fail RPC":
			return "failed: it may be run again"
		case r.From == "executing" && r.To == "pending":
			return "resolved as not run" + by
		}
	}
	return r.Trigger
}

// CountsWords renders an effect count per state and the undone count in
// words: "4 committed (4 undone), 1 pending". counts is in the order to
// show; undone is how many of the committed were undone.
func CountsWords(counts []StateCount, undone int) string {
	var parts []string
	for _, c := range counts {
		if c.N == 0 {
			continue
		}
		w := c.State
		if u, ok := effectUndoWords[c.State]; ok {
			w = u
		}
		p := strconv.Itoa(c.N) + " " + w
		if c.State == "committed" && undone > 0 {
			p += " (" + strconv.Itoa(undone) + " undone)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// StateCount is how many effects are in one state.
type StateCount struct {
	State string
	N     int
}

// approvalWords name an approval request's outcomes as a person reads them;
// approved and rejected read as they are.
var approvalWords = map[string]string{
	"pending":   "waiting",
	"timed_out": "timed out",
	"closed":    "closed unanswered",
}

// ApprovalWord is an approval request's outcome in words: "waiting",
// "timed out", "closed unanswered" (its session stopped taking calls).
func ApprovalWord(outcome string) string {
	if w, ok := approvalWords[outcome]; ok {
		return w
	}
	return outcome
}
