package cmd

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/saga"
)

type sessionShowOptions struct {
	output string
	limit  int
}

// sessionView is session show's JSON form. Each list holds at most the
// limit; the totals say how many there are.
type sessionView struct {
	Session        model.Session               `json:"session"`
	Effects        []model.Effect              `json:"effects"`
	EffectsTotal   int                         `json:"effects_total"`
	UndoStack      []model.UndoEntry           `json:"undo_stack"`
	UndoTotal      int                         `json:"undo_stack_total"`
	Approvals      []effectlog.PendingApproval `json:"approvals"`
	ApprovalsTotal int                         `json:"approvals_total"`
	// History is the session's own records: who started, resumed, failed
	// or undid it, and why.
	History []model.HistoryRecord `json:"history"`
}

func newCmdSessionShow(f *Factory) *cobra.Command {
	opts := &sessionShowOptions{}
	c := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a session: its effects in order, undo stack and waiting approvals",
		Long: `Show a session: its newest effects in order, the top of its undo stack and its
oldest waiting approval requests, each up to --limit (0: all), with how many
there are in all.`,
		Args: exactArgs(1, "one session name"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			if opts.limit < 0 {
				return usagef("--limit must not be negative")
			}
			store, err := f.ExistingLog() // one session: where none can be, not found, said once
			if err != nil {
				return err
			}
			v, err := loadSessionView(c.Context(), store, args[0], opts.limit)
			if err != nil {
				return err
			}
			switch opts.output {
			case formatJSON:
				return writeJSON(f.Out, v)
			case formatJSONL:
				return writeJSONLine(f.Out, v)
			}
			return printSessionView(f, v)
		},
	}
	c.Flags().IntVar(&opts.limit, "limit", 50, "at most this many effects, undo entries and approvals (0: all)")
	addFormatFlag(c, &opts.output, false)
	addHeadersFlag(f, c)
	return c
}

func loadSessionView(ctx context.Context, store effectlog.Log, id string, limit int) (sessionView, error) {
	var v sessionView
	var err error
	if v.Session, err = store.GetSession(ctx, id); err != nil {
		return v, err
	}
	// The newest effects, shown oldest first.
	if v.Effects, _, err = store.ListEffects(ctx, effectlog.EffectFilter{Session: id, Limit: limit}); err != nil {
		return v, err
	}
	slices.Reverse(v.Effects)
	v.EffectsTotal = v.Session.Effects
	if v.UndoStack, v.UndoTotal, err = store.UndoStack(ctx, id, limit); err != nil {
		return v, err
	}
	if v.Approvals, v.ApprovalsTotal, err = store.PendingApprovals(ctx, id, limit); err != nil {
		return v, err
	}
	if v.Effects == nil {
		v.Effects = []model.Effect{}
	}
	if v.UndoStack == nil {
		v.UndoStack = []model.UndoEntry{}
	}
	if v.Approvals == nil {
		v.Approvals = []effectlog.PendingApproval{}
	}
	if v.History, err = store.SessionHistory(ctx, id); err != nil {
		return v, err
	}
	return v, nil
}

func printSessionView(f *Factory, v sessionView) error {
	s := v.Session
	now := f.Now()
	fmt.Fprintf(f.Out, "session %s  %s  created %s ago  %s\n", textfmt.Escape(s.ID), paintState(f, string(s.State)), ago(now, s.CreatedAt), textfmt.Count(s.Effects, "effect"))
	if len(s.Meta) > 0 {
		keys := make([]string, 0, len(s.Meta))
		for k := range s.Meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			keys[i] = k + "=" + s.Meta[k]
		}
		fmt.Fprintf(f.Out, "meta: %s\n", textfmt.Escape(strings.Join(keys, " ")))
	}
	if s.Reason != "" {
		fmt.Fprintf(f.Out, "reason: %s\n", textfmt.Escape(s.Reason))
	}
	if len(s.Upstream) > 0 {
		fmt.Fprintf(f.Out, "mcp server: %s\n", textfmt.Escape(textfmt.ShellQuote(s.Upstream...)))
	}
	entries := map[uint64]model.UndoEntry{}
	for _, u := range v.UndoStack {
		entries[u.EffectID] = u
	}
	section := func(title string, shown, total int, which string, render func() error) error {
		fmt.Fprintf(f.Out, "\n%s:\n", title)
		if shown == 0 {
			_, err := fmt.Fprintln(f.Out, "  (none)")
			return err
		}
		if err := render(); err != nil {
			return err
		}
		if total > shown {
			fmt.Fprintf(f.Out, "  (%s %d of %d; --limit 0 shows all)\n", which, shown, total)
		}
		return nil
	}
	if err := section("Effects", len(v.Effects), v.EffectsTotal, "the newest", func() error { return renderEffects(f, v.Effects, entries) }); err != nil {
		return err
	}
	err := section("Undo stack (last in, first out)", len(v.UndoStack), v.UndoTotal, "the top", func() error {
		rows := make([][]cell, 0, len(v.UndoStack))
		for _, u := range v.UndoStack {
			compensation := "-" // a damaged entry's could not be read
			if u.State != model.EntryDamaged {
				compensation = saga.Shorten(describeCompensation(u.Compensation))
			}
			rows = append(rows, []cell{idCell(u.EffectID), plain(u.Tool), {Text: textfmt.UndoWord(string(u.State)), Color: textfmt.StateColor(string(u.State))}, plain(compensation)})
		}
		return renderTable(f, []string{"EFFECT", "TOOL", "UNDO", "COMPENSATION"}, rows)
	})
	if err != nil {
		return err
	}
	if err := section("Waiting for approval", len(v.Approvals), v.ApprovalsTotal, "the oldest", func() error { return renderApprovals(f, v.Approvals) }); err != nil {
		return err
	}
	return section("History", len(v.History), len(v.History), "", func() error { return renderHistory(f, v.History) })
}

// describeCompensation is a compensation's call and, for a command, the
// directory it runs in.
func describeCompensation(c model.Compensation) string {
	switch c.Kind {
	case model.CompensationCommand:
		return c.Kind + ": " + saga.DescribeCall(c) + compensationDir(c)
	case model.CompensationCases:
		return saga.DescribeCases(c) + compensationDir(c)
	}
	return saga.DescribeCall(c) // "mcp TOOL ARGS", "manual ...": it names its kind
}

// compensationDir says where a command compensation runs; empty when it runs
// where undo does.
func compensationDir(c model.Compensation) string {
	if c.Kind != model.CompensationCommand && c.Kind != model.CompensationCases || c.Dir == "" {
		return ""
	}
	return " (in " + textfmt.ShellQuote(c.Dir) + ")"
}

// compensationServer says which MCP server an mcp compensation is called on:
// the session's upstream command.
func compensationServer(c model.Compensation, upstream []string) string {
	if c.Kind != model.CompensationMCP && !(c.Kind == model.CompensationCases && strings.Contains(string(c.Args), `"tool"`)) {
		return ""
	}
	return saga.OnServer(upstream)
}
