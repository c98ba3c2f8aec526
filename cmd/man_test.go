package cmd

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// A help text line that starts with a dot or a quote would be a roff
// request, and a backslash an escape: the page keeps them as text.
func TestManPageKeepsHelpTextAsText(t *testing.T) {
	c := &cobra.Command{Use: "undolog", Short: "a-b", Long: "first\n.SH INJECTED\n'also\nback\\slash"}
	c.Flags().String("log", "", "log `address`")
	page := string(manPage(c))
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, ".SH INJECTED") || strings.HasPrefix(line, "'also") {
			t.Fatalf("a help line became a roff request: %q\n%s", line, page)
		}
	}
	for _, want := range []string{`\&.SH INJECTED`, `\&'also`, `back\eslash`, `undolog \- a\-b`, `\fB\-\-log address\fR`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
}
