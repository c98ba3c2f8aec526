package textfmt

import (
	"math"
	"strconv"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 59 * time.Second: "59s", time.Minute: "1m", 59 * time.Minute: "59m", time.Hour: "1h",
		47 * time.Hour: "47h", 48 * time.Hour: "2d", -90 * time.Second: "-1m",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
	if Ago(time.Now(), time.Time{}) != "-" {
		t.Error("zero time")
	}
}

// A countdown read every 250ms over three days never goes up and never
// reads less than is left.
func TestRemaining(t *testing.T) {
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}
	read := func(s string) time.Duration {
		n, err := strconv.Atoi(s[:len(s)-1])
		if err != nil || units[s[len(s)-1]] == 0 {
			t.Fatalf("Remaining wrote %q", s)
		}
		return time.Duration(n) * units[s[len(s)-1]]
	}
	prev := time.Duration(math.MaxInt64)
	for d := 72 * time.Hour; d > 0; d -= 250 * time.Millisecond {
		shown := read(Remaining(d))
		if shown < d {
			t.Fatalf("Remaining(%v) = %q: less than is left", d, Remaining(d))
		}
		if shown > prev {
			t.Fatalf("Remaining(%v) = %q: up from %v a moment before", d, Remaining(d), prev)
		}
		prev = shown
	}
	for d, want := range map[time.Duration]string{
		0: "0s", -time.Second: "0s", time.Nanosecond: "1s", 59 * time.Second: "59s", 119 * time.Second: "2m",
		118 * time.Second: "2m", 60 * time.Second: "1m", 30*time.Minute - time.Millisecond: "30m", time.Hour: "1h", 48 * time.Hour: "2d",
	} {
		if got := Remaining(d); got != want {
			t.Errorf("Remaining(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 effects"}, {1, "1 effect"}, {2, "2 effects"}} {
		if got := Count(c.n, "effect"); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
