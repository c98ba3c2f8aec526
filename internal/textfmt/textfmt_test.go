package textfmt

import (
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
