package model_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"pgregory.net/rapid"
)

// The rule as first written, kept as the oracle for the hand-written check.
var sessionIDRule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@+/-]{0,127}$`)

func TestValidSessionID(t *testing.T) {
	for _, id := range []string{"a", "deploy-117", "sess-20261130-3fa2c1", "ci/run:4@main+x.y_z", strings.Repeat("x", 128)} {
		if err := model.ValidSessionID(id); err != nil {
			t.Errorf("%q refused: %v", id, err)
		}
	}
	for _, id := range []string{"", "-lead", ".x", "a b", "é", "a\x00", strings.Repeat("x", 129)} {
		if model.ValidSessionID(id) == nil {
			t.Errorf("%q accepted", id)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.StringMatching(`[A-Za-z0-9._:@+/ é\-]{0,130}`).Draw(t, "id")
		if got, want := model.ValidSessionID(id) == nil, sessionIDRule.MatchString(id); got != want {
			t.Fatalf("%q: valid=%v, the rule says %v", id, got, want)
		}
	})
}

// A refused tool name is refused for what is wrong with it.
func TestToolNameErrorsSayWhatIsWrong(t *testing.T) {
	for name, want := range map[string]string{
		"":                                `tool name "" is empty`,
		strings.Repeat("x", 257):          "is 257 bytes; at most 256",
		"send\x1b]0;x\x07":                `holds U+001B (a control character) at byte 4`,
		"send\u009b2J":                    `holds U+009B (a control character) at byte 4`,
		"send_\u202eexe":                  `holds U+202E at byte 5`,
		"a\u200db":                        `holds U+200D at byte 1`,
		"a\x9bb":                          `is not UTF-8: byte 0x9b at byte 1`,
		strings.Repeat("x", 300) + "\x1b": "holds U+001B (a control character) at byte 300",
	} {
		err := model.ValidToolName(name)
		if !errors.Is(err, model.ErrInvalidInput) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "1-256 bytes of UTF-8") {
			t.Errorf("%q: %v, want %q", name, err, want)
		}
	}
	for _, name := range []string{"x", "send_wire", "日本", strings.Repeat("x", 256)} {
		if err := model.ValidToolName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
}

// An environment variable's name is named on one line (undo's refusal):
// one that would break it, or act on the terminal, is refused.
func TestValidEnvName(t *testing.T) {
	for _, name := range []string{"MEMORY_FILE_PATH", "data_dir", "X1", "a.b"} {
		if err := model.ValidEnvName(name); err != nil {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	for _, name := range []string{"", "A=B", "A\x00", "\xff", "A\nB", "A\x1b[2J", "A\u202eB", "A\u200bB"} {
		if err := model.ValidEnvName(name); !errors.Is(err, model.ErrInvalidInput) {
			t.Errorf("%q: %v, want refused", name, err)
		}
	}
}

// A compensation is refused for the first thing wrong with it, whichever
// part: its text, the tier of its call, its kind, its retries.
func TestValidCompensation(t *testing.T) {
	for _, c := range []struct {
		comp *model.Compensation
		tier sm.Tier
		want string // "" : valid
	}{
		{nil, sm.Compensable, ""},
		{nil, sm.Irreversible, ""},
		{&model.Compensation{Kind: "command", Argv: []string{"rm", "x"}}, sm.Compensable, ""},
		{&model.Compensation{Kind: "mcp", Tool: "delete"}, sm.Compensable, ""},
		{&model.Compensation{Kind: "cases", Args: []byte(`[{}]`)}, sm.Compensable, ""},
		{&model.Compensation{Kind: "manual", Note: "call ops"}, sm.Compensable, ""},
		{&model.Compensation{Kind: "teleport"}, sm.Safe, ""}, // a safe call keeps none: only its text counts
		{&model.Compensation{Kind: "manual", Note: "\xff"}, sm.Safe, `compensation "\xff" is not valid UTF-8`},
		{&model.Compensation{Kind: "command", Argv: []string{"rm", "\xff"}}, sm.Compensable, `compensation argument "\xff" is not valid UTF-8`},
		{&model.Compensation{Kind: "command", Argv: []string{"rm"}, Dir: "\xfe"}, sm.Compensable, `compensation "\xfe" is not valid UTF-8`},
		{&model.Compensation{Kind: "manual"}, sm.Irreversible, "a compensation is for compensable calls; this one is irreversible"},
		{&model.Compensation{Kind: "command"}, sm.Compensable, "a command compensation needs an argv"},
		{&model.Compensation{Kind: "command", Argv: []string{""}}, sm.Compensable, "a command compensation needs an argv"},
		{&model.Compensation{Kind: "mcp"}, sm.Compensable, "an mcp compensation needs a tool"},
		{&model.Compensation{Kind: "cases"}, sm.Compensable, "a cases compensation needs its cases"},
		{&model.Compensation{Kind: "teleport"}, sm.Compensable, `compensation kind "teleport": use command, mcp, cases or manual`},
		{&model.Compensation{Kind: "manual", MaxRetries: -1}, sm.Compensable, "compensation retries and backoff must not be negative"},
		{&model.Compensation{Kind: "manual", InitialBackoffMS: -1}, sm.Compensable, "compensation retries and backoff must not be negative"},
	} {
		err := model.ValidCompensation(c.comp, c.tier)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %+v refused: %v", c.tier, c.comp, err)
		case c.want != "" && (!errors.Is(err, model.ErrInvalidInput) || err.Error() != "invalid input: "+c.want):
			t.Errorf("%s %+v: %v, want %q", c.tier, c.comp, err, c.want)
		}
	}
}
