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

// undoOrder is the undo entries' states in the spec's order, for lists.
var undoOrder = []string{"pending", "compensating", "compensated", "compensation_failed", "skipped", "resolved"}

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

// UndoStatus is the UNDO column beside an effect in state: its entry's
// word, or "-" while the effect has not run (a pending effect, run never or
// failed: nothing is there to undo yet).
func UndoStatus(state, entry string) string {
	if state == "pending" && entry == "pending" {
		return "-"
	}
	return UndoWord(entry)
}

// effectUndoWords are the effect states an undo moves an effect to (one
// undone while it was executing): they say what the undo did.
var effectUndoWords = map[string]string{
	"compensating":        "undoing",
	"compensated":         "undone",
	"compensation_failed": "undo failed",
}

// failedWords are a pending effect's status once a run of it failed
// (failed: the effect records the run's error): the same call runs it
// again, until an undo passes it by.
const (
	failedWord      = "failed"
	failedAgainWord = "failed, can run again"
)

// EffectStatus is an effect's state and its undo entry's (entry "" or "-":
// none) in words a person understands: "committed, undone" for a committed
// effect an undo compensated, "undone" for one undone while it ran,
// "failed, can run again" for a pending one whose run failed (failed), the
// state alone while nothing was undone.
func EffectStatus(state, entry string, failed bool) string {
	if state == "compensation_failed" && entry == "resolved" {
		return UndoWord(entry) // a person put right what the undo could not
	}
	if w, ok := effectUndoWords[state]; ok {
		return w
	}
	if state == "pending" && failed {
		if entry == "skipped" {
			return failedWord // an undo passed it by: it runs no more
		}
		return failedAgainWord
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
			return "nothing to undo" // its reason says why: never ran, or its run failed
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
			return "approval decided, runs on"
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

// UndoCounts are how many of a session's committed effects an undo undid,
// failed to undo, and left to a person who resolved them by hand.
type UndoCounts struct {
	Undone, Failed, Resolved int
}

// words are the counts in words, the zero ones left out: "3 undone, 1 undo
// failed".
func (u UndoCounts) words() string {
	var parts []string
	for _, c := range []struct {
		n    int
		word string
	}{{u.Undone, "undone"}, {u.Failed, "undo failed"}, {u.Resolved, "resolved by hand"}} {
		if c.n > 0 {
			parts = append(parts, strconv.Itoa(c.n)+" "+c.word)
		}
	}
	return strings.Join(parts, ", ")
}

// CountsWords renders an effect count per state and what an undo did to
// the committed ones in words: "4 committed (3 undone, 1 undo failed), 1
// pending". counts is in the order to show; undo counts the committed.
func CountsWords(counts []StateCount, undo UndoCounts) string {
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
		if w := undo.words(); c.State == "committed" && w != "" {
			p += " (" + w + ")"
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

// Selection is what a word a column shows selects: an effect state, an
// undo entry state, pending effects whose run failed; "" selects any.
type Selection struct {
	State, Entry string
	Failed       bool
}

// fold is a typed word as the vocabulary spells it: lower case, single
// spaces.
func fold(word string) string {
	return strings.Join(strings.Fields(strings.ToLower(word)), " ")
}

// UndoNamed is the undo entry state a word of the UNDO column names
// ("undone", "not undone", "undo failed", "resolved by hand"...) or its
// spec name ("compensated"); ok false for neither.
func UndoNamed(word string) (entry string, ok bool) {
	w := fold(word)
	for _, e := range undoOrder {
		if w == e || w == undoWords[e] {
			return e, true
		}
	}
	return "", false
}

// StatusNamed is what a word of the STATE column (EffectStatus) selects:
// "failed" (or "failed, can run again"), an undo's word ("undone", "undo
// failed": the entry's state, whatever the effect's), or "STATE, UNDO"
// ("committed, undone"), whose STATE is the caller's to check. A bare
// spec name is the caller's too; ok false for no such word.
func StatusNamed(word string) (Selection, bool) {
	w := fold(word)
	switch w {
	case failedWord, failedAgainWord:
		return Selection{State: "pending", Failed: true}, true
	}
	if e, ok := UndoNamed(w); ok && undoWords[e] == w && e != "pending" && e != "skipped" {
		return Selection{Entry: e}, true
	}
	if state, undo, ok := strings.Cut(w, ", "); ok && !strings.Contains(state, " ") {
		if e, ok := UndoNamed(undo); ok && undoWords[e] == undo {
			return Selection{State: state, Entry: e}, true
		}
	}
	return Selection{}, false
}

// StatusWordList lists the words of the STATE column StatusNamed takes,
// besides the spec's names.
func StatusWordList() []string {
	return []string{failedWord, failedAgainWord, "undoing", "undone", "undo failed", "resolved by hand", "STATE, UNDO (committed, undone)"}
}

// UndoWordList lists the words of the UNDO column, then the spec's names,
// that UndoNamed takes.
func UndoWordList() []string {
	var out []string
	for _, e := range undoOrder {
		out = append(out, undoWords[e])
	}
	return append(out, undoOrder...)
}
