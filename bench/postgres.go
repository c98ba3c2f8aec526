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

	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage/pgstore"
)

// pgRows measures undolog on PostgreSQL (synchronous_commit=on, a local
// server) beside the floor: the same lifecycles written as plain SQL with
// pgx, on the same server, with the same pool size.
func pgRows(add func(what, value, ratio string), work string) error {
	c, err := cluster()
	if err != nil {
		if *pgURL != "" || *only == "postgres" {
			return err
		}
		add("PostgreSQL rows", "skipped", oneLine(err))
		return nil
	}
	defer c.Remove()
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
	pipeURL, err := newDB()
	if err != nil {
		return err
	}
	s := logaddr.Open(url, logaddr.Options{})
	defer s.Close()
	f, err := openFloor(ctx, floorURL, false)
	if err != nil {
		return err
	}
	defer f.pool.Close()
	fp, err := openFloor(ctx, pipeURL, true)
	if err != nil {
		return err
	}
	defer fp.pool.Close()
	measures := 0
	prefix := func() string { measures++; return fmt.Sprintf("m%d-", measures) }

	// A run is one chunk of a round: sessions callers, each doing each
	// lifecycles, numbered from first so that the chunks of a round call
	// with new args in the same sessions.
	type run func(round string, first int) (float64, error)
	undologRun := func(sessions, each int) run {
		return func(round string, first int) (float64, error) {
			return concurrently(sessions, each, func(g, i int) error { return lifecycle(s, fmt.Sprintf("%s%d", round, g), first+i) })
		}
	}
	floorRun := func(f *floor, sessions, each int) run {
		return func(round string, first int) (float64, error) {
			return concurrently(sessions, each, func(g, i int) error {
				return f.lifecycle(ctx, fmt.Sprintf("%s%d", round, g), first+i)
			})
		}
	}
	// Warm both: tables, prepared statements, the pools' connections, the
	// server's WAL segments.
	for _, fn := range []run{undologRun(64, 10), floorRun(f, 64, 10), floorRun(fp, 64, 10),
		undologRun(1, 200), floorRun(f, 1, 200), floorRun(fp, 1, 200)} {
		if _, err := fn(prefix(), 0); err != nil {
			return err
		}
	}
	// A ratio is undolog's time per lifecycle over a floor's, the median of
	// the rounds'. Within a round the three take turns in chunks of a
	// tenth, so that a disk whose flushes slow down for a second slows all
	// three alike.
	const chunks = 10
	rows := func(what string, sessions, each int) error {
		part := max(each/chunks, 1)
		sides := []run{undologRun(sessions, part), floorRun(f, sessions, part), floorRun(fp, sessions, part)}
		var r rounds
		for round := 0; round < *runs; round++ {
			secs := make([]float64, len(sides))
			name := prefix()
			for c := 0; c < chunks; c++ {
				for j, side := range sides {
					rate, err := side(name, c*part)
					if err != nil {
						return err
					}
					secs[j] += float64(sessions*part) / rate
				}
			}
			rates := make([]float64, len(sides))
			for j := range secs {
				rates[j] = float64(sessions*part*chunks) / secs[j]
			}
			r = append(r, rates)
		}
		add("PostgreSQL "+what+": undolog", fmt.Sprintf("%.0f /s", r.median(0)),
			fmt.Sprintf("%.2fx plain SQL's time, %.2fx pipelined's", r.ratio(1, 0), r.ratio(2, 0)))
		add("PostgreSQL "+what+": plain SQL floor", fmt.Sprintf("%.0f /s", r.median(1)), "")
		add("PostgreSQL "+what+": pipelined SQL floor", fmt.Sprintf("%.0f /s", r.median(2)), "")
		return nil
	}
	// Serial: one caller, as the file rows; the same as 1 session.
	if err := rows("serial lifecycles", 1, *serial); err != nil {
		return err
	}
	for _, n := range []int{1, 8, 64} {
		if err := rows(fmt.Sprintf("%d concurrent sessions", n), n, max(*pgTotal/n, 1)); err != nil {
			return err
		}
	}
	cliURL, err := newDB()
	if err != nil {
		return err
	}
	return cliSteps(add, work, cliURL, "PostgreSQL", "")
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

// floor is what a store written by hand on PostgreSQL does for a durable
// lifecycle, at least: an effect row (its unique signature column makes a
// repeat fail), its two history rows and their change-feed rows (a
// bigserial: positions in allocation order, not commit order), then the
// update to committed with its history and change rows. No session row,
// undo entry, hash chain, row locks or reads before writing, retries. Plain,
// each statement is sent when the one before has answered (BEGIN, three
// statements, COMMIT: five round trips a transaction); pipelined, each
// transaction is sent as one batch (one round trip), which a store that
// reads before it writes cannot do.
type floor struct {
	pool      *pgxpool.Pool
	pipelined bool
}

const floorSchema = `
CREATE TABLE effects (id bigserial PRIMARY KEY, session text NOT NULL, tool text NOT NULL, tier text NOT NULL,
  state text NOT NULL, call_signature text NOT NULL UNIQUE, args bytea NOT NULL, result bytea,
  created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL);
CREATE INDEX effects_session ON effects (session, id);
CREATE INDEX effects_state ON effects (state, id);
CREATE TABLE history (effect_id bigint NOT NULL, seq integer NOT NULL, from_state text, to_state text NOT NULL,
  trigger text NOT NULL, actor text NOT NULL, at timestamptz NOT NULL, PRIMARY KEY (effect_id, seq));
CREATE TABLE changes (pos bigserial PRIMARY KEY, effect_id bigint NOT NULL, seq integer NOT NULL);`

func openFloor(ctx context.Context, url string, pipelined bool) (*floor, error) {
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
	return &floor{pool, pipelined}, nil
}

func (f *floor) lifecycle(ctx context.Context, session string, i int) error {
	a := args(session, i)
	sig := model.Signature(session, "write_file", a, "")
	now := time.Now()
	var id int64
	err := f.tx(ctx, func(q func(sql string, args ...any) *pgx.QueuedQuery) {
		q(`INSERT INTO effects (session, tool, tier, state, call_signature, args, created_at, updated_at)
		VALUES ($1, 'write_file', 'compensable', 'executing', $2, $3, $4, $4) RETURNING id`, session, sig, []byte(a), now).
			QueryRow(func(row pgx.Row) error { return row.Scan(&id) })
		q(`INSERT INTO history VALUES (currval('effects_id_seq'), 1, NULL, 'pending', 'Intercept', 'bench', $1),
		(currval('effects_id_seq'), 2, 'pending', 'executing', 'Start', 'bench', $1)`, now)
		q(`INSERT INTO changes (effect_id, seq) VALUES (currval('effects_id_seq'), 1), (currval('effects_id_seq'), 2)`)
	})
	if err != nil {
		return err
	}
	return f.tx(ctx, func(q func(sql string, args ...any) *pgx.QueuedQuery) {
		q(`UPDATE effects SET state = 'committed', result = $2, updated_at = $3 WHERE id = $1`, id, []byte(`{"ok":true}`), now)
		q(`INSERT INTO history VALUES ($1, 3, 'executing', 'committed', 'Commit', 'bench', $2)`, id, now)
		q(`INSERT INTO changes (effect_id, seq) VALUES ($1, 3)`, id)
	})
}

// tx runs the statements fill queues in a transaction, pipelined or one at
// a time.
func (f *floor) tx(ctx context.Context, fill func(q func(sql string, args ...any) *pgx.QueuedQuery)) error {
	b := &pgx.Batch{}
	fill(b.Queue)
	if f.pipelined {
		all := &pgx.Batch{}
		all.Queue(`BEGIN`)
		all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
		all.Queue(`COMMIT`)
		return f.pool.SendBatch(ctx, all).Close()
	}
	return pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		for _, qq := range b.QueuedQueries {
			one := &pgx.Batch{QueuedQueries: []*pgx.QueuedQuery{qq}}
			if err := tx.SendBatch(ctx, one).Close(); err != nil {
				return err
			}
		}
		return nil
	})
}

// cluster is the server -postgres names, or one started for this run.
func cluster() (*pgtest.Cluster, error) {
	if *pgURL != "" {
		c, err := pgtest.Attach(*pgURL)
		if err != nil {
			return nil, fmt.Errorf("-postgres: %s", oneLine(err))
		}
		return c, nil
	}
	c, err := pgtest.Start()
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL: %s", oneLine(err))
	}
	return c, nil
}

// cliSteps times one undolog process per step (intercept, start, commit),
// on a log file and on PostgreSQL at url (named what), side by side; target
// follows the ratio.
func cliSteps(add func(what, value, ratio string), work, url, what, target string) error {
	bin, err := buildUndolog()
	if err != nil {
		return err
	}
	step := func(log string, argv ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--log", log}, argv...)...)
		cmd.Env = append(os.Environ(), "UNDOLOG_ACTOR=bench")
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("undolog %v: %v\n%.300s", argv, err, ee.Stderr)
		} else if err != nil {
			return "", fmt.Errorf("undolog %v: %v", argv, err)
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
	ratio := fmt.Sprintf("%.2fx the log file's", r.ratio(1, 0))
	if target != "" {
		ratio += " (" + target + ")"
	}
	add("CLI per step (one process: intercept, start or commit): "+what, fmt.Sprintf("%.1f ms", r.median(1)), ratio)
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

// oneLine is err on one line (pgx puts each address it tried on its own).
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
