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

	"github.com/undolog/undolog/demo"
	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// maintRows times maintenance as whole processes: verify and compact on
// the 1M log (compact on a copy of it, as it rewrites the file), and gc of
// 100 completed sessions of 1,000 effects each, with each one's peak RSS.
// Each takes seconds: three rounds at most.
func maintRows(add func(what, value, ratio string), work string) error {
	path := filepath.Join(os.TempDir(), "undolog-bench-1m-v6.db")
	if err := demo.WriteLarge(context.Background(), path); err != nil {
		return err
	}
	bin, err := buildUndolog()
	if err != nil {
		return err
	}
	rounds := min(*runs, 3)
	row := func(what string, targetS, targetMiB float64, prepare func(i int) (string, error), args ...string) error {
		var times, rss []float64
		for i := 0; i < rounds; i++ {
			log, err := prepare(i)
			if err != nil {
				return err
			}
			s, mib, err := timeRSS(bin, append([]string{"--log", log}, args...)...)
			if err != nil {
				return err
			}
			times, rss = append(times, s), append(rss, mib)
		}
		ratio := ""
		if targetS > 0 {
			ratio = fmt.Sprintf("%.2f of %.0f s", median(times)/targetS, targetS)
		}
		add(what+" (time)", fmt.Sprintf("%.1f s", median(times)), ratio)
		ratio = ""
		if targetMiB > 0 {
			ratio = fmt.Sprintf("%.2f of %.0f MiB", median(rss)/targetMiB, targetMiB)
		}
		add(what+" (peak RSS)", fmt.Sprintf("%.1f MiB", median(rss)), ratio)
		return nil
	}
	same := func(int) (string, error) { return path, nil }
	if err := row("1M effects, whole process: undolog verify", 10, 256, same, "verify"); err != nil {
		return err
	}
	copied := filepath.Join(work, "compact-1m.db")
	defer os.Remove(copied)
	defer os.Remove(copied + ".undolog-journal")
	if err := row("1M effects, whole process: undolog compact (a copy)", 0, 0,
		func(int) (string, error) { return copied, copyLog(path, copied) }, "compact"); err != nil {
		return err
	}
	// gc in the 1M log: 100 of its sessions completed in a copy, dropped
	// without the compaction after (the compact row is its cost).
	if err := row("1M effects, whole process: undolog gc of 100 completed sessions of 1,000 effects (a copy, --no-compact)", 5, 0,
		func(int) (string, error) {
			if err := copyLog(path, copied); err != nil {
				return "", err
			}
			return copied, completeSessions(copied, "load-%04d", 100)
		}, "gc", "--older-than", "0s", "--no-compact"); err != nil {
		return err
	}
	gcLog := filepath.Join(work, "gc-100k.db")
	defer os.Remove(gcLog)
	return row("gc of 100 completed sessions of 1,000 effects (whole process, then compact)", 5, 0,
		func(int) (string, error) { return gcLog, writeFinished(gcLog, 100, 1000) }, "gc", "--older-than", "0s")
}

// timeRSS runs undolog under /usr/bin/time: its wall time in seconds and
// its peak RSS in MiB (see filterRows).
func timeRSS(bin string, argv ...string) (s, mib float64, err error) {
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "maxrss=%M", bin}, argv...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("undolog %v: %v\n%.300s", argv, err, stderr.String())
	}
	s = time.Since(start).Seconds()
	i := strings.LastIndex(stderr.String(), "maxrss=")
	if i < 0 {
		return 0, 0, fmt.Errorf("undolog %v: no peak RSS from /usr/bin/time: %q", argv, stderr.String())
	}
	kib, err := strconv.ParseFloat(strings.TrimSpace(stderr.String()[i+len("maxrss="):]), 64)
	if err != nil {
		return 0, 0, fmt.Errorf("undolog %v: no peak RSS from /usr/bin/time: %q", argv, stderr.String())
	}
	return s, kib / 1024, nil
}

// writeFinished makes a fresh log of sessions completed sessions of per
// pending effects each (200-byte args, as the 1M log's), for gc to drop.
func writeFinished(path string, sessions, per int) error {
	os.Remove(path)
	os.Remove(path + ".undolog-journal")
	store := logaddr.File(path, logaddr.Options{})
	defer store.Close()
	ctx := context.Background()
	batch := make([]effectlog.InterceptRequest, 0, 10*per)
	for s := 0; s < sessions; s++ {
		for i := 0; i < per; i++ {
			batch = append(batch, effectlog.InterceptRequest{Session: fmt.Sprintf("gc-%04d", s), Tool: "write_file", Tier: sm.Compensable,
				Args: json.RawMessage(fmt.Sprintf(`{"path":"/srv/data/%d/%d.json","pad":"%s"}`, s, i, pad)), CreateSession: true, Actor: "bench"})
		}
		if len(batch) == cap(batch) || s == sessions-1 {
			if _, err := store.InterceptMany(ctx, batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	store.Close()
	return completeSessions(path, "gc-%04d", sessions)
}

// completeSessions marks the first n sessions named by format completed.
func completeSessions(path, format string, n int) error {
	store := logaddr.File(path, logaddr.Options{})
	defer store.Close()
	for s := 0; s < n; s++ {
		if _, err := store.SetSessionState(context.Background(), fmt.Sprintf(format, s), sm.SessionCompleted, model.Change{Actor: "bench"}); err != nil {
			return err
		}
	}
	return nil
}
