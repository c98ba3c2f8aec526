package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	sm "github.com/undolog/undolog/statemachine"
)

// readRows times a reading command's process where the journal holds
// writes bbolt does not, which it lays over the file in memory without
// writing: the first `list --limit 50` after an `intercept` process beside
// the same list repeated, and a list over a journal of a checkpoint's worth
// of records (64) beside the same list once they are checkpointed. Each
// round runs the sides in turns of a few processes; the ratio is the
// median of the rounds'.
func readRows(add func(what, value, ratio string), work string) error {
	bin, err := buildUndolog()
	if err != nil {
		return err
	}
	journal := filepath.Join(work, "reads-journal.db")
	folded := filepath.Join(work, "reads-folded.db")
	defer removeLog(journal)
	defer removeLog(folded)
	// 20,000 effects in bbolt (batches too large for the journal are
	// committed), then 64 one at a time: the journal's limit.
	s := logaddr.File(journal, logaddr.Options{})
	for b := 0; b < 20; b++ {
		var batch []effectlog.InterceptRequest
		for i := 0; i < 1000; i++ {
			batch = append(batch, effectlog.InterceptRequest{Session: fmt.Sprintf("r%02d", b), Tool: "write_file", Tier: sm.Compensable,
				Args: args("reads", b*1000+i), CreateSession: true})
		}
		if _, err := s.InterceptMany(context.Background(), batch); err != nil {
			return err
		}
	}
	for i := 0; i < 64; i++ {
		if _, err := s.Intercept(context.Background(), effectlog.InterceptRequest{Session: "journal", Tool: "write_file", Tier: sm.Compensable,
			Args: args("journal", i), CreateSession: true}); err != nil {
			return err
		}
	}
	if err := s.Close(); err != nil {
		return err
	}
	// The same log with one write more, which finds the journal full and
	// commits it all to bbolt.
	if err := copyLog(journal, folded); err != nil {
		return err
	}
	run := func(path string, argv ...string) (float64, error) {
		start := time.Now()
		out, err := exec.Command(bin, append([]string{"--log", path}, argv...)...).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("undolog %v: %v\n%.300s", argv, err, out)
		}
		return float64(time.Since(start).Microseconds()) / 1000, nil
	}
	n := 0
	intercept := func(path string) error {
		n++
		_, err := run(path, "intercept", "--session", "reads", "--tool", "write_file", "--tier", "compensable", "--args", string(args("more", n)))
		return err
	}
	if err := intercept(folded); err != nil {
		return err
	}
	list := []string{"list", "--limit", "50"}

	// Over a full journal, beside the log that committed it.
	const pairs, turn = 20, 5
	r, err := sideBySide2(func() (float64, float64, error) {
		var full, none []float64
		for i := 0; i < pairs; i += turn {
			for k := 0; k < turn; k++ {
				x, err := run(journal, list...)
				if err != nil {
					return 0, 0, err
				}
				full = append(full, x)
			}
			for k := 0; k < turn; k++ {
				x, err := run(folded, list...)
				if err != nil {
					return 0, 0, err
				}
				none = append(none, x)
			}
		}
		return median(full), median(none), nil
	})
	if err != nil {
		return err
	}
	add("process: undolog list --limit 50 over 64 journal records (read-only, in memory)", fmt.Sprintf("%.2f ms", r.median(0)),
		fmt.Sprintf("%.2fx the same list with them checkpointed (%.2f ms)", r.ratio(0, 1), r.median(1)))
	// The first read after a write, beside the next (the write may have
	// committed the journal: the two reads see the same).
	r, err = sideBySide2(func() (float64, float64, error) {
		var first, again []float64
		for i := 0; i < pairs; i++ {
			if err := intercept(folded); err != nil {
				return 0, 0, err
			}
			a, err := run(folded, list...)
			if err != nil {
				return 0, 0, err
			}
			b, err := run(folded, list...)
			if err != nil {
				return 0, 0, err
			}
			first, again = append(first, a), append(again, b)
		}
		return median(first), median(again), nil
	})
	if err != nil {
		return err
	}
	add("process: undolog list --limit 50, first after an intercept", fmt.Sprintf("%.2f ms", r.median(0)),
		fmt.Sprintf("%.2fx the same list repeated (%.2f ms; target 1.1x)", r.ratio(0, 1), r.median(1)))

	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyLog copies a log file and its journal, if it has one: the file alone
// is the log only right after a compaction.
func copyLog(from, to string) error {
	if err := copyFile(from, to); err != nil {
		return err
	}
	os.Remove(to + ".undolog-journal")
	if _, err := os.Stat(from + ".undolog-journal"); err != nil {
		return nil
	}
	return copyFile(from+".undolog-journal", to+".undolog-journal")
}

func removeLog(path string) {
	os.Remove(path)
	os.Remove(path + ".undolog-journal")
}
