package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/logaddr"
)

// BenchmarkExecApprovalLatency measures, with the real binary, the time from
// `undolog approve ID` returning in one process to the command of an
// `undolog exec` waiting in another process starting, the two as on two
// machines (UNDOLOG_HOST m1 and m2). It reports the median (p50-ms), p90-ms
// and max-ms over the iterations, on a log file (polled), on PostgreSQL
// (pushed by NOTIFY) and on PostgreSQL with the push off (polled, as before
// it); run it with a fixed count:
//
//	UNDOLOG_REQUIRE_POSTGRES=1 go test ./cmd -run '^$' -bench ExecApprovalLatency -benchtime 30x
func BenchmarkExecApprovalLatency(b *testing.B) {
	b.Run("file", func(b *testing.B) {
		logPath := filepath.Join(b.TempDir(), "undolog.db")
		benchApprovalLatency(b, logPath, logaddr.File(logPath, logaddr.Options{}))
	})
	b.Run("postgres", func(b *testing.B) {
		url := pgtest.Server(b).NewDatabase(b)
		benchApprovalLatency(b, url, logaddr.Open(url, logaddr.Options{}))
	})
	b.Run("postgres-poll", func(b *testing.B) {
		url := pgtest.Server(b).NewDatabase(b)
		benchApprovalLatency(b, url, logaddr.Open(url, logaddr.Options{}), "UNDOLOG_NOTIFY_FALLBACK=0")
	})
}

func benchApprovalLatency(b *testing.B, addr string, store effectlog.Log, env ...string) {
	defer store.Close()
	dir := b.TempDir()
	bin := testbin.Undolog(b)
	env = append(append(os.Environ(), "UNDOLOG_LOG="+addr, "UNDOLOG_ACTOR=bench"), env...)
	var latencies []time.Duration
	for i := 0; b.Loop(); i++ {
		started := filepath.Join(dir, fmt.Sprintf("started-%d", i))
		waiter := exec.Command(bin, "exec", "--session", fmt.Sprintf("bench-%d", i), "--tool", "deploy", "--quiet",
			"--", "sh", "-c", "date +%s%N > "+started)
		waiter.Env = append(env, "UNDOLOG_HOST=m1")
		if err := waiter.Start(); err != nil {
			b.Fatal(err)
		}
		id := waitForRequest(b, store, fmt.Sprintf("bench-%d", i))
		approve := exec.Command(bin, "approve", strconv.FormatUint(id, 10))
		approve.Env = append(env, "UNDOLOG_HOST=m2")
		if out, err := approve.CombinedOutput(); err != nil {
			b.Fatalf("approve: %v\n%s", err, out)
		}
		returned := time.Now()
		if err := waiter.Wait(); err != nil {
			b.Fatalf("exec: %v", err)
		}
		data, err := os.ReadFile(started)
		if err != nil {
			b.Fatal(err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, time.Unix(0, ns).Sub(returned))
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	q := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.9), "p90-ms")
	b.ReportMetric(q(1), "max-ms")
	b.ReportMetric(0, "ns/op")
}

func waitForRequest(b *testing.B, store effectlog.Log, session string) uint64 {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if list, _, _ := store.PendingApprovals(b.Context(), session, 0); len(list) == 1 {
			return list[0].EffectID
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatalf("no approval request for %s", session)
	return 0
}
