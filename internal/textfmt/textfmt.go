// Package textfmt owns how the command line and the terminal view present
// text: stored text made safe to print (Escape), the colours of states,
// tables aligned by display width, shell words to paste, one-line
// messages, compact ages and durations.
package textfmt

import (
	"strconv"
	"strings"
	"time"
)

// Ago renders the time since t compactly: 45s, 12m, 3h, 2d; "-" for no time.
func Ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return Duration(now.Sub(t))
}

// Duration renders d compactly: 45s, 12m, 3h (below two days), 2d.
func Duration(d time.Duration) string {
	neg := ""
	if d < 0 {
		neg, d = "-", -d
	}
	switch {
	case d < time.Minute:
		return neg + strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return neg + strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return neg + strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return neg + strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// Remaining renders a time left as Duration does, rounded up: a countdown
// read again later never goes up and never reads less than is left (floor
// read 2m left as 1m two seconds later). None left is 0s.
func Remaining(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	up := func(unit time.Duration) int64 { return int64((d + unit - 1) / unit) }
	switch {
	case up(time.Second) < 60:
		return strconv.FormatInt(up(time.Second), 10) + "s"
	case up(time.Minute) < 60:
		return strconv.FormatInt(up(time.Minute), 10) + "m"
	case up(time.Hour) < 48:
		return strconv.FormatInt(up(time.Hour), 10) + "h"
	}
	return strconv.FormatInt(up(24*time.Hour), 10) + "d"
}

// Count renders n things: "1 effect", "2 effects", "0 effects". noun is
// the singular; the plural adds an s.
func Count[N ~int | ~int64 | ~uint64 | ~uint32](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatUint(uint64(n), 10) + " " + noun + "s"
}

// OneLine is the first line of a message, without the spaces around it:
// for a note or a stored reason that must stay on one line (a YAML or a
// server's error goes on with context lines).
func OneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}
