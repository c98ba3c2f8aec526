// Package textfmt owns the small text renderings that the command line and
// the terminal view share: compact ages and durations, and stored text made
// safe to print (Escape).
package textfmt

import (
	"strconv"
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

// Count renders n things: "1 effect", "2 effects", "0 effects". noun is
// the singular; the plural adds an s.
func Count[N ~int | ~int64 | ~uint64 | ~uint32](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatUint(uint64(n), 10) + " " + noun + "s"
}
