package cmd

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/saga"
	sm "github.com/undolog/undolog/statemachine"
)

type sessionListOptions struct {
	state  string
	since  string
	limit  int
	output string
}

func newCmdSessionList(f *Factory) *cobra.Command {
	opts := &sessionListOptions{}
	c := &cobra.Command{
		Use:   "list",
		Short: "List sessions, newest first",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, true); err != nil {
				return err
			}
			filter := effectlog.SessionFilter{Limit: opts.limit}
			if opts.state != "" {
				st, err := sm.ParseSessionState(opts.state)
				if err != nil {
					return err
				}
				filter.State = st
			}
			since, err := parseSince(f.Now(), "--since", opts.since)
			if err != nil {
				return err
			}
			filter.Since = since
			if opts.limit < 0 {
				return usagef("--limit must not be negative")
			}
			store := f.ReadLog()
			list, more, err := store.ListSessions(c.Context(), filter)
			if err != nil {
				return err
			}
			sessions := make([]listedSession, len(list))
			for i, s := range list {
				if s.Damage != "" {
					fmt.Fprintf(f.ErrOut, "undolog: warning: session %s is damaged: %s; run undolog verify\n", textfmt.Escape(s.ID), textfmt.Escape(s.Damage))
				}
				sessions[i].Session = s
				if opts.output != formatIDs {
					if sessions[i].undo, err = saga.UndoCounts(c.Context(), store, s); err != nil {
						return err
					}
					sessions[i].Undone = sessions[i].undo.Undone
				}
			}
			text := func() error {
				rows := make([][]cell, 0, len(sessions))
				for _, s := range sessions {
					approvals := ""
					if s.PendingApprovals > 0 {
						approvals = fmt.Sprintf("%d waiting", s.PendingApprovals)
					}
					age := "-" // a damaged record's is not known
					if s.Damage == "" {
						age = ago(f.Now(), s.CreatedAt)
					}
					rows = append(rows, []cell{plain(s.ID), stateCell(string(s.State)), plain(age),
						plain(strconv.Itoa(s.Effects)), plain(saga.CountsWords(s.Counts, s.undo)),
						{Text: approvals, Color: textfmt.StateColor(string(sm.SessionAwaitingApproval))}})
				}
				return renderTable(f, []string{"SESSION", "STATE", "AGE", "EFFECTS", "BY STATE", "APPROVALS"}, rows)
			}
			if err := printListing(f, opts.output, sessions, func(s listedSession) any { return s.ID }, text); err != nil {
				return err
			}
			if more != 0 && opts.output == formatText {
				fmt.Fprintf(f.ErrOut, "the newest %s; --limit 0 lists all\n", textfmt.Count(len(list), "matching session"))
			}
			return nil
		},
	}
	c.Flags().StringVar(&opts.state, "state", "", "only sessions in this state")
	c.Flags().StringVar(&opts.since, "since", "", "only sessions created since a time (RFC 3339) or duration (1h, 7d)")
	c.Flags().IntVar(&opts.limit, "limit", 50, "at most this many sessions (0: all)")
	addFormatFlag(c, &opts.output, true)
	addHeadersFlag(f, c)
	return c
}

// listedSession is a session as session list gives it: with how many of
// its effects an undo compensated (JSON: "undone", added to the session's
// fields), as its table's counts show.
type listedSession struct {
	model.Session
	Undone int `json:"undone"`
	undo   textfmt.UndoCounts
}
