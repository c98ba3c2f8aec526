package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/undolog/undolog/filesnap"
)

// filesRows times a shell command's snapshot (filesnap's Before and After
// of the whole project) on a git repository of 10,000 files of which the
// command changes 10, against `git status --porcelain` on the same tree,
// in turns in each round.
func filesRows(add func(what, value, ratio string), work string) error {
	project := filepath.Join(work, "files-project")
	const files, changed = 10000, 10
	for i := range files {
		p := filepath.Join(project, fmt.Sprintf("dir%03d", i/100), fmt.Sprintf("file%05d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "file %d\n%0100d\n", i, i), 0o644); err != nil {
			return err
		}
	}
	git := func(args ...string) (time.Duration, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = project
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("git %v: %v: %s", args, err, out)
		}
		return time.Since(start), nil
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-q", "-m", "bench"}} {
		if _, err := git(args...); err != nil {
			return err
		}
	}
	os.Setenv("UNDOLOG_FILES_DIR", filepath.Join(work, "files-store"))
	round := 0
	// Each side's CPU time too (user and system, its git processes
	// included): on a busy machine, steadier than the wall clock.
	var snapshotCPU, statusCPU []float64
	snapshot := func() (float64, error) {
		round++
		cpu0 := cpuTime()
		start := time.Now()
		id, err := filesnap.Before(project, nil)
		if err != nil {
			return 0, err
		}
		before := time.Since(start)
		for i := range changed {
			p := filepath.Join(project, fmt.Sprintf("dir%03d", i*37%100), fmt.Sprintf("file%05d.txt", i*37%100*100+i))
			if err := os.WriteFile(p, fmt.Appendf(nil, "changed in round %d\n", round), 0o644); err != nil {
				return 0, err
			}
		}
		start = time.Now()
		if err := filesnap.After(project, id); err != nil {
			return 0, err
		}
		wall := (before + time.Since(start)).Seconds() * 1000
		snapshotCPU = append(snapshotCPU, cpuTime()-cpu0) // the files changed in the middle are in it: a few writes
		return wall, nil
	}
	status := func() (float64, error) {
		cpu0 := cpuTime()
		d, err := git("status", "--porcelain")
		statusCPU = append(statusCPU, cpuTime()-cpu0)
		return d.Seconds() * 1000, err
	}
	// The store's first snapshot hashes every file: once, as a project's
	// first call does.
	if _, err := snapshot(); err != nil {
		return err
	}
	snapshotCPU = nil
	r, err := sideBySide(snapshot, status)
	if err != nil {
		return err
	}
	add("files: shell command snapshot, 10,000 files, 10 changed (Before+After)", fmt.Sprintf("%.1f ms", r.median(0)),
		fmt.Sprintf("%.2fx git status --porcelain (at most 1.5x)", r.ratio(0, 1)))
	add("files: git status --porcelain, same tree", fmt.Sprintf("%.1f ms", r.median(1)), "")
	cpu := make(rounds, len(snapshotCPU))
	for i := range cpu {
		cpu[i] = []float64{snapshotCPU[i], statusCPU[i]}
	}
	add("files: the snapshot's CPU time (user+system)", fmt.Sprintf("%.1f ms", cpu.median(0)),
		fmt.Sprintf("%.2fx git status's %.1f ms", cpu.ratio(0, 1), cpu.median(1)))
	return nil
}

// cpuTime is the CPU time, in ms, this process and its children that
// ended have used.
func cpuTime() float64 {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	ns := self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano()
	return float64(ns) / 1e6
}
