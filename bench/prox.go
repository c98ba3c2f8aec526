package main

// The proxy's rows: a compensable call through `undolog proxy` against the
// same call made directly to the MCP server, the opens of the log per call
// through the proxy, and two proxies on one log against one alone. They
// need the reference memory server (npm @modelcontextprotocol/server-memory):
// UNDOLOG_MCP_MEMORY names its binary, as for the tests.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/policy"
	"github.com/undolog/undolog/proxy"
	"github.com/undolog/undolog/storage"
)

// proxyCalls is how many calls each side makes in a round.
const proxyCalls = 100

func proxyRows(add func(what, value, ratio string), work string) error {
	server := os.Getenv("UNDOLOG_MCP_MEMORY")
	if server == "" {
		add("proxy rows", "skipped", "UNDOLOG_MCP_MEMORY (the memory MCP server) not set")
		return nil
	}
	bin, err := buildUndolog()
	if err != nil {
		return err
	}
	policy, err := filepath.Abs(filepath.Join("..", "examples", "memory-policy.yaml"))
	if err != nil {
		return err
	}
	proxied := func(log, session string) (*rpcClient, error) {
		return startClient(bin, []string{"--log", log, "proxy", "--session", session, "--policy", policy, "--", server},
			"MEMORY_FILE_PATH="+filepath.Join(work, "memory-"+session+".jsonl"))
	}
	var clients []*rpcClient
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	var startErr error
	open := func(c *rpcClient, err error) *rpcClient {
		if c != nil {
			clients = append(clients, c)
		}
		if err != nil {
			startErr = err
		}
		return c
	}
	direct := open(startClient(server, nil, "MEMORY_FILE_PATH="+filepath.Join(work, "memory-direct.jsonl")))
	through := open(proxied(filepath.Join(work, "proxy.db"), "p"))
	alone := open(proxied(filepath.Join(work, "proxy-alone.db"), "alone"))
	one := open(proxied(filepath.Join(work, "proxy-two.db"), "one"))
	two := open(proxied(filepath.Join(work, "proxy-two.db"), "two"))
	inproc, opens, err := inprocClient(filepath.Join(work, "proxy-inproc.db"), policy, server, filepath.Join(work, "memory-inproc.jsonl"))
	open(inproc, err)
	if startErr != nil {
		return fmt.Errorf("proxy rows: %w", startErr)
	}

	seq := 0
	timed := func(c *rpcClient) (time.Duration, error) {
		seq++
		start := time.Now()
		err := c.createEntity(fmt.Sprintf("e%d", seq))
		return time.Since(start), err
	}
	// One round: the direct and proxied calls in turns, the in-process
	// proxy's opens, then a proxy alone and two side by side in turns.
	var added, floor, opensPer10, p99Alone, p99Two, ratio []float64
	for round := 0; round < *runs; round++ {
		// The floor of what the proxy adds: a call's two durable writes.
		f, err := twoSyncs(filepath.Join(work, "proxy-floor"))
		if err != nil {
			return err
		}
		floor = append(floor, f)
		var d, p, a, b []time.Duration
		for i := 0; i < proxyCalls; i++ {
			x, err := timed(direct)
			if err != nil {
				return err
			}
			y, err := timed(through)
			if err != nil {
				return err
			}
			d, p = append(d, x), append(p, y)
		}
		before := opens()
		for i := 0; i < proxyCalls; i++ {
			if _, err := timed(inproc); err != nil {
				return err
			}
		}
		opened := opens() - before
		for i := 0; i < proxyCalls; i++ {
			x, err := timed(alone)
			if err != nil {
				return err
			}
			a = append(a, x)
			var wg sync.WaitGroup
			var mu sync.Mutex
			errs := make([]error, 2)
			for k, c := range []*rpcClient{one, two} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					y, err := timed2(c, fmt.Sprintf("t%d-%d-%d", round, i, k))
					mu.Lock()
					b, errs[k] = append(b, y), err
					mu.Unlock()
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return err
				}
			}
		}
		added = append(added, ms(quantile(p, 0.5)-quantile(d, 0.5)))
		opensPer10 = append(opensPer10, float64(opened)*10/proxyCalls)
		p99Alone, p99Two = append(p99Alone, ms(quantile(a, 0.99))), append(p99Two, ms(quantile(b, 0.99)))
		ratio = append(ratio, ms(quantile(b, 0.99))/ms(quantile(a, 0.99)))
	}
	add("proxy: compensable call, p50 added to a direct call", fmt.Sprintf("%.2f ms", median(added)), "target at most 1.0 ms")
	add("proxy: its floor, two 4 KiB overwrite+fdatasync", fmt.Sprintf("%.2f ms", median(floor)), "")
	add("proxy: opens of the log per 10 calls", fmt.Sprintf("%.1f", median(opensPer10)), "target at most 1")
	add("proxy: one proxy alone, p99", fmt.Sprintf("%.1f ms", median(p99Alone)), "")
	add("proxy: two proxies on one log, p99", fmt.Sprintf("%.1f ms", median(p99Two)), fmt.Sprintf("%.2fx one alone (target at most 2x)", median(ratio)))
	return nil
}

// twoSyncs is the time in ms of a logged call's two durable writes
// (intercept-and-start before it runs, commit before the answer), as 4 KiB
// overwrites with fdatasync of the file path.
func twoSyncs(path string) (float64, error) {
	rate, err := overwriteRate(path, 100)
	if err != nil {
		return 0, err
	}
	return 2000 / rate, nil
}

func timed2(c *rpcClient, name string) (time.Duration, error) {
	start := time.Now()
	err := c.createEntity(name)
	return time.Since(start), err
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func quantile(x []time.Duration, f float64) time.Duration {
	s := append([]time.Duration(nil), x...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(f*float64(len(s)-1))]
}

// rpcClient is a minimal MCP client over newline-delimited JSON-RPC: one
// call at a time.
type rpcClient struct {
	mu    sync.Mutex
	w     io.WriteCloser
	r     *bufio.Reader
	id    int
	close func()
}

func startClient(bin string, argv []string, env ...string) (*rpcClient, error) {
	cmd := exec.Command(bin, argv...)
	cmd.Env = append(append(os.Environ(), "UNDOLOG_ACTOR=bench"), env...)
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &rpcClient{w: w, r: bufio.NewReader(r), close: func() { w.Close(); cmd.Wait() }}
	return c, c.initialize()
}

// inprocClient runs a proxy in this process and returns its client and a
// count of this process's opens of the log (the file engine counts them).
func inprocClient(log, policyFile, server, memory string) (*rpcClient, func() int64, error) {
	data, err := os.ReadFile(policyFile)
	if err != nil {
		return nil, nil, err
	}
	pol, err := policy.ParsePolicy(data)
	if err != nil {
		return nil, nil, err
	}
	store := logaddr.File(log, logaddr.Options{})
	counted, ok := store.(interface{ Engine() storage.Engine }).Engine().(interface{ Opens() int64 })
	if !ok {
		store.Close()
		return nil, nil, fmt.Errorf("the file engine counts no opens")
	}
	os.Setenv("MEMORY_FILE_PATH", memory) // the server the proxy starts reads it
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &proxy.Proxy{Log: store, Session: "inproc", Policy: pol, SessionActor: "bench"}
	done := make(chan struct{})
	go func() {
		p.Run(context.Background(), []string{server}, inR, outW)
		outW.Close()
		close(done)
	}()
	c := &rpcClient{w: inW, r: bufio.NewReader(outR), close: func() { inW.Close(); <-done; store.Close() }}
	return c, counted.Opens, c.initialize()
}

func (c *rpcClient) send(method string, params any, id bool) (json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if id {
		c.id++
		m["id"] = c.id
	}
	b, _ := json.Marshal(m)
	if _, err := c.w.Write(append(b, '\n')); err != nil || !id {
		return nil, err
	}
	for {
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var resp struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(line, &resp) != nil || resp.ID == nil || *resp.ID != c.id {
			continue // a notification or a request of the server's
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, resp.Error.Message)
		}
		return resp.Result, nil
	}
}

func (c *rpcClient) initialize() error {
	if _, err := c.send("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "bench", "version": "1"}}, true); err != nil {
		return err
	}
	_, err := c.send("notifications/initialized", map[string]any{}, false)
	return err
}

func (c *rpcClient) createEntity(name string) error {
	res, err := c.send("tools/call", map[string]any{"name": "create_entities", "arguments": map[string]any{
		"entities": []map[string]any{{"name": name, "entityType": "t", "observations": []string{}}}}}, true)
	if err != nil {
		return err
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(res, &r); r.IsError {
		return fmt.Errorf("create_entities failed: %s", res)
	}
	return nil
}
