package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/internal/textfmt"
	sm "github.com/undolog/undolog/statemachine"
)

func newCmdSessionResume(f *Factory) *cobra.Command {
	opts := &sessionEndOptions{}
	c := &cobra.Command{
		Use:   "resume NAME --reason TEXT",
		Short: "Let a session a rejection halted take calls again (halted -> active)",
		Long: `A person's rejection halts a session: it takes no new calls (a proxy answers each
logged call with a tool error naming this command). Resume it once whatever the
rejection was about is settled: the session is active again, and the resumption
is recorded in its history with who (--as) and why (--reason, required). The
rejected effect stays rejected, and its call made again is a new call that asks
again; a request the halt closed is asked again when its call comes again. A session its undo halted (a compensation failed for good) is
not resumed: finish the undo or resolve what failed.`,
		Example: `  undolog session resume research-agent --as alice --reason "wrong recipient fixed in the prompt"`,
		Args:    exactArgs(1, "one session name"),
		RunE: func(c *cobra.Command, args []string) error {
			if strings.TrimSpace(opts.reason) == "" {
				return usagef("session resume needs --reason: why the session may go on (recorded in its history)")
			}
			if err := f.refuseAgentDecision(args[0], "session resume"); err != nil {
				return err
			}
			// Only a halt is resumed: a session awaiting approval goes on
			// by itself once its calls are decided.
			store, err := f.ExistingLog()
			if err != nil {
				return err
			}
			sess, err := store.GetSession(c.Context(), args[0])
			if err != nil {
				return err
			}
			if sess.State != sm.SessionHalted {
				return fmt.Errorf("%w: session %s is %s, not halted: only a halted session is resumed", sm.ErrInvalidStateTransition, textfmt.Escape(sess.ID), sess.State)
			}
			return moveSession(c.Context(), f, opts, args[0], sm.SessionActive)
		},
	}
	c.Flags().StringVar(&opts.as, "as", "", "actor recorded in history (default $UNDOLOG_ACTOR, else user@host)")
	c.Flags().StringVar(&opts.reason, "reason", "", "why the session may go on, recorded in history (required)")
	addFormatFlag(c, &opts.output, false)
	return c
}
