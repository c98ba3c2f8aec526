package cmd

import (
	"strings"

	"github.com/spf13/cobra"
)

// refuseEmptyFilters refuses a filter flag given with nothing in it (an
// unset variable in a script): taken as no filter, it would list all.
func refuseEmptyFilters(c *cobra.Command, names ...string) error {
	for _, name := range names {
		if c.Flags().Changed(name) && strings.TrimSpace(c.Flags().Lookup(name).Value.String()) == "" {
			return usagef("--%s is empty: give what to keep, or leave the flag out for all", name)
		}
	}
	return nil
}
