package cmd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/saga"
	sm "github.com/undolog/undolog/statemachine"
)

type showOptions struct {
	output string
}

func newCmdShow(f *Factory) *cobra.Command {
	opts := &showOptions{}
	c := &cobra.Command{
		Use:   "show ID... | -",
		Short: "Show effects: fields, full history with actors and reasons, undo entry, approval",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("%s takes effect ids, or - to read them from stdin", c.CommandPath())
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			ids, err := collectIDs(f, args)
			if err != nil {
				return err
			}
			store, err := f.ExistingLog() // one effect: where none can be, not found, said once
			if err != nil {
				return err
			}
			ctx := c.Context()
			details := make([]model.EffectDetail, 0, len(ids))
			// An mcp compensation is called on its session's server.
			upstreams := map[string][]string{}
			// A damaged effect is shown as damaged, by its id, among the
			// others; the command fails once all are shown.
			var damage []string
			for _, id := range ids {
				d, err := store.GetEffect(ctx, id)
				if errors.Is(err, model.ErrCorrupt) {
					details = append(details, d)
					damage = append(damage, fmt.Sprintf("effect %d is damaged: %s", id, d.Effect.Damage))
					continue
				} else if err != nil {
					return err
				}
				details = append(details, d)
				// What it says is shown, but not as if it could be trusted.
				if err := effectlog.CheckEffect(d); err != nil {
					fmt.Fprintln(f.ErrOut, "undolog: warning: "+textfmt.Escape(textfmt.OneLine(err.Error())))
				}
				if c := d.Effect.Compensation; c != nil && (c.Kind == model.CompensationMCP || c.Kind == model.CompensationCases) {
					if _, ok := upstreams[d.Effect.Session]; !ok {
						sess, err := store.GetSession(ctx, d.Effect.Session)
						if err != nil {
							return err
						}
						upstreams[d.Effect.Session] = sess.Upstream
					}
				}
			}
			switch {
			case opts.output == formatJSON && len(args) == 1 && args[0] != "-":
				err = writeJSON(f.Out, details[0])
			case opts.output != formatText:
				err = writeList(f.Out, opts.output, details)
			default:
				for i, d := range details {
					if i > 0 {
						fmt.Fprintln(f.Out)
					}
					if err = printEffectDetail(f, d, upstreams[d.Effect.Session]); err != nil {
						break
					}
				}
			}
			if err == nil && len(damage) > 0 {
				err = fmt.Errorf("%w: %s; run undolog verify", model.ErrCorrupt, strings.Join(damage, "; "))
			}
			return err
		},
	}
	addFormatFlag(c, &opts.output, false)
	addHeadersFlag(f, c)
	return c
}

func printEffectDetail(f *Factory, d model.EffectDetail, upstream []string) error {
	now := f.Now()
	e := d.Effect
	out := f.Out
	entry := ""
	if d.Undo != nil {
		entry = string(d.Undo.State)
	}
	status := textfmt.EffectStatus(string(e.State), entry, e.Error != "")
	if f.Color() {
		status = textfmt.Paint(status, textfmt.StateColor(textfmt.StatusColor(string(e.State), entry)))
	}
	fmt.Fprintf(out, "effect %d  %s\n", e.ID, status)
	field := func(name, value string) {
		if name != "" {
			name += ":"
		}
		fmt.Fprintf(out, "%-13s %s\n", name, textfmt.Escape(value))
	}
	if e.Damage != "" {
		field("damage", e.Damage)
	}
	if e.State == model.StateDamaged {
		return nil // nothing else of it could be read
	}
	field("session", e.Session)
	field("tool", e.Tool+" ("+string(e.Tier)+")")
	field("signature", e.CallSignature)
	if e.Key != "" {
		field("key", e.Key)
	}
	field("args", string(e.Args))
	if len(e.Result) > 0 {
		field("result", string(e.Result))
	}
	if e.Error != "" {
		field("error", e.Error)
	}
	if e.ReplayOf != nil {
		field("replay of", strconv.FormatUint(*e.ReplayOf, 10))
	}
	if e.ReplayCount > 0 {
		field("replays", fmt.Sprintf("%d (last %s ago)", e.ReplayCount, ago(now, *e.LastReplayedAt)))
	}
	if c := e.Compensation; c != nil {
		if lines, err := saga.CaseLines(*c); c.Kind == model.CompensationCases && err == nil {
			// One line a case: each may be long.
			field("compensation", textfmt.Count(len(lines), "case")+compensationDir(*c)+compensationServer(*c, upstream))
			for _, l := range lines {
				field("", "  "+saga.Shorten(l))
			}
		} else {
			field("compensation", saga.Shorten(describeCompensation(*c))+compensationServer(*c, upstream))
		}
		if len(c.Capture) > 0 {
			field("capture", textfmt.Count(len(c.Capture), "byte")+" (JSON output has it)")
		}
		if c.Kind == model.CompensationCases {
			if ch, err := saga.ChooseCase(e, *c); err != nil {
				field("undo would", "fail: "+err.Error())
			} else {
				field("undo would", saga.Shorten(saga.DescribeChosen(ch)))
			}
		}
	}
	if e.Owner != nil {
		lease := ""
		if !e.Owner.LeaseUntil.IsZero() {
			lease = ", lease until " + e.Owner.LeaseUntil.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		}
		field("owner", fmt.Sprintf("pid %d on %s since %s%s", e.Owner.PID, e.Owner.Host, e.Owner.StartedAt.Format("2006-01-02T15:04:05Z07:00"), lease))
	}
	if since, ok := effectlog.AwaitingInput(d.History); ok && e.State == sm.Executing {
		// Its server asked the client for input and has not acted: should
		// its owner die, the call's next intercept fails it and runs it again.
		field("awaiting", fmt.Sprintf("the client's input since %s (%s ago): its server asked and has not acted yet",
			since.UTC().Format("2006-01-02T15:04:05Z07:00"), ago(now, since)))
		if why := effectlog.AbandonedRound(d, now); why != "" {
			field("abandoned", why+"; the next logged call of any proxy, a retry of it, or undo fails it")
		}
	}
	field("created", fmt.Sprintf("%s (%s ago)", e.CreatedAt.Format("2006-01-02T15:04:05Z07:00"), ago(now, e.CreatedAt)))
	if d.Approval != nil {
		a := d.Approval
		field("approval", approvalLine(now, a.ApprovalRound))
		// An irreversible effect is approved again after each failure.
		for i := len(a.Earlier) - 1; i >= 0; i-- {
			field("earlier approval", approvalLine(now, a.Earlier[i]))
		}
	}
	if d.Undo != nil {
		u := d.Undo
		line := fmt.Sprintf("%s, %d attempt%s", textfmt.UndoWord(string(u.State)), u.Attempts, map[bool]string{true: "", false: "s"}[u.Attempts == 1])
		if u.LastError != "" {
			line += ", last error: " + u.LastError
		}
		field("undo entry", line)
	}
	fmt.Fprintln(out, "\nHistory:")
	return renderHistory(f, d.History)
}

// renderHistory is a table of history records, an effect's or a session's:
// what happened in plain words (the spec's trigger stays in JSON), and whose
// row it is, the effect's or its undo entry's, whose states are words of
// their own.
func renderHistory(f *Factory, hist []model.HistoryRecord) error {
	// A person's terminal gets the time to the second, in its zone; a
	// script the exact instant.
	at := func(t time.Time) string { return t.Format("2006-01-02T15:04:05.000Z07:00") }
	if f.StdoutIsTerminal() {
		at = func(t time.Time) string { return t.Local().Format("Jan 02 15:04:05") }
	}
	rows := make([][]cell, 0, len(hist))
	for _, r := range hist {
		of, from, to := r.Kind, r.From, r.To
		switch r.Kind {
		case model.KindUndo:
			of, from, to = "undo entry", textfmt.UndoWord(r.From), textfmt.UndoWord(r.To)
		case model.KindAnswer:
			of = "effect"
		}
		detail := r.Reason
		if r.Error != "" {
			detail = "error: " + r.Error + reasonSuffix(r.Reason)
		}
		what := textfmt.HistoryWords(textfmt.Record{Kind: r.Kind, From: r.From, To: r.To, Trigger: r.Trigger, Actor: r.Who()})
		rows = append(rows, []cell{plain(strconv.Itoa(int(r.Seq))), plain(at(r.At)),
			plain(of), plain(orDash(from)), {Text: orDash(to), Color: textfmt.StateColor(r.To)}, plain(what), plain(orDash(detail))})
	}
	// A reason is read on its own: on a narrow terminal it goes under its row.
	return newTable(f, f.Out, []string{"SEQ", "AT", "OF", "FROM", "TO", "WHAT HAPPENED", "REASON"}, f.StdoutIsTerminal()).Under().Write(rows)
}

// approvalLine is one approval request and its decision, if made.
func approvalLine(now time.Time, r model.ApprovalRound) string {
	line := textfmt.ApprovalWord(r.Outcome)
	if r.DecidedAt != nil {
		line += fmt.Sprintf(" by %s %s ago%s", r.DecidedBy, ago(now, *r.DecidedAt), reasonSuffix(r.Decision))
	} else if r.ExpiresAt != nil && !now.Before(*r.ExpiresAt) {
		// Recorded as timed out by the next write to its session.
		line = fmt.Sprintf("expired %s ago: nobody can decide it now", ago(now, *r.ExpiresAt))
	} else if r.ExpiresAt != nil {
		line += ", expires in " + textfmt.Remaining(r.ExpiresAt.Sub(now))
	}
	return line
}
