package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
)

type sessionStartOptions struct {
	meta   []string
	as     string
	output string
}

func newCmdSessionStart(f *Factory) *cobra.Command {
	opts := &sessionStartOptions{}
	c := &cobra.Command{
		Use:   "start [NAME]",
		Short: "Start a session and print its id",
		Example: `  RUN=$(undolog session start)
  undolog session start deploy-117 --meta pipeline=api --meta commit=abc123`,
		Args: maxArgs(1, "one session name"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			meta := map[string]string{}
			for _, kv := range opts.meta {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usagef("--meta %q: use key=value", kv)
				}
				meta[k] = v
			}
			req := effectlog.NewSession{Meta: meta, Actor: f.Actor(opts.as)}
			if len(args) == 1 {
				if args[0] == "" {
					// "" is most often an unset variable: a random name
					// would go unnoticed, and the next step name no session.
					return usagef("the session name is empty (leave it out for a generated one)")
				}
				req.ID = args[0]
			}
			sess, err := f.Log().CreateSession(c.Context(), req)
			if err != nil {
				return err
			}
			if opts.output != formatText {
				return writeObject(f.Out, opts.output, sess)
			}
			_, err = fmt.Fprintln(f.Out, sess.ID)
			return err
		},
	}
	c.Flags().StringArrayVar(&opts.meta, "meta", nil, "metadata `key=value` (repeatable)")
	c.Flags().StringVar(&opts.as, "as", "", "actor recorded in history (default $UNDOLOG_ACTOR, else user@host)")
	addFormatFlag(c, &opts.output, false)
	return c
}
