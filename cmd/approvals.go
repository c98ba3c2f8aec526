package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
)

type approvalsOptions struct {
	session string
	output  string
	limit   int
	follow  bool
}

func newCmdApprovals(f *Factory) *cobra.Command {
	opts := &approvalsOptions{}
	c := &cobra.Command{
		Use:   "approvals",
		Short: "List irreversible effects awaiting a decision, oldest first",
		Example: `  undolog approvals
  undolog approvals --limit 0 -o ids | undolog approve -
  undolog approvals --follow -o jsonl   # each new request as it appears`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, true); err != nil {
				return err
			}
			if opts.limit < 0 {
				return usagef("--limit must not be negative")
			}
			if opts.follow {
				if opts.output == formatJSON {
					return usagef("--follow prints a request at a time: use -o jsonl, ids or text")
				}
				return followApprovals(c.Context(), f, opts)
			}
			list, waiting, err := f.ReadLog().PendingApprovals(c.Context(), opts.session, opts.limit)
			if err != nil {
				return err
			}
			return printListing(f, opts.output, list, func(a effectlog.PendingApproval) any { return a.EffectID },
				func() error {
					if len(list) == 0 && f.StdoutIsTerminal() {
						// A person reads a header alone as a listing that failed.
						_, err := fmt.Fprintln(f.Out, "nothing awaits a decision")
						return err
					}
					if err := renderApprovals(f, list); err != nil {
						return err
					}
					if waiting > len(list) {
						fmt.Fprintf(f.ErrOut, "the oldest %d of %d waiting; --limit 0 lists all\n", len(list), waiting)
					}
					return nil
				})
		},
	}
	c.Flags().StringVar(&opts.session, "session", "", "only requests of this session")
	c.Flags().IntVar(&opts.limit, "limit", 50, "at most this many requests (0: all)")
	c.Flags().BoolVarP(&opts.follow, "follow", "f", false, "print each waiting request, then each new one as it appears, until interrupted")
	addFormatFlag(c, &opts.output, true)
	addHeadersFlag(f, c)
	return c
}

func renderApprovals(f *Factory, list []effectlog.PendingApproval) error {
	now := f.Now()
	rows := make([][]cell, 0, len(list))
	for _, a := range list {
		expires := "never"
		if a.ExpiresAt != nil {
			expires = "in " + textfmt.Remaining(a.ExpiresAt.Sub(now))
		}
		// The effect's tool and args, which its history covers: what a decision runs.
		rows = append(rows, []cell{idCell(a.EffectID), plain(a.Session), plain(a.Effect.Tool), plain(ago(now, a.RequestedAt)),
			plain(expires), plain(textfmt.EscapeCut(string(a.Effect.Args), 60))})
	}
	return renderTable(f, []string{"ID", "SESSION", "TOOL", "WAITING", "EXPIRES", "ARGS"}, rows)
}

// truncate is s as a table shows it (escaped), cut to n terminal columns.

// approvalsRelist is how often approvals --follow reads the waiting
// requests whether the change feed moved or not.
const approvalsRelist = 5 * time.Second

// followApprovals prints every waiting request, then each request that
// starts waiting (a new one, or one asked again after a failed run), until
// ctx ends. It looks when the log's change feed moved.
func followApprovals(ctx context.Context, f *Factory, opts *approvalsOptions) error {
	store := f.ReadLog()
	type round struct {
		id    uint64
		asked time.Time
	}
	seen := map[round]bool{}
	last := ^uint64(0)
	var listed time.Time
	lost := outage{f: f}
	if opts.output == formatText && isTerminal(f.ErrOut) {
		// Text with nothing waiting prints nothing: a person at a
		// terminal sees that it runs.
		fmt.Fprintln(f.ErrOut, "undolog: printing each approval request as it starts waiting; Ctrl-C to stop")
	}
	for ctx.Err() == nil {
		position, err := store.LastChange(ctx)
		if ctx.Err() != nil {
			break // an engine that cancels may have cut the read short
		} else if lost.retry(ctx, err) {
			continue
		} else if err != nil {
			return err
		}
		// The requests are read again when the feed moved, and every
		// approvalsRelist besides: a feed held up (a writer that keeps its
		// lock) would otherwise hide a request until it expired.
		if position != last || time.Since(listed) >= approvalsRelist {
			listed = time.Now()
			list, _, err := store.PendingApprovals(ctx, opts.session, 0)
			if ctx.Err() != nil {
				break
			} else if lost.retry(ctx, err) {
				continue // looked at again once the server answers
			} else if err != nil {
				return err
			}
			last = position
			var fresh []effectlog.PendingApproval
			for _, a := range list {
				if r := (round{a.EffectID, a.RequestedAt}); !seen[r] {
					seen[r] = true
					fresh = append(fresh, a)
				}
			}
			if len(fresh) > 0 {
				err := printListing(f, opts.output, fresh, func(a effectlog.PendingApproval) any { return a.EffectID },
					func() error { return renderApprovals(f, fresh) })
				if err != nil {
					return err
				}
			}
		}
		lost.ok()
		wait, cancel := context.WithTimeout(ctx, approvalsRelist-time.Since(listed)) // no longer than to the next reading
		store.WaitChange(wait, position, followInterval)                             // an interrupt ends the loop
		cancel()
	}
	return nil // Ctrl-C ends a follow
}
