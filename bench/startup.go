package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The start-up budget, stated once: a whole `undolog version` at most
// versionTarget times a static Go hello, and the packages' init (every
// package's, summed as GODEBUG=inittrace=1 reports them) at most
// initTarget times the hello's whole process, each measured side by side
// with the hello in the same round.
const (
	versionTarget = 3.0
	initTarget    = 2.0
)

// startup is one measure of the budget: medians over the rounds of
// undolog version's whole process, its package init, undolog's binary doing
// nothing and a static hello, in ms, and the ratios the targets bound.
type startup struct {
	version, init, linked, hello float64
	versionRatio, initRatio      float64
	linkedRatio                  float64
}

// measureStartup times, in rounds of n processes of each side taken in
// turns, undolog version, the package init of undolog version, undolog's
// binary doing nothing (linked) and a static Go hello.
func measureStartup(bin, linked, hello string, nRounds, n int) (startup, error) {
	timeOne := func(argv ...string) (float64, error) {
		start := time.Now()
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("%v: %v\n%.300s", argv, err, out)
		}
		return float64(time.Since(start).Microseconds()) / 1000, nil
	}
	var r [][]float64
	for i := 0; i < nRounds; i++ {
		var version, inits, link, hi []float64
		for k := 0; k < n; k++ {
			v, err := timeOne(bin, "version")
			if err != nil {
				return startup{}, err
			}
			in, err := initTime(bin, "version")
			if err != nil {
				return startup{}, err
			}
			l, err := timeOne(linked)
			if err != nil {
				return startup{}, err
			}
			h, err := timeOne(hello)
			if err != nil {
				return startup{}, err
			}
			version, inits, link, hi = append(version, v), append(inits, in), append(link, l), append(hi, h)
		}
		r = append(r, []float64{median(version), median(inits), median(link), median(hi)})
	}
	rs := rounds(r)
	return startup{
		version: rs.median(0), init: rs.median(1), linked: rs.median(2), hello: rs.median(3),
		versionRatio: rs.ratio(0, 3), initRatio: rs.ratio(1, 3), linkedRatio: rs.ratio(2, 3),
	}, nil
}

// initTime runs argv under GODEBUG=inittrace=1 and returns the clock time
// of every package's init, summed, in ms.
func initTime(argv ...string) (float64, error) {
	inits, err := packageInits(argv...)
	total := 0.0
	for _, in := range inits {
		total += in.ms
	}
	return total, err
}

// packageInit is one package's init as GODEBUG=inittrace=1 reports it.
type packageInit struct {
	pkg    string
	ms     float64
	allocs int
}

// packageInits runs argv under GODEBUG=inittrace=1 and returns each
// package's init.
func packageInits(argv ...string) ([]packageInit, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cmd.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v: %v\n%.300s", argv, err, stderr.String())
	}
	// init PACKAGE @T ms, C ms clock, B bytes, A allocs
	var inits []packageInit
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 11 || f[0] != "init" || f[6] != "clock," || f[10] != "allocs" {
			continue
		}
		ms, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			return nil, fmt.Errorf("inittrace line %q: %v", sc.Text(), err)
		}
		allocs, err := strconv.Atoi(f[9])
		if err != nil {
			return nil, fmt.Errorf("inittrace line %q: %v", sc.Text(), err)
		}
		inits = append(inits, packageInit{pkg: f[1], ms: ms, allocs: allocs})
	}
	if len(inits) == 0 {
		return nil, fmt.Errorf("%v under GODEBUG=inittrace=1 reported no init", argv)
	}
	return inits, nil
}

// startupRows adds the start-up budget's rows, each with its target.
func startupRows(add func(what, value, ratio string), bin, linked, hello, work string) error {
	s, err := measureStartup(bin, linked, hello, *runs, 40)
	if err != nil {
		return err
	}
	add("process: undolog version", fmt.Sprintf("%.2f ms", s.version),
		fmt.Sprintf("%.2fx a static Go hello (target at most %.1fx: %s)", s.versionRatio, versionTarget, verdict(s.versionRatio, versionTarget)))
	add("undolog version: package init, summed (GODEBUG=inittrace=1)", fmt.Sprintf("%.2f ms", s.init),
		fmt.Sprintf("%.2fx a static Go hello's whole process (target at most %.1fx: %s)", s.initRatio, initTarget, verdict(s.initRatio, initTarget)))
	add("process: undolog's binary doing nothing", fmt.Sprintf("%.2f ms", s.linked), fmt.Sprintf("%.2fx a static Go hello", s.linkedRatio))
	add("process: static Go hello", fmt.Sprintf("%.2f ms", s.hello), "")
	return hookRows(add, bin, work)
}

func verdict(ratio, target float64) string {
	if ratio <= target {
		return "met"
	}
	return "MISSED"
}

// hookSplit is where a coding agent's call spends its hooks' time: medians
// in ms over rounds of undolog version (the start-up), a PreToolUse of Read
// (start-up, the policy and its decision: a safe call logs nothing), a
// Bash call's PreToolUse and PostToolUse (each a start-up; the call logged
// and its project's files captured) and a no-op hook (sh reading its
// input), with the Bash pair's CPU time (its processes and theirs).
type hookSplit struct {
	version, read, bash, noop, bashCPU float64
}

// hookFiles is how many files the hook rows' project holds.
const hookFiles = 20

// measureHookSplit runs the hook rows' processes in turns, n of each a
// round, in a project of hookFiles files where each Bash call creates one.
func measureHookSplit(bin, work string, nRounds, n int) (hookSplit, error) {
	project := filepath.Join(work, "hook-project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		return hookSplit{}, err
	}
	for i := range hookFiles {
		if err := os.WriteFile(filepath.Join(project, fmt.Sprintf("f%d.txt", i)), []byte("x\n"), 0o644); err != nil {
			return hookSplit{}, err
		}
	}
	env := append(os.Environ(), "UNDOLOG_LOG="+filepath.Join(work, "hook.db"), "UNDOLOG_FILES_DIR="+filepath.Join(work, "hook-files"),
		"CLAUDE_PROJECT_DIR="+project)
	type timing struct{ wall, cpu float64 }
	run := func(input []byte, argv ...string) (timing, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env, cmd.Stdin = project, env, bytes.NewReader(input)
		start := time.Now()
		out, err := cmd.Output()
		wall := float64(time.Since(start).Microseconds()) / 1000
		if err != nil || bytes.Contains(out, []byte(`"deny"`)) {
			return timing{}, fmt.Errorf("%v: %v\n%.300s", argv, err, out)
		}
		cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		return timing{wall, float64(cpu.Microseconds()) / 1000}, nil
	}
	event := func(name, tool string, input any, more map[string]any) []byte {
		ev := map[string]any{"session_id": "bench-hooks", "transcript_path": os.DevNull, "cwd": project, "hook_event_name": name,
			"permission_mode": "default", "tool_name": tool, "tool_input": input, "tool_use_id": "toolu_bench"}
		for k, v := range more {
			ev[k] = v
		}
		b, _ := json.Marshal(ev)
		return b
	}
	read := event("PreToolUse", "Read", map[string]string{"file_path": filepath.Join(project, "f1.txt")}, nil)
	calls := 0
	var r [][]float64
	for range nRounds {
		var version, reads, bashes, noops, cpus []float64
		for range n {
			v, err := run(nil, bin, "version")
			if err != nil {
				return hookSplit{}, err
			}
			rd, err := run(read, bin, "hook")
			if err != nil {
				return hookSplit{}, err
			}
			calls++
			name := fmt.Sprintf("bash-%d.txt", calls)
			input := map[string]string{"command": "echo " + name + " > " + name}
			pre, err := run(event("PreToolUse", "Bash", input, nil), bin, "hook")
			if err != nil {
				return hookSplit{}, err
			}
			if err := os.WriteFile(filepath.Join(project, name), []byte(name+"\n"), 0o644); err != nil {
				return hookSplit{}, err
			}
			post, err := run(event("PostToolUse", "Bash", input, map[string]any{"tool_response": map[string]string{"stdout": ""}}), bin, "hook")
			if err != nil {
				return hookSplit{}, err
			}
			noop, err := run(read, "sh", "-c", "cat >/dev/null")
			if err != nil {
				return hookSplit{}, err
			}
			version, reads, bashes = append(version, v.wall), append(reads, rd.wall), append(bashes, pre.wall+post.wall)
			noops, cpus = append(noops, noop.wall), append(cpus, pre.cpu+post.cpu)
		}
		r = append(r, []float64{median(version), median(reads), median(bashes), median(noops), median(cpus)})
	}
	rs := rounds(r)
	return hookSplit{version: rs.median(0), read: rs.median(1), bash: rs.median(2), noop: rs.median(3), bashCPU: rs.median(4)}, nil
}

// hookRows adds the hook's start-up split: what a safe call and a logged
// one cost over undolog's start-up, beside a no-op hook.
func hookRows(add func(what, value, ratio string), bin, work string) error {
	s, err := measureHookSplit(bin, work, *runs, 20)
	if err != nil {
		return err
	}
	add("process: undolog hook, PreToolUse of Read (safe: the policy, nothing logged)", fmt.Sprintf("%.2f ms", s.read),
		fmt.Sprintf("start-up (undolog version) %.2f ms + %.2f ms the policy and its decision", s.version, s.read-s.version))
	add(fmt.Sprintf("process: undolog hook, a Bash call's PreToolUse+PostToolUse (logged, %d-file project captured)", hookFiles), fmt.Sprintf("%.2f ms", s.bash),
		fmt.Sprintf("2 start-ups %.2f ms + %.2f ms policy, log and files; CPU %.2f ms (the hooks and what they ran)", 2*s.version, s.bash-2*s.version, s.bashCPU))
	add("process: a no-op hook (sh -c 'cat >/dev/null'), twice", fmt.Sprintf("%.2f ms", 2*s.noop),
		fmt.Sprintf("the Bash pair is %.2fx it", s.bash/(2*s.noop)))
	return nil
}
