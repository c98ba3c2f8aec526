package proxy_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/engines"
	sm "github.com/undolog/undolog/statemachine"
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
	store := engines.File(h.logPath, engines.Options{})
	list, _, _ := store.ListEffects(t.Context(), effectlog.EffectFilter{Session: "agent-c", State: sm.Committed})
	if len(list) != n {
		t.Fatalf("%d committed effects, want %d", len(list), n)
	}
}

// BenchmarkProxyLatency measures one compensable call (create_entities)
// made directly to the memory server and through the proxy, alternately in
// one run, and reports the medians and p99s and the median the proxy adds.
//
//	go test ./proxy -run '^$' -bench ProxyLatency -benchtime 300x
func BenchmarkProxyLatency(b *testing.B) {
	h := newHarness(b)
	direct := h.direct()
	proxied := h.proxied("bench")
	var d, p []time.Duration
	timed := func(s *mcp.ClientSession, name string) time.Duration {
		start := time.Now()
		r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_entities",
			Arguments: map[string]any{"entities": []entity{{Name: name, EntityType: "t", Observations: []string{}}}}})
		if err != nil || r.IsError {
			b.Fatalf("%v %v", err, r)
		}
		return time.Since(start)
	}
	for i := 0; b.Loop(); i++ {
		d = append(d, timed(direct, fmt.Sprintf("d%d", i)))
		p = append(p, timed(proxied, fmt.Sprintf("p%d", i)))
	}
	q := func(x []time.Duration, f float64) float64 {
		s := append([]time.Duration(nil), x...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[int(f*float64(len(s)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(d, 0.5), "direct-p50-ms")
	b.ReportMetric(q(d, 0.99), "direct-p99-ms")
	b.ReportMetric(q(p, 0.5), "proxy-p50-ms")
	b.ReportMetric(q(p, 0.99), "proxy-p99-ms")
	b.ReportMetric(q(p, 0.5)-q(d, 0.5), "added-p50-ms")
	b.ReportMetric(0, "ns/op")
}
