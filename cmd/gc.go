package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	sm "github.com/undolog/undolog/statemachine"
)

type gcOptions struct {
	olderThan string
	states    string
	noCompact bool
	output    string
}

func newCmdGC(f *Factory) *cobra.Command {
	opts := &gcOptions{}
	c := &cobra.Command{
		Use:   "gc --older-than D",
		Short: "Drop finished sessions, with their effects, history and indexes",
		Long: `Drop the sessions in the given states (default completed and compensated) whose
last change is older than --older-than, with everything recorded about them, one
session per transaction, so the log stays consistent; then compact the log so
that the file shrinks (unless --no-compact). A session with an effect executing
or compensating (a call in flight or in doubt) is kept.`,
		Example: `  undolog gc --older-than 30d
  undolog gc --older-than 7d --state completed,compensated,failed`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			if opts.olderThan == "" {
				return usagef("gc needs --older-than (a duration such as 30d, or a time)")
			}
			before, err := parseSince(f.Now(), "--older-than", opts.olderThan)
			if err != nil {
				return err
			}
			var states []sm.SessionState
			for _, name := range strings.Split(opts.states, ",") {
				st, err := sm.ParseSessionState(strings.TrimSpace(name))
				if err != nil {
					return err
				}
				if st.AcceptsEffects() || st == sm.SessionCompensating {
					return usagef("gc drops finished sessions only; %s sessions are live", st)
				}
				states = append(states, st)
			}
			store := f.Log()
			rep, err := store.GC(c.Context(), before, states)
			if err != nil {
				return err
			}
			var sizeBefore, sizeAfter int64
			if fl, ok := store.(effectlog.FileLog); ok && !opts.noCompact && len(rep.Sessions) > 0 {
				if sizeBefore, sizeAfter, err = fl.Compact(); err != nil {
					return err
				}
			}
			if opts.output != formatText {
				return writeObject(f.Out, opts.output, map[string]any{"sessions": rep.Sessions, "effects": rep.Effects,
					"bytes_before": sizeBefore, "bytes_after": sizeAfter})
			}
			fmt.Fprintf(f.Out, "dropped %s (%s)\n", textfmt.Count(len(rep.Sessions), "session"), textfmt.Count(rep.Effects, "effect"))
			if sizeBefore > 0 {
				fmt.Fprintf(f.Out, "compacted: %s -> %s\n", byteSize(sizeBefore), byteSize(sizeAfter))
			}
			return nil
		},
	}
	c.Flags().StringVar(&opts.olderThan, "older-than", "", "drop sessions unchanged for this long (30d, 12h) or since a time")
	c.Flags().StringVar(&opts.states, "state", "completed,compensated", "comma-separated session states to drop")
	c.Flags().BoolVar(&opts.noCompact, "no-compact", false, "do not compact the log afterwards")
	addFormatFlag(c, &opts.output, false)
	return c
}
