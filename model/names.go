package model

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/undolog/undolog/internal/textfmt"
	sm "github.com/undolog/undolog/statemachine"
)

// MaxID is the largest effect id or session sequence number a log gives or
// takes: 2^53, the largest integer every JSON reader keeps exactly, far
// below PostgreSQL's bigint. An import of a larger one is refused (the ids
// after it would wrap around onto those of other effects and sessions).
const MaxID = 1 << 53

// ValidSessionID reports whether id can name a session: 1 to 128 characters,
// ASCII letters, digits and . _ : @ + / -, starting with a letter or digit.
func ValidSessionID(id string) error {
	ok := len(id) >= 1 && len(id) <= 128
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		ok = alnum || i > 0 && strings.IndexByte("._:@+/-", c) >= 0
	}
	if !ok {
		return fmt.Errorf("%w: session id %q: use 1-128 ASCII letters, digits and . _ : @ + / -, starting with a letter or digit", ErrInvalidInput, id)
	}
	return nil
}

// ValidToolName refuses a name for the first thing wrong with it.
func ValidToolName(name string) error {
	shown := name
	if len(shown) > 64 {
		shown = shown[:64] + "..."
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: tool name %q %s", ErrInvalidInput, shown, fmt.Sprintf(format, args...))
	}
	if name == "" {
		return bad("is empty")
	}
	// What text output would have to escape cannot name a tool: a control
	// character, or a bidirectional mark or invisible character that shows
	// the name as another one.
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return bad("is not UTF-8: byte %#x at byte %d", name[i], i)
		case r < 0x20, 0x7f <= r && r <= 0x9f:
			return bad("holds %U (a control character) at byte %d", r, i)
		case textfmt.Unsafe(r):
			return bad("holds %U at byte %d: no bidirectional marks, invisible characters or line separators", r, i)
		}
		i += n
	}
	if len(name) > 256 {
		return bad("is %d bytes; at most 256", len(name))
	}
	return nil
}

// NewSessionID makes a readable, unique session id such as sess-20261130-3fa2c1.
func NewSessionID(now time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return "sess-" + now.UTC().Format("20060102") + "-" + hex.EncodeToString(b[:])
}

// ValidText refuses text that is not UTF-8, naming what it is: the log
// keeps text as text (JSON in exports), where bytes that are not UTF-8
// would become U+FFFD, and two keys, reasons or commands one.
func ValidText(what string, texts ...string) error {
	for _, s := range texts {
		if !utf8.ValidString(s) {
			return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidInput, what, s)
		}
	}
	return nil
}

// ValidEnvName refuses what cannot be an environment variable's name: it
// is empty, or holds "=" or a NUL, or is not UTF-8; and one that holds a
// newline, an ESC or another character that must not reach a terminal as
// itself (textfmt.Unsafe): undo's refusal names the variable on one line,
// and a line is cut at its newline.
func ValidEnvName(name string) error {
	if name == "" || strings.ContainsAny(name, "=\x00") || !utf8.ValidString(name) || strings.ContainsFunc(name, textfmt.Unsafe) {
		return fmt.Errorf("%w: %q is no environment variable's name", ErrInvalidInput, name)
	}
	return nil
}

// ValidActor refuses an actor that is not UTF-8 or holds a NUL: an actor
// is also a text column of the shared log (PostgreSQL text holds no NUL), and
// one engine must not take what another refuses.
func ValidActor(actor string) error {
	if strings.ContainsRune(actor, 0) {
		return fmt.Errorf("%w: actor %q holds a NUL character", ErrInvalidInput, actor)
	}
	return ValidText("actor", actor)
}

// ValidChange refuses a change whose actor, reason or error is not UTF-8,
// or whose actor holds a NUL.
func ValidChange(c Change) error {
	if err := ValidActor(c.Actor); err != nil {
		return err
	}
	if err := ValidText("reason", c.Reason); err != nil {
		return err
	}
	return ValidText("error", c.Error)
}

// ValidCompensation refuses a compensation a call of tier cannot be
// registered with: its command, directory, tool or note not UTF-8; on a
// call that is not compensable (a safe call's is kept nowhere, and only its
// text is checked); a kind without what it runs; negative retries or
// backoff. nil (a manual compensation) is valid.
func ValidCompensation(c *Compensation, tier sm.Tier) error {
	if c == nil {
		return nil
	}
	if err := ValidText("compensation argument", c.Argv...); err != nil {
		return err
	}
	if err := ValidText("compensation", c.Dir, c.Tool, c.Note); err != nil {
		return err
	}
	if tier == sm.Safe {
		return nil
	}
	if tier != sm.Compensable {
		return fmt.Errorf("%w: a compensation is for compensable calls; this one is %s", ErrInvalidInput, tier)
	}
	switch c.Kind {
	case CompensationCommand:
		if len(c.Argv) == 0 || c.Argv[0] == "" {
			return fmt.Errorf("%w: a command compensation needs an argv", ErrInvalidInput)
		}
	case CompensationMCP:
		if c.Tool == "" {
			return fmt.Errorf("%w: an mcp compensation needs a tool", ErrInvalidInput)
		}
	case CompensationCases:
		if len(c.Args) == 0 {
			return fmt.Errorf("%w: a cases compensation needs its cases", ErrInvalidInput)
		}
	case CompensationManual:
	default:
		return fmt.Errorf("%w: compensation kind %q: use command, mcp, cases or manual", ErrInvalidInput, c.Kind)
	}
	if c.MaxRetries < 0 || c.InitialBackoffMS < 0 {
		return fmt.Errorf("%w: compensation retries and backoff must not be negative", ErrInvalidInput)
	}
	return nil
}
