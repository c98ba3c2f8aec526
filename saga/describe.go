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
		return ShellQuote(c.Argv)
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
			do = ShellQuote(k.Run)
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
		s := ShellQuote(ch.Argv)
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
			return " (in " + ShellQuote([]string{d}) + ")"
		}
	case model.CompensationMCP:
		if len(p.UpstreamEnv) > 0 && len(p.Upstream) > 0 {
			return " (server: " + describeStateEnv(p.UpstreamEnv) + " " + ShellQuote(p.Upstream) + ")"
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
	return " (server: " + ShellQuote(upstream) + ")"
}

// describeStateEnv renders a server's state environment as a shell would
// set it, an unset variable as "NAME unset".
func describeStateEnv(env model.StateEnv) string {
	parts := []string{}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if v := env[name]; v != nil {
			parts = append(parts, ShellQuote([]string{name + "=" + *v}))
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

// ShellQuote renders argv so that a person can paste it into a shell. An
// argument holding what must not reach a terminal as itself (a newline, an
// ESC: textfmt.Unsafe) is written $'...' with those as \xHH escapes, so
// that it stays on its line and pastes as the bytes it holds (single quotes
// would keep it as it is, and a line cut at its newline would paste
// another value).
func ShellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if needsEscapes(a) {
			out[i] = ansiCQuote(a)
			continue
		}
		safe := a != ""
		for _, r := range a {
			if !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r == ',' || r == '@' || r == '+' ||
				(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
				safe = false
				break
			}
		}
		if safe {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

func needsEscapes(s string) bool {
	return !utf8.ValidString(s) || strings.ContainsFunc(s, textfmt.Unsafe)
}

// ansiCQuote is s as a $'...' word of bash, zsh and ksh: backslash and
// quote escaped, every byte of an unsafe character or of no character as
// \xHH.
func ansiCQuote(s string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case textfmt.Unsafe(r) || r == utf8.RuneError && n == 1:
			for _, c := range []byte(s[i : i+n]) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	b.WriteByte('\'')
	return b.String()
}
