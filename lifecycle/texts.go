package lifecycle

// The texts of the flow, one for each end of a call that did not run, the
// same through every front door: a door names only its own words (Door).

import (
	"fmt"
	"time"

	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
)

// Door is how a front door is named in the flow's texts.
type Door struct {
	// CLI starts the commands the texts name ("undolog --log ADDR" when
	// the log is not the default); "": undolog.
	CLI string
	// Again says how the same call is made again (after "once approved, "):
	// "the same exec runs it", "call echo again with the same arguments".
	Again func(e model.Effect) string
	// Bound names the bound of a wait for a decision: "--approval-timeout 1h".
	Bound string
	// Reclaims names how this door runs a call in doubt again ("rerun with
	// --retry-in-doubt"); "": it does not, and a person resolves it.
	Reclaims string
	// Stopped, if set, says why a wait or a start was cut short, from
	// End.Cause; nil: "interrupted".
	Stopped func(cause error) string
}

func (d Door) cli() string {
	if d.CLI == "" {
		return "undolog"
	}
	return d.CLI
}

func (d Door) again(e model.Effect) string {
	if d.Again == nil {
		return "the same call runs it"
	}
	return d.Again(e)
}

// Text says what happened to a call that did not run here, and what a
// person (or the agent) does about it; "" for one that ran.
func (end End) Text(d Door) string {
	e := end.Call.Effect
	switch end.Ending {
	case Replay:
		return fmt.Sprintf("replayed effect %d (replay of %d): %s did not run again", e.ID, *e.ReplayOf, e.Tool)
	case Rejected:
		a := end.Detail.Approval
		if a == nil {
			return fmt.Sprintf("effect %d (%s) was rejected; it did not run", e.ID, e.Tool)
		}
		why := ""
		if a.Decision != "" {
			why = " (" + a.Decision + ")"
		}
		msg := fmt.Sprintf("effect %d (%s) was rejected by %s%s; it did not run", e.ID, e.Tool, a.DecidedBy, why)
		if s := end.Session; s != nil {
			msg += fmt.Sprintf(", and session %s is halted until a person resumes it: `%s session resume %s --as NAME --reason TEXT`", s.ID, d.cli(), s.ID)
		}
		return msg
	case Expired:
		return fmt.Sprintf("effect %d (%s): its approval request expired; it did not run: run the same call again to ask again", e.ID, e.Tool)
	case InProgress:
		o := e.Owner
		if end.Call.Liveness == model.OwnerElsewhere {
			lease := ""
			if !o.LeaseUntil.IsZero() {
				lease = ", lease until " + o.LeaseUntil.UTC().Format(time.RFC3339Nano)
			}
			return fmt.Sprintf("effect %d is executing on %s (pid %d%s); retry it later", e.ID, o.Host, o.PID, lease)
		}
		return fmt.Sprintf("effect %d is executing (pid %d, since %s); retry it later", e.ID, o.PID, o.StartedAt.Format(time.RFC3339))
	case InDoubt:
		gone := fmt.Sprintf("its owner (%s) died mid-run", e.Owner)
		switch {
		case e.Owner == nil:
			gone = "no owner is recorded"
		case end.Call.Liveness == model.OwnerLapsed:
			gone = "its owner's " + e.Owner.Gone(end.Call.Liveness)
		}
		hint := "check, then " + d.Reclaims
		if d.Reclaims == "" {
			hint = ResolveHint(d.CLI, e.ID)
		}
		return fmt.Sprintf("effect %d is in doubt: %s; it may or may not have taken effect: %s", e.ID, gone, hint)
	case Taken:
		now := ""
		if s := end.Detail.Effect.State; s != "" {
			now = " (it is " + string(s) + ")"
		} else if end.Err != nil {
			now = " (" + end.Err.Error() + ")"
		}
		return fmt.Sprintf("effect %d (%s) was taken up by another process first%s; retry it later", e.ID, e.Tool, now)
	case Abandoned:
		state := "is no longer active"
		if end.Session != nil {
			state = "is " + string(end.Session.State)
		}
		return fmt.Sprintf("effect %d (%s): session %q %s and its approval request was closed; it did not run", e.ID, e.Tool, e.Session, state)
	case Undecided:
		return fmt.Sprintf("effect %d (%s) awaits a person's approval, and no decision came within %s: it did not run. Its request stays open "+
			"(`%s approve %d`, or `%s reject %d`): once approved, %s", e.ID, e.Tool, d.Bound, d.cli(), e.ID, d.cli(), e.ID, d.again(e))
	case Interrupted:
		why := "interrupted"
		if d.Stopped != nil {
			why = d.Stopped(end.Cause)
		}
		if end.Waiting {
			return fmt.Sprintf("effect %d (%s) was not run: %s while it waited for approval; its request stands "+
				"(`%s approve %d`, or `%s reject %d`): once approved, %s", e.ID, e.Tool, why, d.cli(), e.ID, d.cli(), e.ID, d.again(e))
		}
		return fmt.Sprintf("effect %d (%s) was not run: %s before it started; %s", e.ID, e.Tool, why, d.again(e))
	}
	return ""
}

// ResolveHint names what a person does about a call in doubt.
func ResolveHint(cli string, id uint64) string {
	if cli == "" {
		cli = "undolog"
	}
	return fmt.Sprintf("check, then run `%s resolve %d --reason \"what you found\"` and call it again to run it again, or undo the session", cli, id)
}

// text is the note that a wait for a decision on e begins.
func (a Announce) text(e model.Effect, d Door) string {
	expiry := ""
	switch {
	case a.Expires && a.ExpiresIn <= a.WaitsFor:
		expiry = " (expires in " + textfmt.Remaining(a.ExpiresIn) + ")"
	case a.Expires: // a request an earlier run left open outlasts this wait
		expiry = " (expires in " + textfmt.Remaining(a.ExpiresIn) + "; waiting " + textfmt.Duration(a.WaitsFor.Round(time.Second)) + ")"
	}
	return fmt.Sprintf("effect %d (%s, irreversible) awaits approval%s: %s approve %d", e.ID, e.Tool, expiry, d.cli(), e.ID)
}

// UnavailableNote is the note of a wait whose look could not reach the
// log's server (err), or, err nil, that it answers again.
func UnavailableNote(err error) string {
	if err == nil {
		return "the log's server answers again"
	}
	return err.Error() + "; the wait for a decision goes on, trying again until it answers"
}
