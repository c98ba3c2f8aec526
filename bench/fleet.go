package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/undolog/undolog/internal/pgtest"
)

// fleetRows measures a call as its own process on PostgreSQL, direct and
// through PgBouncer in transaction pooling mode: `undolog exec -- true`
// against execfloor, a process that connects, writes the same two
// transactions' worth on the floor tables and exits; one at a time and 32
// at once. Then a step as its own process through PgBouncer against the
// same on a log file.
func fleetRows(add func(what, value, ratio string), work string) error {
	var c *pgtest.Cluster
	var err error
	if *pgURL != "" {
		c, err = pgtest.Attach(*pgURL)
	} else {
		c, err = pgtest.Start()
	}
	if err != nil {
		return fmt.Errorf("PostgreSQL: %s", oneLine(err))
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
	if err := undolog(url)("warm", 0); err != nil { // the first migrates: not a call's cost
		return err
	}
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
		one, err := sideBySide(rate(undolog(way.url), 1, 40), rate(floorCall(way.floorURL), 1, 40))
		if err != nil {
			return err
		}
		add("exec -- true as its own process, "+way.name+": undolog", fmt.Sprintf("%.1f ms", 1000/one.median(0)),
			fmt.Sprintf("%.2fx the floor's time (target 1.3x)", one.ratio(1, 0)))
		add("exec -- true as its own process, "+way.name+": floor", fmt.Sprintf("%.1f ms", 1000/one.median(1)), "")
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
	return cliSteps(add, work, pooler.URL(url, true), "PostgreSQL through PgBouncer", "target 1.5x")
}
