package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/filesnap"
	"github.com/undolog/undolog/internal/textfmt"
)

type filesRestoreOptions struct {
	store  string
	dryRun bool
	output string
}

func newCmdFilesRestore(f *Factory) *cobra.Command {
	opts := &filesRestoreOptions{}
	c := &cobra.Command{
		Use:   "restore --store DIR SNAPSHOT",
		Short: "Put back every file a call changed, as it was before the call",
		Long: `Put back every file the call of SNAPSHOT changed, as it was before the call:
files it modified get their bytes and mode back, files it created are removed
(and the directories it made for them, once empty), files it deleted come back.

It first checks every file: one that is neither as the call left it nor
already restored (someone else changed it since) is not overwritten: restore
exits ` + fmt.Sprint(ExitFilesChanged) + ` naming it and changes nothing, and undo stops for a person as
for any failed compensation. A restore run again finds what it restored and
goes on.

Some changes a snapshot sees but does not hold: a git repository's own state
(.git's HEAD, refs, index, config: a commit, a checkout, a removed .git), an
ignored directory of more than 2000 entries or ignored file over 16 MiB (a
change deep inside such a directory is not seen), a file outside the project
written through a symbolic link. Restore then refuses too, exit ` + fmt.Sprint(ExitFilesChanged) + `, naming
it, and changes nothing: it never reports such a call undone. So does a snapshot
whose call's end was never recorded (interrupted, or its agent killed): restore it
by hand. Undo does not try a refusal again: it stops for a person at once.

Modes are restored exactly (permission bits; symbolic links as links, never
followed out of the project). A shell command's snapshot is of the whole
project, what .gitignore ignores too; directories it removed come back, empty
ones too.

This is the compensation undolog records for such calls: undo runs it, and
'undolog undo --dry-run' lists its files.`,
		Example: `  undolog files restore --dry-run --store ~/.local/state/undolog/files/app-1f2e3d4c5b6a 4f0c9a1b2c3d4e5f60718293`,
		Args:    exactArgs(1, "one snapshot id"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			if opts.store == "" {
				return usagef("restore needs --store: the directory of the project's snapshots")
			}
			store := filesnap.OpenDir(opts.store)
			var changes []filesnap.Change
			var err error
			if opts.dryRun {
				changes, err = store.Changes(args[0])
			} else {
				changes, err = store.Restore(args[0])
			}
			if errors.Is(err, filesnap.ErrChanged) || errors.Is(err, filesnap.ErrLost) || errors.Is(err, filesnap.ErrNotAfter) {
				return &exitError{code: ExitFilesChanged, msg: err.Error()}
			}
			if err != nil {
				return err
			}
			if opts.output != formatText {
				return writeObject(f.Out, opts.output, changes)
			}
			for _, ch := range changes {
				fmt.Fprintln(f.Out, textfmt.Escape(filesnap.Describe(opts.dryRun, ch)))
			}
			if len(changes) == 0 {
				fmt.Fprintln(f.Out, "the call changed no file: nothing to restore")
			}
			return nil
		},
	}
	c.Flags().StringVar(&opts.store, "store", "", "the project's snapshot store (the compensation names it)")
	c.Flags().BoolVar(&opts.dryRun, "dry-run", false, "list the files and what restore would do to each; change nothing")
	addFormatFlag(c, &opts.output, false)
	return c
}
