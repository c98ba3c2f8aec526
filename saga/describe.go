package saga

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/undolog/undolog/internal/template"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
)

// DescribeCall renders a compensation as the call undo will make.
func DescribeCall(c model.Compensation) string {
	switch c.Kind {
	case model.CompensationCommand:
		return textfmt.ShellQuote(c.Argv...)
	case model.CompensationMCP:
		return "mcp " + c.Tool + " " + string(c.Args)
	case model.CompensationCases:
		return DescribeCases(c)
	}
	if c.Note != "" {
		return "manual: " + c.Note
	}
	return "manual (an operator confirms it was done)"
}

// DescribeCases renders a cases compensation: each case, its condition
// and what it does, as the policy wrote them.
func DescribeCases(c model.Compensation) string {
	parts, err := CaseLines(c)
	if err != nil {
		return "cases (unreadable: " + err.Error() + ")"
	}
	return "cases: " + strings.Join(parts, "; ")
}

// CaseLines renders each case of a cases compensation: "N. when COND: CALL".
func CaseLines(c model.Compensation) ([]string, error) {
	var cs template.Cases
	if err := json.Unmarshal(c.Args, &cs); err != nil {
		return nil, err
	}
	parts := make([]string, len(cs.Cases))
	for i, k := range cs.Cases {
		when := "otherwise"
		if k.When != "" {
			when = "when " + k.When
		}
		var do string
		switch {
		case k.Tool != "":
			do = "mcp " + k.Tool + " " + string(k.Args)
		case len(k.Run) > 0:
			do = textfmt.ShellQuote(k.Run...)
			if k.Stdin != "" || k.StdinBase64 != "" {
				do += " < " + k.Stdin + k.StdinBase64
			}
		default:
			do = "nothing: " + k.Skip
		}
		parts[i] = fmt.Sprintf("%d. %s: %s", i+1, when, do)
	}
	return parts, nil
}

// DescribeChosen renders a chosen case as the call undo will make.
func DescribeChosen(ch template.Chosen) string {
	switch ch.Kind() {
	case model.CompensationMCP:
		return "mcp " + ch.Tool + " " + string(ch.Args)
	case model.CompensationCommand:
		s := textfmt.ShellQuote(ch.Argv...)
		if ch.Stdin != nil {
			s += fmt.Sprintf(" < (%d bytes)", len(ch.Stdin))
		}
		return s
	}
	return "nothing to undo: " + ch.Skip
}

// DescribeDoubt says why a compensation whose owner is o is in doubt.
func DescribeDoubt(o *model.Owner) string {
	if o == nil {
		return "its undo was interrupted mid-run"
	}
	if l := o.Liveness(); l == model.OwnerLapsed {
		return "its undo's " + o.Gone(l)
	}
	return fmt.Sprintf("its undo (pid %d on %s) died mid-run", o.PID, o.Host)
}

// Where says, for a line of text, where a step's call runs: a command in
// its directory, an mcp call on the session's server.
func (p Plan) Where(s Step) string {
	switch s.runs {
	case model.CompensationCommand:
		if d := s.Entry.Compensation.Dir; d != "" {
			return " (in " + textfmt.ShellQuote(d) + ")"
		}
	case model.CompensationMCP:
		if len(p.UpstreamEnv) > 0 && len(p.Upstream) > 0 {
			return " (server: " + describeStateEnv(p.UpstreamEnv) + " " + textfmt.ShellQuote(p.Upstream...) + ")"
		}
		return OnServer(p.Upstream)
	}
	return ""
}

// OnServer says, for a line of text, which MCP server an mcp call is made
// on: a session's upstream command.
func OnServer(upstream []string) string {
	if len(upstream) == 0 {
		return " (no MCP server recorded)"
	}
	return " (server: " + textfmt.ShellQuote(upstream...) + ")"
}

// describeStateEnv renders a server's state environment as a shell would
// set it, an unset variable as "NAME unset".
func describeStateEnv(env model.StateEnv) string {
	parts := []string{}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if v := env[name]; v != nil {
			parts = append(parts, textfmt.ShellQuote(name+"="+*v))
		} else {
			parts = append(parts, "("+name+" unset)")
		}
	}
	return strings.Join(parts, " ")
}

// MaxShown is how much of a compensation call a line shows: a call that
// restores a file carries the file.
const MaxShown = 240

// Shorten cuts a call for a line of text to MaxShown bytes (at a character
// boundary), saying how much was left out; JSON output has it whole.
func Shorten(s string) string {
	if len(s) <= MaxShown {
		return s
	}
	cut := MaxShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes in all)", s[:cut], len(s))
}
