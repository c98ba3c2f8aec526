package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// fleetRows measures a call as its own process on PostgreSQL, direct and
// through PgBouncer in transaction pooling mode: `undolog exec -- true`
// against execfloor, a process that connects, writes the same two
// transactions' worth on the floor tables and exits; one at a time and 32
// at once, with the server's processor time a call where it runs on this
// machine (Linux). Then a step as its own process through PgBouncer
// against the same on a log file.
func fleetRows(add func(what, value, ratio string), work string) error {
	c, err := cluster()
	if err != nil {
		return err
	}
	defer c.Remove()
	ctx := context.Background()
	if err := checkSynchronousCommit(ctx, c.AdminURL()); err != nil {
		return err
	}
	pooler, err := c.StartPooler()
	if err != nil {
		return fmt.Errorf("PgBouncer: %s", oneLine(err))
	}
	name := fmt.Sprintf("bench_fleet_%d", os.Getpid())
	url, err := c.CreateDatabase(ctx, name)
	if err != nil {
		return err
	}
	defer c.DropDatabase(ctx, name)
	floorURL, err := c.CreateDatabase(ctx, name+"_floor")
	if err != nil {
		return err
	}
	defer c.DropDatabase(ctx, name+"_floor")
	f, err := openFloor(ctx, floorURL, true)
	if err != nil {
		return err
	}
	f.pool.Close()
	bin, err := buildUndolog()
	if err != nil {
		return err
	}
	floorBin := filepath.Join(work, "execfloor")
	if out, err := exec.Command("go", "build", "-o", floorBin, "./execfloor").CombinedOutput(); err != nil {
		return fmt.Errorf("build execfloor: %v\n%s", err, out)
	}
	undolog := func(url string) func(string, int) error {
		return func(session string, i int) error {
			cmd := exec.Command(bin, "--log", url, "exec", "--session", session, "--tier", "compensable", "--undo", "true",
				"--", "true", strconv.Itoa(i))
			cmd.Env = append(os.Environ(), "UNDOLOG_ACTOR=bench")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("undolog exec: %v\n%.300s", err, out)
			}
			return nil
		}
	}
	floorCall := func(url string) func(string, int) error {
		return func(session string, i int) error {
			if out, err := exec.Command(floorBin, url, session, strconv.Itoa(i)).CombinedOutput(); err != nil {
				return fmt.Errorf("execfloor: %v\n%.300s", err, out)
			}
			return nil
		}
	}
	if err := undolog(url)("fleet-warm", 0); err != nil { // the first migrates: not a call's cost
		return err
	}
	pid := c.ServerPID()
	round := 0
	rate := func(call func(string, int) error, procs, each int) func() (float64, error) {
		return func() (float64, error) {
			round++
			r := round
			return concurrently(procs, each, func(g, i int) error { return call(fmt.Sprintf("f%d-%d", r, g), i) })
		}
	}
	for _, way := range []struct{ name, url, floorURL string }{
		{"PostgreSQL direct", url, floorURL},
		{"through PgBouncer", pooler.URL(url, true), pooler.URL(floorURL, false)},
	} {
		var spent [2]time.Duration // the server's processor time, undolog's and the floor's
		var calls [2]int
		cpu := func(k int, measure func() (float64, error)) func() (float64, error) {
			return func() (float64, error) {
				before, _ := serverCPU(pid)
				x, err := measure()
				after, _ := serverCPU(pid)
				spent[k] += after - before
				calls[k] += 40
				return x, err
			}
		}
		one, err := sideBySide(cpu(0, rate(undolog(way.url), 1, 40)), cpu(1, rate(floorCall(way.floorURL), 1, 40)))
		if err != nil {
			return err
		}
		add("exec -- true as its own process, "+way.name+": undolog", fmt.Sprintf("%.1f ms", 1000/one.median(0)),
			fmt.Sprintf("%.2fx the floor's time (target 1.3x)", one.ratio(1, 0)))
		add("exec -- true as its own process, "+way.name+": floor", fmt.Sprintf("%.1f ms", 1000/one.median(1)), "")
		if _, ok := serverCPU(pid); ok {
			u, f := spent[0]/time.Duration(calls[0]), spent[1]/time.Duration(calls[1])
			add("PostgreSQL's processor time a call, "+way.name+": undolog", fmt.Sprintf("%.1f ms", float64(u.Microseconds())/1000),
				fmt.Sprintf("%.2fx the floor's (all rounds' sums)", float64(u)/float64(f)))
			add("PostgreSQL's processor time a call, "+way.name+": floor", fmt.Sprintf("%.1f ms", float64(f.Microseconds())/1000), "")
		}
		many, err := sideBySide(rate(undolog(way.url), 32, 8), rate(floorCall(way.floorURL), 32, 8))
		if err != nil {
			return err
		}
		target := "the floor's rate"
		if way.url != url {
			target = fmt.Sprintf("the floor's rate (target 0.5x); %.1fx 14 /s (target 10x)", many.median(0)/14)
		}
		add("exec -- true, 32 processes at once, "+way.name+": undolog", fmt.Sprintf("%.0f /s", many.median(0)),
			fmt.Sprintf("%.2fx %s", many.ratio(0, 1), target))
		add("exec -- true, 32 processes at once, "+way.name+": floor", fmt.Sprintf("%.0f /s", many.median(1)), "")
	}
	if err := approvalPush(add, bin, url, work); err != nil {
		return err
	}
	return cliSteps(add, work, pooler.URL(url, true), "PostgreSQL through PgBouncer", "target 1.5x")
}

// pushRows measures the approval push alone, on a server of its own.
func pushRows(add func(what, value, ratio string), work string) error {
	c, err := cluster()
	if err != nil {
		return err
	}
	defer c.Remove()
	ctx := context.Background()
	name := fmt.Sprintf("bench_push_%d", os.Getpid())
	url, err := c.CreateDatabase(ctx, name)
	if err != nil {
		return err
	}
	defer c.DropDatabase(ctx, name)
	bin, err := buildUndolog()
	if err != nil {
		return err
	}
	return approvalPush(add, bin, url, work)
}

// approvalPush times the approval push on PostgreSQL direct: an exec of an
// irreversible command waits for a decision in one process, `undolog
// approve` records it in another, and the time is from the decision's
// record (its decided_at, taken just before its transaction) to the
// command's first instruction, and from the approve process's start.
func approvalPush(add func(what, value, ratio string), bin, url, work string) error {
	const pushes = 15
	var fromDecision, fromProcess []float64
	undolog := func(argv ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"--log", url}, argv...)...)
		cmd.Env = append(os.Environ(), "UNDOLOG_ACTOR=bench")
		return cmd
	}
	for i := range pushes {
		session := fmt.Sprintf("push-%d-%d", os.Getpid(), i)
		marker := filepath.Join(work, session)
		waiting := undolog("exec", "--session", session, "--tool", "deploy", "--approval-timeout", "1m",
			"--", "sh", "-c", `date +%s%N > "$0"`, marker)
		if err := waiting.Start(); err != nil {
			return err
		}
		id, err := waitingRequest(undolog, session)
		if err == nil {
			time.Sleep(50 * time.Millisecond) // it listens by now
			start := time.Now()
			var out []byte
			if out, err = undolog("approve", id).CombinedOutput(); err != nil {
				err = fmt.Errorf("undolog approve: %v\n%.300s", err, out)
			}
			if err == nil {
				err = waiting.Wait()
			} else {
				waiting.Process.Kill()
				waiting.Wait()
			}
			var ran, decided time.Time
			if err == nil {
				ran, decided, err = pushTimes(undolog, id, marker)
			}
			if err == nil {
				fromDecision = append(fromDecision, float64(ran.Sub(decided).Microseconds())/1000)
				fromProcess = append(fromProcess, float64(ran.Sub(start).Microseconds())/1000)
			}
		} else {
			waiting.Process.Kill()
			waiting.Wait()
		}
		if err != nil {
			return err
		}
	}
	p50 := median(fromDecision)
	add("approval push p50, PostgreSQL direct: approve's decision to the waiting exec's command starting", fmt.Sprintf("%.1f ms", p50),
		fmt.Sprintf("%.2f of 10 ms", p50/10))
	add("approval push p50, PostgreSQL direct: from the approve process's start", fmt.Sprintf("%.1f ms", median(fromProcess)), "")
	return nil
}

// waitingRequest polls until session's exec asks for a decision, and
// returns the effect's id.
func waitingRequest(undolog func(...string) *exec.Cmd, session string) (string, error) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		out, err := undolog("approvals", "--session", session, "-o", "ids").Output()
		if err != nil {
			return "", fmt.Errorf("undolog approvals: %v", err)
		}
		if id := strings.TrimSpace(string(out)); id != "" {
			return id, nil
		}
	}
	return "", fmt.Errorf("no request of session %s within 30s", session)
}

// pushTimes reads when the command ran (its marker) and when the decision
// was recorded.
func pushTimes(undolog func(...string) *exec.Cmd, id, marker string) (ran, decided time.Time, err error) {
	text, err := os.ReadFile(marker)
	if err != nil {
		return ran, decided, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(text)), 10, 64)
	if err != nil {
		return ran, decided, fmt.Errorf("marker %s: %v", marker, err)
	}
	out, err := undolog("show", id, "-o", "json").Output()
	if err != nil {
		return ran, decided, fmt.Errorf("undolog show: %v", err)
	}
	var doc any
	if err := json.Unmarshal(out, &doc); err != nil {
		return ran, decided, err
	}
	at, ok := findString(doc, "decided_at")
	if !ok {
		return ran, decided, fmt.Errorf("undolog show %s: no decided_at", id)
	}
	decided, err = time.Parse(time.RFC3339Nano, at)
	return time.Unix(0, ns), decided, err
}

// findString finds the first string value of key in a decoded JSON document.
func findString(doc any, key string) (string, bool) {
	switch v := doc.(type) {
	case map[string]any:
		if s, ok := v[key].(string); ok {
			return s, true
		}
		for _, e := range v {
			if s, ok := findString(e, key); ok {
				return s, true
			}
		}
	case []any:
		for _, e := range v {
			if s, ok := findString(e, key); ok {
				return s, true
			}
		}
	}
	return "", false
}
