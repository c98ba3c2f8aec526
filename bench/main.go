// Command bench measures undolog against the physical limit of the disk and
// against what a user would build instead (SQLite in WAL mode; on
// PostgreSQL, the same records written as plain SQL), in one run, on the
// same disk, and prints one table of medians with ratios.
//
//	go run -C bench .              # from the repository root
//	go run -C bench . -large=false # without the 1,000,000-effect part
//	go run -C bench . -only postgres # only the PostgreSQL rows
//	go run -C bench . -only cli      # only undolog's commands as processes
//	go run -C bench . -only startup  # only the start-up budget: version against a static hello, package init
//	go run -C bench . -only large    # only the rows on 1,000,000 effects
//	go run -C bench . -only proxy    # only the proxy's rows (UNDOLOG_MCP_MEMORY names the memory MCP server)
//	go run -C bench . -only proxy-http # only the proxy's rows under 2026-07-28 over HTTP (a Go SDK client and server)
//	go run -C bench . -only maint    # only verify, compact and gc as processes
//	go run -C bench . -only agent    # only the coding agent's rows (as root; UNDOLOG_CLAUDE names Claude Code)
//	go run -C bench . -only files    # only a shell command's file snapshot against git status
//	go run -C bench . -only fleet    # only exec -- true as its own process on PostgreSQL against its floor program
//	go run -C bench . -only push     # only the approval push on PostgreSQL (one of the fleet rows)
//
// It is a module of its own so that SQLite (modernc.org/sqlite) never
// becomes a dependency of undolog.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	_ "modernc.org/sqlite"

	"github.com/undolog/undolog/demo"
	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/agenttest"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
	"github.com/undolog/undolog/tui"
)

var (
	runs    = flag.Int("runs", 5, "rounds of each measure; the table shows medians, and medians of the ratios within a round")
	serial  = flag.Int("n", 200, "lifecycles per serial run")
	large   = flag.Bool("large", true, "also measure on a log of 1,000,000 effects (built once, about two minutes)")
	dir     = flag.String("dir", "", "where to put the logs (default: a temp dir; the 1M log is kept in the system temp dir)")
	only    = flag.String("only", "", "postgres: only the PostgreSQL rows; cli: only the command processes; startup: only the start-up budget; large: only the rows on 1,000,000 effects; proxy: only the proxy's rows; proxy-http: only its rows under 2026-07-28 over HTTP; maint: only verify, compact and gc; agent: only the coding agent's rows; files: only a shell command's file snapshot; fleet: only exec -- true as its own process on PostgreSQL, against its floor program; push: only the approval push")
	pgURL   = flag.String("postgres", "", "a superuser's postgres:// URL of a server to measure on (default: start a PostgreSQL 15 of its own from "+pgtest.BinDir+", or skip the PostgreSQL rows)")
	pgTotal = flag.Int("pg-n", 1000, "lifecycles per concurrent PostgreSQL run")
)

func main() {
	// The agent's rows run it in a sandbox that is this program started again.
	agenttest.ServeRole()
	if upstream := os.Getenv(reverseProxyEnv); upstream != "" {
		if err := serveReverseProxy(upstream); err != nil {
			fmt.Fprintln(os.Stderr, "bench: reverse proxy:", err)
			os.Exit(1)
		}
		return
	}
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type row struct {
	what, value, ratio string
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// measure runs fn *runs times and returns the median.
func measure(fn func() (float64, error)) (float64, error) {
	r, err := sideBySide(fn)
	if err != nil {
		return 0, err
	}
	return r.median(0), nil
}

// rounds holds figures taken side by side: each round runs every measure
// once, so the figures of a round, and their ratios, share the state of a
// noisy machine.
type rounds [][]float64

// sideBySide runs *runs rounds of fns.
func sideBySide(fns ...func() (float64, error)) (rounds, error) {
	var r rounds
	for i := 0; i < *runs; i++ {
		row := make([]float64, len(fns))
		for j, fn := range fns {
			x, err := fn()
			if err != nil {
				return nil, err
			}
			row[j] = x
		}
		r = append(r, row)
	}
	return r, nil
}

// median is the median of measure j.
func (r rounds) median(j int) float64 {
	var xs []float64
	for _, row := range r {
		xs = append(xs, row[j])
	}
	return median(xs)
}

// ratio is the median over the rounds of measure i divided by measure j.
func (r rounds) ratio(i, j int) float64 {
	var xs []float64
	for _, row := range r {
		xs = append(xs, row[i]/row[j])
	}
	return median(xs)
}

func run() error {
	work := *dir
	if work == "" {
		d, err := os.MkdirTemp("", "undolog-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		work = d
	}
	var rows []row
	add := func(what, value, ratio string) {
		rows = append(rows, row{what, value, ratio})
		fmt.Fprintf(os.Stderr, "  %s: %s %s\n", what, value, ratio)
	}
	seq := 0
	fresh := func(name string) string {
		seq++
		return filepath.Join(work, fmt.Sprintf("%s-%d.db", name, seq))
	}

	switch *only {
	case "", "postgres":
	case "cli":
		if err := cliRows(add, work); err != nil {
			return err
		}
		return printTable(rows)
	case "startup":
		bin, linked, hello, err := processBinaries(work)
		if err != nil {
			return err
		}
		if err := startupRows(add, bin, linked, hello, work); err != nil {
			return err
		}
		return printTable(rows)
	case "large":
		if err := largeRows(add); err != nil {
			return err
		}
		return printTable(rows)
	case "proxy":
		if err := proxyRows(add, work); err != nil {
			return err
		}
		if err := proxyHTTPRows(add, work); err != nil {
			return err
		}
		return printTable(rows)
	case "proxy-http":
		if err := proxyHTTPRows(add, work); err != nil {
			return err
		}
		return printTable(rows)
	case "maint":
		if err := maintRows(add, work); err != nil {
			return err
		}
		return printTable(rows)
	case "agent":
		if err := agentRows(add, work); err != nil {
			return err
		}
		return printTable(rows)
	case "files":
		if err := filesRows(add, work); err != nil {
			return err
		}
		return printTable(rows)
	case "fleet":
		if err := fleetRows(add, work); err != nil {
			return err
		}
		return printTable(rows)
	case "push":
		if err := pushRows(add, work); err != nil {
			return err
		}
		return printTable(rows)
	default:
		return fmt.Errorf("-only %q: the choices are postgres, cli, startup, large, proxy, proxy-http, maint, agent, files, fleet and push", *only)
	}
	if *only == "postgres" {
		if err := pgRows(add, work); err != nil {
			return err
		}
		return printTable(rows)
	}
	// The physical limit is what the journal does: overwrite blocks the
	// file has and flush their data (fdatasync). An append with fsync also
	// commits the file's new size: its row is kept, named as what it is.
	raw := func() (float64, error) { return overwriteRate(fresh("raw"), 300) }
	r, err := sideBySide(raw,
		func() (float64, error) { return undologSerial(fresh("undolog"), *serial) },
		func() (float64, error) { return sqliteSerial(fresh("sqlite"), *serial) },
		func() (float64, error) { return fsyncRate(fresh("append"), 300) })
	if err != nil {
		return err
	}
	add("raw 4 KiB overwrite+fdatasync", fmt.Sprintf("%.0f /s", r.median(0)), "1.00 (the physical limit)")
	add("raw 4 KiB append+fsync", fmt.Sprintf("%.0f /s", r.median(3)), fmt.Sprintf("%.2f of the limit", r.ratio(3, 0)))
	add("undolog serial lifecycles (durable)", fmt.Sprintf("%.0f /s", r.median(1)), fmt.Sprintf("%.2f of the limit", r.ratio(1, 0)))
	add("SQLite WAL serial lifecycles (synchronous=FULL)", fmt.Sprintf("%.0f /s", r.median(2)), fmt.Sprintf("undolog %.2fx", r.ratio(1, 2)))

	for _, n := range []int{1, 8, 64} {
		each := 2000 / max(n, 8) * max(n, 8) / n
		r, err := sideBySide(raw,
			func() (float64, error) { return undologConcurrent(fresh("undolog-c"), n, each) },
			func() (float64, error) { return sqliteConcurrent(fresh("sqlite-c"), n, each) })
		if err != nil {
			return err
		}
		add(fmt.Sprintf("%d concurrent sessions: undolog", n), fmt.Sprintf("%.0f /s", r.median(1)), fmt.Sprintf("%.2f of the limit", r.ratio(1, 0)))
		add(fmt.Sprintf("%d concurrent sessions: SQLite", n), fmt.Sprintf("%.0f /s", r.median(2)), fmt.Sprintf("undolog %.2fx", r.ratio(1, 2)))
	}

	perEffect, err := bytesPerEffect(fresh("size"), 20000)
	if err != nil {
		return err
	}
	add("log bytes per committed effect (200-byte args, compacted)", fmt.Sprintf("%.0f B", perEffect), fmt.Sprintf("%.2f of 1 KiB", perEffect/1024))

	if err := cliRows(add, work); err != nil {
		return err
	}
	if err := readRows(add, work); err != nil {
		return err
	}
	if err := proxyRows(add, work); err != nil {
		return err
	}
	if err := proxyHTTPRows(add, work); err != nil {
		return err
	}
	if err := filesRows(add, work); err != nil {
		return err
	}
	if err := pgRows(add, work); err != nil {
		return err
	}
	if err := agentRows(add, work); err != nil {
		return err
	}
	if *large {
		if err := largeRows(add); err != nil {
			return err
		}
		if err := maintRows(add, work); err != nil {
			return err
		}
	}
	return printTable(rows)
}

func printTable(rows []row) error {
	fmt.Printf("\nundolog benchmark: medians of %d rounds, each measuring side by side what its ratios compare; %s\n\n", *runs, time.Now().Format("2006-01-02"))
	tw := tabwriter.NewWriter(os.Stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tvalue\tratio")
	fmt.Fprintln(tw, "-------\t-----\t-----")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.what, r.value, r.ratio)
	}
	return tw.Flush()
}

// overwriteRate is how many 4 KiB overwrites of a block the file has, each
// flushed with fdatasync, the disk takes per second.
func overwriteRate(path string, n int) (float64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, 4096)
	if _, err := f.Write(buf); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		buf[0] = byte(i)
		if _, err := f.WriteAt(buf, 0); err != nil {
			return 0, err
		}
		if err := fdatasync(f); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// fsyncRate is how many 4 KiB appends with fsync the disk takes per second.
func fsyncRate(path string, n int) (float64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, 4096)
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

var pad = strings.Repeat("x", 150)

func args(session string, i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"path":"/srv/%s/%d.json","pad":"%s"}`, session, i, pad))
}

// lifecycle is what exec and the proxy do: intercept-and-start, then commit.
func lifecycle(s effectlog.Log, session string, i int) error {
	res, err := s.Intercept(context.Background(), effectlog.InterceptRequest{Session: session, Tool: "write_file", Tier: sm.Compensable,
		Args: args(session, i), CreateSession: true, Start: true})
	if err != nil {
		return err
	}
	_, err = s.Commit(context.Background(), res.Effect.ID, model.Change{Result: json.RawMessage(`{"ok":true}`)})
	return err
}

func undologSerial(path string, n int) (float64, error) {
	defer os.Remove(path)
	s := logaddr.File(path, logaddr.Options{})
	if err := lifecycle(s, "warm", 0); err != nil {
		return 0, err
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := lifecycle(s, "serial", i); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func undologConcurrent(path string, sessions, each int) (float64, error) {
	defer os.Remove(path)
	s := logaddr.File(path, logaddr.Options{LockTimeout: time.Minute})
	if err := lifecycle(s, "warm", 0); err != nil {
		return 0, err
	}
	return concurrently(sessions, each, func(g, i int) error { return lifecycle(s, fmt.Sprintf("s%d", g), i) })
}

func concurrently(sessions, each int, fn func(g, i int) error) (float64, error) {
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	start := time.Now()
	for g := 0; g < sessions; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := fn(g, i); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(sessions*each) / time.Since(start).Seconds(), nil
}

// The SQLite baseline keeps the same records: effects with a unique
// signature, their history, in the same two transactions.
const sqliteSchema = `
CREATE TABLE effects (id INTEGER PRIMARY KEY, session TEXT NOT NULL, tool TEXT NOT NULL, tier TEXT NOT NULL,
  state TEXT NOT NULL, call_signature TEXT NOT NULL UNIQUE, args TEXT NOT NULL, result TEXT,
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE INDEX effects_session ON effects(session, id);
CREATE INDEX effects_state ON effects(state, id);
CREATE TABLE history (effect_id INTEGER NOT NULL, seq INTEGER NOT NULL, from_state TEXT, to_state TEXT NOT NULL,
  trigger TEXT NOT NULL, actor TEXT NOT NULL, at TEXT NOT NULL, prev_hash TEXT, hash TEXT, PRIMARY KEY (effect_id, seq));`

func openSQLite(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(60000)")
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(sqliteSchema); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func sqliteLifecycle(db *sql.DB, session string, i int) error {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	sig := model.Signature(session, "write_file", args(session, i), "")
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	res, err := tx.Exec(`INSERT INTO effects(session, tool, tier, state, call_signature, args, created_at, updated_at)
		VALUES (?, 'write_file', 'compensable', 'executing', ?, ?, ?, ?)`, session, sig, string(args(session, i)), now, now)
	if err != nil {
		tx.Rollback()
		return err
	}
	id, _ := res.LastInsertId()
	for seq, st := range []string{"pending", "executing"} {
		if _, err := tx.Exec(`INSERT INTO history VALUES (?, ?, ?, ?, 'intercept', 'bench', ?, '', '')`, id, seq+1, "", st, now); err != nil {
			tx.Rollback()
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	tx, err = db.Begin()
	if err != nil {
		return err
	}
	if _, err := tx.Exec(`UPDATE effects SET state = 'committed', result = '{"ok":true}', updated_at = ? WHERE id = ?`, now, id); err != nil {
		tx.Rollback()
		return err
	}
	if _, err := tx.Exec(`INSERT INTO history VALUES (?, 3, 'executing', 'committed', 'commit', 'bench', ?, '', '')`, id, now); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func sqliteSerial(path string, n int) (float64, error) {
	defer removeSQLite(path)
	db, err := openSQLite(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := sqliteLifecycle(db, "serial", i); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func sqliteConcurrent(path string, sessions, each int) (float64, error) {
	defer removeSQLite(path)
	db, err := openSQLite(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(sessions)
	return concurrently(sessions, each, func(g, i int) error { return sqliteLifecycle(db, fmt.Sprintf("s%d", g), i) })
}

func removeSQLite(path string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
}

// bytesPerEffect runs n whole lifecycles (intercept-and-start with a command
// compensation, then commit with a small result) with 200-byte args, compacts
// the log and divides its size by n. The commits run from 16 goroutines so
// that group commit keeps the build short; the records are the same.
func bytesPerEffect(path string, n int) (float64, error) {
	defer os.Remove(path)
	s := logaddr.File(path, logaddr.Options{})
	var batch []effectlog.InterceptRequest
	for i := 0; i < n; i++ {
		batch = append(batch, effectlog.InterceptRequest{Session: fmt.Sprintf("s%03d", i/1000), Tool: "write_file", Tier: sm.Compensable,
			Args: args("size", i), CreateSession: true, Start: true,
			Compensation: &model.Compensation{Kind: model.CompensationCommand, Argv: []string{"rm", "-f", fmt.Sprintf("/srv/size/%d.json", i)}}})
		if len(batch) < 1000 && i < n-1 {
			continue
		}
		res, err := s.InterceptMany(context.Background(), batch)
		if err != nil {
			return 0, err
		}
		batch = batch[:0]
		ids := make(chan uint64, len(res))
		for _, r := range res {
			ids <- r.Effect.ID
		}
		close(ids)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range ids {
					if _, err := s.Commit(context.Background(), id, model.Change{Result: json.RawMessage(`{"ok":true}`)}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return 0, err
		}
	}
	_, after, err := s.Compact()
	if err != nil {
		return 0, err
	}
	return float64(after) / float64(n), nil
}

// largeRows times whole undolog processes on a log of 1,000,000 effects.
func largeRows(add func(what, value, ratio string)) error {
	// v6: the file engine's schema 6 (its indexes of undo entries by state
	// and of open requests by session); a log of an earlier schema gets
	// them on its first write, which no row here makes.
	path := filepath.Join(os.TempDir(), "undolog-bench-1m-v6.db")
	if err := demo.WriteLarge(context.Background(), path); err != nil {
		return err
	}
	bin, err := buildUndolog()
	if err != nil {
		return err
	}
	timeProcess := func(args ...string) (float64, error) {
		return measure(func() (float64, error) {
			cmd := exec.Command(bin, append([]string{"--log", path}, args...)...)
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				return 0, fmt.Errorf("undolog %v: %v\n%.300s", args, err, out)
			}
			return float64(time.Since(start).Microseconds()) / 1000, nil
		})
	}
	for _, c := range []struct {
		args   []string
		target float64
	}{
		{[]string{"list", "--limit", "50"}, 20}, {[]string{"show", "500000"}, 20},
		{[]string{"session", "show", "load-0500"}, 20}, {[]string{"approvals"}, 20}, {[]string{"version"}, 10},
		// Without the default limit of 50: all 1,000 effects, undo entries and waiting requests.
		{[]string{"session", "show", "load-0500", "--limit", "0"}, 20}, {[]string{"approvals", "--limit", "0"}, 20},
	} {
		ms, err := timeProcess(c.args...)
		if err != nil {
			return err
		}
		add("1M effects, whole process: undolog "+strings.Join(c.args, " "), fmt.Sprintf("%.1f ms", ms), fmt.Sprintf("%.2f of %.0f ms", ms/c.target, c.target))
	}
	if err := filterRows(add, bin, path); err != nil {
		return err
	}
	store := logaddr.File(path, logaddr.Options{})
	paint, err := measure(func() (float64, error) {
		start := time.Now()
		if _, err := tui.FirstFrame(context.Background(), tui.Options{Log: store}); err != nil {
			return 0, err
		}
		return float64(time.Since(start).Microseconds()) / 1000, nil
	})
	if err != nil {
		return err
	}
	add("1M effects: TUI first paint (in process)", fmt.Sprintf("%.1f ms", paint), fmt.Sprintf("%.2f of 200 ms", paint/200))
	return paintRows(add, bin, path)
}

// filterRows times list with combinations of filters on the 1M log (every
// effect is write_file and pending; one in 1,000 irreversible; the
// compensable ones have a pending undo entry), a session's approvals, and
// the listings that read the whole log (list --limit 0, export) with their
// peak RSS. Output goes to /dev/null, as to a pipe: the tab-separated
// layout, written as it is read.
func filterRows(add func(what, value, ratio string), bin, path string) error {
	// run runs undolog once; with rss, under /usr/bin/time, whose report of
	// the child's peak RSS is the child's alone (the rusage Go's Wait gives
	// here was found to say hundreds of MiB for a child that peaked at 45).
	run := func(rss bool, args ...string) (ms, rssMiB float64, err error) {
		argv := append([]string{"--log", path}, args...)
		cmd := exec.Command(bin, argv...)
		if rss {
			cmd = exec.Command("/usr/bin/time", append([]string{"-f", "maxrss=%M", bin}, argv...)...)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, 0, fmt.Errorf("undolog %v: %v\n%.300s", args, err, stderr.String())
		}
		ms = float64(time.Since(start).Microseconds()) / 1000
		if rss {
			i := strings.LastIndex(stderr.String(), "maxrss=")
			kib, err := strconv.ParseFloat(strings.TrimSpace(stderr.String()[i+len("maxrss="):]), 64)
			if i < 0 || err != nil {
				return 0, 0, fmt.Errorf("undolog %v: no peak RSS from /usr/bin/time: %q", args, stderr.String())
			}
			rssMiB = kib / 1024
		}
		return ms, rssMiB, nil
	}
	for _, args := range [][]string{
		{"--tool", "write_file", "--state", "committed"},
		{"--tool", "write_file", "--tier", "irreversible"},
		{"--tool", "write_file", "--state", "pending", "--tier", "compensable"},
		{"--session", "load-0500", "--tier", "irreversible", "--state", "pending"},
		{"--session", "load-0500", "--tool", "write_file", "--undo", "pending"},
		{"--undo", "compensated"},
		{"--undo", "pending", "--tier", "compensable", "--since", "3650d"},
		{"--state", "pending", "--since", "1h"},
	} {
		args = append(append([]string{"list"}, args...), "--limit", "50")
		ms, err := measure(func() (float64, error) { ms, _, err := run(false, args...); return ms, err })
		if err != nil {
			return err
		}
		add("1M effects, whole process: undolog "+strings.Join(args, " "), fmt.Sprintf("%.1f ms", ms), fmt.Sprintf("%.2f of 20 ms", ms/20))
	}
	ms, err := measure(func() (float64, error) {
		ms, _, err := run(false, "approvals", "--session", "load-0500")
		return ms, err
	})
	if err != nil {
		return err
	}
	add("1M effects, whole process: undolog approvals --session load-0500", fmt.Sprintf("%.1f ms", ms), fmt.Sprintf("%.2f of 20 ms", ms/20))
	// Whole-log reads take seconds: three rounds at most.
	for _, args := range [][]string{{"list", "--limit", "0"}, {"list", "--limit", "0", "-o", "json"}, {"export"}} {
		var times, rss []float64
		for i := 0; i < min(*runs, 3); i++ {
			ms, mib, err := run(true, args...)
			if err != nil {
				return err
			}
			times, rss = append(times, ms), append(rss, mib)
		}
		what := "1M effects, whole process: undolog " + strings.Join(args, " ")
		add(what+" (time)", fmt.Sprintf("%.1f s", median(times)/1000), "")
		add(what+" (peak RSS)", fmt.Sprintf("%.1f MiB", median(rss)), fmt.Sprintf("%.2f of 64 MiB", median(rss)/64))
	}
	return nil
}
