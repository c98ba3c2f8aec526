package proxy_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/policy"
	"github.com/undolog/undolog/proxy"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/storage"
)

// Concurrent calls of one client run concurrently through the proxy, and
// every one is logged and committed once.
func TestProxyConcurrentCalls(t *testing.T) {
	h := newHarness(t)
	agent := h.proxied("agent-c")
	const n = 16
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := call(t, agent, "create_entities", map[string]any{"entities": []entity{{Name: fmt.Sprintf("e%d", i), EntityType: "t", Observations: []string{}}}})
			if r.IsError {
				t.Errorf("call %d: %s", i, text(r))
			}
		}(i)
	}
	wg.Wait()
	store := logaddr.File(h.logPath, logaddr.Options{})
	list, _, _ := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: "agent-c", State: sm.Committed})
	if len(list) != n {
		t.Fatalf("%d committed effects, want %d", len(list), n)
	}
}

// BenchmarkProxyLatency measures one compensable call (create_entities)
// made directly to the memory server, through the proxy as a process, and
// through a proxy run in this process (whose opens of the log it counts),
// in turns in one run. It reports the medians and p99s, the median the
// proxy adds, and the opens of the log per 10 calls through the proxy.
//
//	go test ./proxy -run '^$' -bench ProxyLatency -benchtime 300x
func BenchmarkProxyLatency(b *testing.B) {
	h := newHarness(b)
	direct := h.direct()
	proxied := h.proxied("bench")
	inproc, opens := h.inprocProxy("bench-inproc")
	var d, p []time.Duration
	for i := 0; b.Loop(); i++ {
		d = append(d, timedCall(b, direct, fmt.Sprintf("d%d", i)))
		p = append(p, timedCall(b, proxied, fmt.Sprintf("p%d", i)))
	}
	timedCall(b, inproc, "warm") // its first call opens the log
	before, calls := opens(), len(d)
	var in []time.Duration
	for i := range calls {
		in = append(in, timedCall(b, inproc, fmt.Sprintf("i%d", i)))
	}
	b.ReportMetric(quantile(d, 0.5), "direct-p50-ms")
	b.ReportMetric(quantile(d, 0.99), "direct-p99-ms")
	b.ReportMetric(quantile(p, 0.5), "proxy-p50-ms")
	b.ReportMetric(quantile(p, 0.99), "proxy-p99-ms")
	b.ReportMetric(quantile(p, 0.5)-quantile(d, 0.5), "added-p50-ms")
	b.ReportMetric(quantile(in, 0.5), "inproc-p50-ms")
	b.ReportMetric(float64(opens()-before)*10/float64(calls), "opens/10calls")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTwoProxies measures compensable calls through a proxy process
// alone on its log and through two proxy processes on another log at once,
// in turns in one run, and reports the p99s and their ratio.
//
//	go test ./proxy -run '^$' -bench TwoProxies -benchtime 300x
func BenchmarkTwoProxies(b *testing.B) {
	alone := newHarness(b).proxied("alone")
	h := newHarness(b)
	one, two := h.proxied("one"), h.proxied("two")
	var single, both []time.Duration
	var mu sync.Mutex
	for i := 0; b.Loop(); i++ {
		single = append(single, timedCall(b, alone, fmt.Sprintf("a%d", i)))
		var wg sync.WaitGroup
		for k, s := range []*mcp.ClientSession{one, two} {
			wg.Go(func() {
				t := timedCall(b, s, fmt.Sprintf("b%d-%d", i, k))
				mu.Lock()
				both = append(both, t)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	b.ReportMetric(quantile(single, 0.5), "alone-p50-ms")
	b.ReportMetric(quantile(single, 0.99), "alone-p99-ms")
	b.ReportMetric(quantile(both, 0.5), "two-p50-ms")
	b.ReportMetric(quantile(both, 0.99), "two-p99-ms")
	b.ReportMetric(quantile(both, 0.99)/quantile(single, 0.99), "p99-ratio")
	b.ReportMetric(0, "ns/op")
}

// timedCall makes one compensable call and returns how long it took.
func timedCall(b *testing.B, s *mcp.ClientSession, name string) time.Duration {
	start := time.Now()
	r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_entities",
		Arguments: map[string]any{"entities": []entity{{Name: name, EntityType: "t", Observations: []string{}}}}})
	if err != nil || r.IsError {
		b.Fatalf("%v %v", err, r)
	}
	return time.Since(start)
}

// quantile is the f quantile of x in milliseconds.
func quantile(x []time.Duration, f float64) float64 {
	s := append([]time.Duration(nil), x...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[int(f*float64(len(s)-1))]) / float64(time.Millisecond)
}

// inprocProxy runs a proxy in this process, in front of the memory server,
// and returns its client and a count of this process's opens of the log.
func (h *harness) inprocProxy(session string) (*mcp.ClientSession, func() int64) {
	h.t.Helper()
	h.t.Setenv("MEMORY_FILE_PATH", filepath.Join(h.dir, "memory-inproc.jsonl"))
	policyYAML, err := os.ReadFile(h.policy)
	if err != nil {
		h.t.Fatal(err)
	}
	pol, err := policy.ParsePolicy(policyYAML)
	if err != nil {
		h.t.Fatal(err)
	}
	store := logaddr.File(h.logPath, logaddr.Options{})
	counted, ok := store.(interface{ Engine() storage.Engine }).Engine().(interface{ Opens() int64 })
	if !ok {
		h.t.Fatal("the file engine counts no opens")
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &proxy.Proxy{Log: store, Session: session, Policy: pol, SessionActor: "tester"}
	server := memoryServer(h.t) // here: its Skip must run on the test's goroutine
	done := make(chan error, 1)
	go func() {
		done <- p.Run(context.Background(), []string{server}, inR, outW)
		outW.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		s.Close()
		inW.Close()
		<-done
		store.Close()
	})
	return s, counted.Opens
}
