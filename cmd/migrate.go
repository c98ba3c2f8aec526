package cmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/logaddr"
)

type migrateOptions struct {
	f          *Factory
	printRoles bool
	applyRoles bool
	output     string
}

func newCmdMigrate(f *Factory, runF func(*migrateOptions) error) *cobra.Command {
	opts := &migrateOptions{f: f}
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Move a shared log's database to this undolog's schema; print its roles",
		Long: `Apply the schema migrations a PostgreSQL log lacks (they are embedded in undolog),
as the role that owns, or is to own, undolog's tables; the owner's first write does
the same. A log of a newer schema is refused. A log file needs nothing: it upgrades
itself on its next write.

--print-roles prints the SQL that creates the group roles undolog_agent (intercept,
start, commit, fail; sessions; read), undolog_approver (approve, reject, undo,
resolve, resume a halted session; sessions; read) and undolog_reader (read), for
psql; --apply-roles migrates and runs it (it needs the right to create roles). The database refuses a role anything its groups do not
allow (exit ` + fmt.Sprint(ExitDenied) + `).`,
		Example: `  undolog migrate --log postgres://owner@db/undolog
  undolog migrate --print-roles | psql -v ON_ERROR_STOP=1 postgres://owner@db/undolog`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(opts.output, false); err != nil {
				return err
			}
			if opts.printRoles && opts.applyRoles {
				return usagef("give --print-roles or --apply-roles, not both")
			}
			if runF != nil {
				return runF(opts)
			}
			return migrateRun(c, opts)
		},
	}
	c.Flags().BoolVar(&opts.printRoles, "print-roles", false, "print the SQL that creates the database roles, and do nothing else")
	c.Flags().BoolVar(&opts.applyRoles, "apply-roles", false, "migrate, then create the database roles and their grants")
	addFormatFlag(c, &opts.output, false)
	return c
}

func migrateRun(c *cobra.Command, opts *migrateOptions) error {
	f := opts.f
	if opts.printRoles {
		_, err := io.WriteString(f.Out, logaddr.PostgresRoles)
		return err
	}
	log := f.Log()
	m, ok := log.(effectlog.Maintainer)
	if !ok {
		return usagef("%s cannot be migrated", textfmt.Escape(f.LogPath()))
	}
	schema, err := m.Migrate(c.Context())
	if err != nil {
		return err
	}
	roles := false
	if opts.applyRoles {
		if !schema.Migrates {
			return usagef("--apply-roles sets up a database's roles; %s is a log file", textfmt.Escape(f.LogPath()))
		}
		if err := m.ApplyRoles(c.Context()); err != nil {
			return err
		}
		roles = true
	}
	if opts.output != formatText {
		return writeJSON(f.Out, map[string]any{"schema_version": schema.After, "was": schema.Before,
			"migrated": schema.After != schema.Before, "roles_applied": roles})
	}
	switch {
	case !schema.Migrates:
		fmt.Fprintf(f.Out, "schema at version %d; nothing to migrate: a log file upgrades itself on its next write\n", schema.After)
	case schema.Before == schema.After:
		fmt.Fprintf(f.Out, "schema at version %d: up to date\n", schema.After)
	default:
		fmt.Fprintf(f.Out, "schema at version %d (was %d)\n", schema.After, schema.Before)
	}
	if roles {
		fmt.Fprintln(f.Out, "roles undolog_reader, undolog_agent, undolog_approver set up")
	}
	return nil
}
