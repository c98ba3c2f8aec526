package tui

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/undolog/undolog/demo"
	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
)

const largePer = demo.LargePer

// largeLog returns the log of 1,000,000 effects (demo.WriteLarge), made once
// and kept in the temp directory (or at $UNDOLOG_BENCH_1M) for later runs.
func largeLog(tb testing.TB) string {
	path := os.Getenv("UNDOLOG_BENCH_1M")
	if path == "" {
		path = filepath.Join(os.TempDir(), "undolog-bench-1m-v4.db")
	}
	if err := demo.WriteLarge(context.Background(), path); err != nil {
		tb.Fatal(err)
	}
	return path
}

// BenchmarkFirstPaint1M is the sessions screen's first frame on 1M effects:
// building the model, its first load and its first render.
func BenchmarkFirstPaint1M(b *testing.B) {
	store := logaddr.File(largeLog(b), logaddr.Options{})
	for b.Loop() {
		m := New(b.Context(), Options{Log: store, Actor: "bench"})
		m.Update(loadSessions(b.Context(), store)())
		if !strings.Contains(m.render(), "load-0999") {
			b.Fatal("first screen lacks the newest session")
		}
	}
}

// BenchmarkSessionScreen1M is a session of 1,000 effects opened, with the
// selected effect's detail, on 1M effects.
func BenchmarkSessionScreen1M(b *testing.B) {
	store := logaddr.File(largeLog(b), logaddr.Options{})
	for b.Loop() {
		m := New(b.Context(), Options{Log: store, Session: "load-0500", Actor: "bench"})
		m.Update(loadEffects(b.Context(), store, "load-0500", effectlog.EffectFilter{}, 0, 0)())
		m.Update(loadDetail(b.Context(), store, m.session.selected().ID)())
		// The args are wrapped, not cut: at 80x24 the history is below.
		if !strings.Contains(m.render(), "args:") {
			b.Fatal("no detail")
		}
	}
}

// BenchmarkScrollPage1M is one step down that crosses into the next page of
// a session (the costliest key press), with its render.
func BenchmarkScrollPage1M(b *testing.B) {
	store := logaddr.File(largeLog(b), logaddr.Options{})
	m := New(b.Context(), Options{Log: store, Session: "load-0500", Actor: "bench"})
	m.Update(loadEffects(b.Context(), store, "load-0500", effectlog.EffectFilter{}, 0, 0)())
	for b.Loop() {
		m.session.cursor = len(m.session.effects) - 1
		if m.session.next == 0 { // wrap to the first page
			m.session.page, m.session.next = 0, 0
			m.Update(loadEffects(b.Context(), store, "load-0500", effectlog.EffectFilter{}, 0, 0)())
			continue
		}
		cmd := m.session.move(b.Context(), 1, store)
		m.Update(cmd())
		_ = m.render()
	}
}

// TestMemoryProbe runs only as the helper of BenchmarkMaxRSS1M: in a fresh
// process it opens the view on the 1M log, opens a session and pages through
// all of it, then prints its peak resident set size.
func TestMemoryProbe(t *testing.T) {
	path := os.Getenv("UNDOLOG_MEMORY_PROBE")
	if path == "" {
		t.Skip("helper process of BenchmarkMaxRSS1M")
	}
	store := logaddr.File(path, logaddr.Options{})
	m := New(t.Context(), Options{Log: store, Actor: "probe"})
	m.Update(loadSessions(t.Context(), store)())
	_ = m.render()
	for _, session := range []string{"load-0999", "load-0500", "load-0000"} {
		m.screen, m.session = screenSession, sessionView{id: session}
		m.Update(loadEffects(t.Context(), store, session, effectlog.EffectFilter{}, 0, 0)())
		for i := 0; i < largePer; i++ {
			if cmd := m.session.move(t.Context(), 1, store); cmd != nil {
				m.Update(cmd())
			}
			_ = m.render()
		}
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("maxrss-kib %d\n", ru.Maxrss)
}

// BenchmarkMaxRSS1M reports the peak RSS of a process that views the 1M log
// and scrolls through 3,000 effects of it (the probe above, in a fresh process
// so that making the log does not count).
func BenchmarkMaxRSS1M(b *testing.B) {
	path := largeLog(b)
	var kib float64
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryProbe$", "-test.v")
		cmd.Env = append(os.Environ(), "UNDOLOG_MEMORY_PROBE="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		_, after, ok := strings.Cut(string(out), "maxrss-kib ")
		if !ok {
			b.Fatalf("no measure in %s", out)
		}
		v, _ := strconv.ParseFloat(strings.Fields(after)[0], 64)
		kib = max(kib, v)
	}
	b.ReportMetric(kib/1024, "max-rss-MiB")
}
