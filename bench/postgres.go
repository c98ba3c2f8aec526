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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/undolog/undolog/engines"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage/pgstore"
)

// pgRows measures undolog on PostgreSQL (synchronous_commit=on, a local
// server) beside the floor: the same lifecycles written as plain SQL with
// pgx, on the same server, with the same pool size.
func pgRows(add func(what, value, ratio string), work string) error {
	var c *pgtest.Cluster
	var err error
	if *pgURL != "" {
		c, err = pgtest.Attach(*pgURL)
	} else {
		c, err = pgtest.Start()
	}
	if err != nil {
		if *only == "postgres" {
			return err
		}
		add("PostgreSQL rows", "skipped", "no server: "+err.Error())
		return nil
	}
	defer c.Stop()
	ctx := context.Background()
	if err := checkSynchronousCommit(ctx, c.AdminURL()); err != nil {
		return err
	}
	// One database per side for all rounds, and sessions of new names in
	// each measure: a database made per measure would put its copy of the
	// template in the WAL between the measures.
	dbs := 0
	newDB := func() (string, error) {
		dbs++
		name := fmt.Sprintf("bench_%d_%d", os.Getpid(), dbs)
		url, err := c.CreateDatabase(ctx, name)
		if err == nil {
			dropLater = append(dropLater, func() { c.DropDatabase(ctx, name) })
		}
		return url, err
	}
	defer func() {
		for _, drop := range dropLater {
			drop()
		}
	}()
	url, err := newDB()
	if err != nil {
		return err
	}
	floorURL, err := newDB()
	if err != nil {
		return err
	}
	s := engines.Open(url, engines.Options{})
	defer s.Close()
	f, err := openFloor(ctx, floorURL)
	if err != nil {
		return err
	}
	defer f.pool.Close()
	measures := 0
	prefix := func() string { measures++; return fmt.Sprintf("m%d-", measures) }

	undologRun := func(sessions, each int) func() (float64, error) {
		return func() (float64, error) {
			p := prefix()
			return concurrently(sessions, each, func(g, i int) error { return lifecycle(s, fmt.Sprintf("%s%d", p, g), i) })
		}
	}
	floorRun := func(sessions, each int) func() (float64, error) {
		return func() (float64, error) {
			p := prefix()
			return concurrently(sessions, each, func(g, i int) error { return f.lifecycle(ctx, fmt.Sprintf("%s%d", p, g), i) })
		}
	}
	// Warm both: tables, prepared statements, the pools' connections, the
	// server's WAL segments.
	for _, fn := range []func() (float64, error){undologRun(64, 10), floorRun(64, 10), undologRun(1, 200), floorRun(1, 200)} {
		if _, err := fn(); err != nil {
			return err
		}
	}
	ratio := func(r rounds) string { return fmt.Sprintf("%.2fx the floor's time", r.ratio(1, 0)) }
	// Serial: one caller, as the file rows; the same as 1 session.
	r, err := sideBySide(undologRun(1, *serial), floorRun(1, *serial))
	if err != nil {
		return err
	}
	add("PostgreSQL serial lifecycles: undolog", fmt.Sprintf("%.0f /s", r.median(0)), ratio(r))
	add("PostgreSQL serial lifecycles: plain SQL floor", fmt.Sprintf("%.0f /s", r.median(1)), "1.00")
	for _, n := range []int{1, 8, 64} {
		each := max(*pgTotal/n, 1)
		r, err := sideBySide(undologRun(n, each), floorRun(n, each))
		if err != nil {
			return err
		}
		add(fmt.Sprintf("PostgreSQL %d concurrent sessions: undolog", n), fmt.Sprintf("%.0f /s", r.median(0)), ratio(r))
		add(fmt.Sprintf("PostgreSQL %d concurrent sessions: plain SQL floor", n), fmt.Sprintf("%.0f /s", r.median(1)), "1.00")
	}
	cliURL, err := newDB()
	if err != nil {
		return err
	}
	return cliSteps(add, work, cliURL)
}

var dropLater []func()

// checkSynchronousCommit refuses a server that does not wait for the disk at
// commit: its figures would not be those of a durable log.
func checkSynchronousCommit(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var sc, fsync string
	if err := conn.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&sc); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, `SHOW fsync`).Scan(&fsync); err != nil {
		return err
	}
	if sc != "on" || fsync != "on" {
		return fmt.Errorf("the PostgreSQL server has synchronous_commit=%s, fsync=%s: the rows need both on", sc, fsync)
	}
	return nil
}

// floor is the least a store on PostgreSQL does for a durable lifecycle: an
// effect row (its unique signature column makes a repeat fail), its history
// rows and change-feed rows (a bigserial: positions in allocation order, not
// commit order), then the update to committed with its history and change
// rows; each of the two transactions sent as one pipelined batch (BEGIN ...
// COMMIT: one round trip and the commit's WAL flush). No session row, undo
// entry, hash chain or retry.
type floor struct{ pool *pgxpool.Pool }

const floorSchema = `
CREATE TABLE effects (id bigserial PRIMARY KEY, session text NOT NULL, tool text NOT NULL, tier text NOT NULL,
  state text NOT NULL, call_signature text NOT NULL UNIQUE, args bytea NOT NULL, result bytea,
  created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL);
CREATE INDEX effects_session ON effects (session, id);
CREATE INDEX effects_state ON effects (state, id);
CREATE TABLE history (effect_id bigint NOT NULL, seq integer NOT NULL, from_state text, to_state text NOT NULL,
  trigger text NOT NULL, actor text NOT NULL, at timestamptz NOT NULL, PRIMARY KEY (effect_id, seq));
CREATE TABLE changes (pos bigserial PRIMARY KEY, effect_id bigint NOT NULL, seq integer NOT NULL);`

func openFloor(ctx context.Context, url string) (*floor, error) {
	// The engine's own pool settings, so that both sides have as many
	// connections.
	cfg, err := pgstore.PoolConfig(url)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, floorSchema); err != nil {
		pool.Close()
		return nil, err
	}
	return &floor{pool}, nil
}

func (f *floor) lifecycle(ctx context.Context, session string, i int) error {
	a := args(session, i)
	sig := model.Signature(session, "write_file", a, "")
	now := time.Now()
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	var id int64
	b.Queue(`INSERT INTO effects (session, tool, tier, state, call_signature, args, created_at, updated_at)
		VALUES ($1, 'write_file', 'compensable', 'executing', $2, $3, $4, $4) RETURNING id`, session, sig, []byte(a), now).
		QueryRow(func(row pgx.Row) error { return row.Scan(&id) })
	b.Queue(`INSERT INTO history VALUES (currval('effects_id_seq'), 1, NULL, 'pending', 'Intercept', 'bench', $1),
		(currval('effects_id_seq'), 2, 'pending', 'executing', 'Start', 'bench', $1)`, now)
	b.Queue(`INSERT INTO changes (effect_id, seq) VALUES (currval('effects_id_seq'), 1), (currval('effects_id_seq'), 2)`)
	b.Queue(`COMMIT`)
	if err := f.pool.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	b = &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`UPDATE effects SET state = 'committed', result = $2, updated_at = $3 WHERE id = $1`, id, []byte(`{"ok":true}`), now)
	b.Queue(`INSERT INTO history VALUES ($1, 3, 'executing', 'committed', 'Commit', 'bench', $2)`, id, now)
	b.Queue(`INSERT INTO changes (effect_id, seq) VALUES ($1, 3)`, id)
	b.Queue(`COMMIT`)
	return f.pool.SendBatch(ctx, b).Close()
}

// cliSteps times one undolog process per step (intercept, start, commit),
// on a log file and on PostgreSQL, side by side.
func cliSteps(add func(what, value, ratio string), work, url string) error {
	bin, err := buildUndolog()
	if err != nil {
		return err
	}
	step := func(log string, argv ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--log", log}, argv...)...)
		cmd.Env = append(os.Environ(), "UNDOLOG_ACTOR=bench")
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("undolog %v: %v\n%.300s", argv, err, out)
		}
		return string(out), nil
	}
	const steps = 20 // lifecycles per measure
	n := 0
	perStep := func(log string) (float64, error) {
		n++
		session := fmt.Sprintf("cli-%d", n)
		start := time.Now()
		for i := 0; i < steps; i++ {
			out, err := step(log, "intercept", "--session", session, "--tool", "write_file", "--tier", "compensable",
				"--args", string(args("cli", i)), "-o", "json")
			if err != nil {
				return 0, err
			}
			var res struct{ Effect struct{ ID uint64 } }
			if err := json.Unmarshal([]byte(out), &res); err != nil || res.Effect.ID == 0 {
				return 0, fmt.Errorf("undolog intercept: no effect id in %.200q", out)
			}
			id := strconv.FormatUint(res.Effect.ID, 10)
			if _, err := step(log, "start", id); err != nil {
				return 0, err
			}
			if _, err := step(log, "commit", id, "--result", `{"ok":true}`); err != nil {
				return 0, err
			}
		}
		return float64(time.Since(start).Microseconds()) / 1000 / (3 * steps), nil
	}
	path := filepath.Join(work, "cli.db")
	defer os.Remove(path)
	// The first process creates the log: not a step's cost.
	for _, log := range []string{path, url} {
		if _, err := step(log, "session", "start", "warm"); err != nil {
			return err
		}
	}
	r, err := sideBySide(func() (float64, error) { return perStep(path) }, func() (float64, error) { return perStep(url) })
	if err != nil {
		return err
	}
	add("CLI per step (one process: intercept, start or commit): log file", fmt.Sprintf("%.1f ms", r.median(0)), "")
	add("CLI per step (one process: intercept, start or commit): PostgreSQL", fmt.Sprintf("%.1f ms", r.median(1)),
		fmt.Sprintf("%.2fx the log file's", r.ratio(1, 0)))
	return nil
}

// buildUndolog builds the command once per run.
func buildUndolog() (string, error) {
	bin := filepath.Join(os.TempDir(), "undolog-bench-bin")
	if builtBin {
		return bin, nil
	}
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build undolog: %v\n%s", err, strings.TrimSpace(string(out)))
	}
	builtBin = true
	return bin, nil
}

var builtBin bool
