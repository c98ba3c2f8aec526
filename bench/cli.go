package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// cliRows times undolog's commands as the processes a CI step runs, beside
// what a user would script instead: the sqlite3 command-line shell writing
// the same records durably (WAL, synchronous=FULL) in one transaction, and
// for `undolog version` a static Go program that prints a line (the
// start-up budget, startupRows); beside both, undolog's binary doing
// nothing (./linked), the floor of any command of undolog's as a process. Each round runs the sides in turns of a few
// processes, so that a slow second of the machine slows them alike; a ratio
// is the median of the rounds'.
func cliRows(add func(what, value, ratio string), work string) error {
	bin, linked, hello, err := processBinaries(work)
	if err != nil {
		return err
	}
	sqlite, err := exec.LookPath("sqlite3")
	if err != nil {
		add("CLI steps against the sqlite3 shell", "skipped", "no sqlite3 on PATH")
		sqlite = ""
	}
	timeOne := func(argv ...string) (float64, error) {
		start := time.Now()
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%v: %v\n%.300s", argv, err, out)
		}
		return float64(time.Since(start).Microseconds()) / 1000, nil
	}
	const turn = 5 // processes a side runs before the next side's turn
	// inTurns times n processes of each side, the sides taking turns, and
	// returns each side's median in ms.
	inTurns := func(n int, sides ...func(i int) (float64, error)) ([]float64, error) {
		times := make([][]float64, len(sides))
		for i := 0; i < n; i += turn {
			for j, side := range sides {
				for k := i; k < i+turn; k++ {
					x, err := side(k)
					if err != nil {
						return nil, err
					}
					times[j] = append(times[j], x)
				}
			}
		}
		medians := make([]float64, len(sides))
		for j := range times {
			medians[j] = median(times[j])
		}
		return medians, nil
	}

	if err := startupRows(add, bin, linked, hello, work); err != nil {
		return err
	}
	if sqlite == "" {
		return nil
	}

	// One log file and one SQLite database for all rounds; each step works
	// on effects of its own made before it is timed.
	log := filepath.Join(work, "cli-steps.db")
	db := filepath.Join(work, "cli-steps.sqlite")
	defer os.Remove(log)
	defer os.Remove(db)
	schema := `PRAGMA journal_mode=WAL;
CREATE TABLE effects (id INTEGER PRIMARY KEY, session TEXT NOT NULL, tool TEXT NOT NULL, tier TEXT NOT NULL,
  state TEXT NOT NULL, call_signature TEXT NOT NULL UNIQUE, args BLOB NOT NULL, result BLOB);
CREATE TABLE history (effect_id INTEGER NOT NULL, seq INTEGER NOT NULL, to_state TEXT NOT NULL,
  actor TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (effect_id, seq));`
	if _, err := timeOne(sqlite, db, schema); err != nil {
		return err
	}
	undolog := func(argv ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--log", log}, argv...)...)
		cmd.Env = append(os.Environ(), "UNDOLOG_ACTOR=bench")
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("undolog %v: %v\n%.300s", argv, err, out)
		}
		return string(out), nil
	}
	if _, err := undolog("session", "start", "warm"); err != nil {
		return err
	}
	timeUndolog := func(argv ...string) (float64, error) {
		return timeOne(append([]string{bin, "--log", log}, argv...)...)
	}
	sqliteStep := func(sql string) (float64, error) {
		return timeOne(sqlite, "-cmd", "PRAGMA synchronous=FULL", db, "BEGIN; "+sql+" COMMIT;")
	}
	n := 0 // effects so far, on both sides
	m := 0 // effects the sqlite3 side of an intercept made
	// intercepted makes k effects (tier, started or not) to step on, on
	// both sides, untimed, and returns the first's id.
	intercepted := func(k int, tier string, start bool) (uint64, error) {
		var first uint64
		for i := 0; i < k; i++ {
			n++
			argv := []string{"intercept", "--session", "cli", "--tool", "write_file", "--tier", tier, "--args", string(args("cli", n)), "-o", "json"}
			if start {
				argv = append(argv, "--start")
			}
			out, err := undolog(argv...)
			if err != nil {
				return 0, err
			}
			var res struct{ Effect struct{ ID uint64 } }
			if err := json.Unmarshal([]byte(out), &res); err != nil || res.Effect.ID == 0 {
				return 0, fmt.Errorf("undolog intercept: no effect id in %.200q", out)
			}
			if i == 0 {
				first = res.Effect.ID
			}
			if _, err := sqliteStep(sqliteInsert(n)); err != nil {
				return 0, err
			}
		}
		return first, nil
	}
	const perRound = 20
	steps := []struct {
		name string
		prep func() (uint64, error) // effects the step moves; 0: it makes its own
		step func(id uint64) []string
		sql  func(i int) string
	}{
		{"intercept", nil, func(uint64) []string {
			n++
			return []string{"intercept", "--session", "cli", "--tool", "write_file", "--tier", "compensable", "--args", string(args("cli", n))}
		}, func(int) string { m++; return sqliteInsert(1000000 + m) }},
		{"intercept --start", nil, func(uint64) []string {
			n++
			return []string{"intercept", "--session", "cli", "--tool", "write_file", "--tier", "compensable", "--args", string(args("cli", n)), "--start"}
		}, func(int) string { m++; return sqliteInsert(1000000 + m) }},
		{"start", func() (uint64, error) { return intercepted(perRound, "compensable", false) },
			func(id uint64) []string { return []string{"start", strconv.FormatUint(id, 10)} },
			func(i int) string { return sqliteMove(n-perRound+1+i, "executing", 2) }},
		{"commit", func() (uint64, error) { return intercepted(perRound, "compensable", true) },
			func(id uint64) []string {
				return []string{"commit", strconv.FormatUint(id, 10), "--result", `{"ok":true}`}
			},
			func(i int) string { return sqliteMove(n-perRound+1+i, "committed", 3) }},
		{"approve", func() (uint64, error) { return intercepted(perRound, "irreversible", false) },
			func(id uint64) []string { return []string{"approve", strconv.FormatUint(id, 10)} },
			func(i int) string { return sqliteMove(n-perRound+1+i, "approved", 2) }},
	}
	for _, s := range steps {
		r, err := sideBySideRounds(func() ([]float64, error) {
			var first uint64
			if s.prep != nil {
				var err error
				if first, err = s.prep(); err != nil {
					return nil, err
				}
			}
			return inTurns(perRound, func(i int) (float64, error) {
				var id uint64
				if first != 0 {
					id = first + uint64(i)
				}
				return timeUndolog(s.step(id)...)
			}, func(i int) (float64, error) { return sqliteStep(s.sql(i)) },
				func(int) (float64, error) { return timeOne(linked) })
		})
		if err != nil {
			return err
		}
		add("process: undolog "+s.name, fmt.Sprintf("%.2f ms", r.median(0)),
			fmt.Sprintf("%.2fx the sqlite3 shell's durable write of the same records (%.2f ms); undolog's binary doing nothing %.2fx", r.ratio(0, 1), r.median(1), r.ratio(2, 1)))
	}
	return nil
}

// sideBySideRounds runs *runs rounds of a measure of several sides taken in
// turns.
func sideBySideRounds(fn func() ([]float64, error)) (rounds, error) {
	var r rounds
	for i := 0; i < *runs; i++ {
		row, err := fn()
		if err != nil {
			return nil, err
		}
		r = append(r, row)
	}
	return r, nil
}

// sideBySide2 runs *runs rounds of a paired measure.
func sideBySide2(fn func() (float64, float64, error)) (rounds, error) {
	return sideBySideRounds(func() ([]float64, error) {
		a, b, err := fn()
		return []float64{a, b}, err
	})
}

// sqliteInsert is an intercept's records in SQL: the effect and its first
// history record.
func sqliteInsert(i int) string {
	return fmt.Sprintf(`INSERT INTO effects (id, session, tool, tier, state, call_signature, args) VALUES (%d, 'cli', 'write_file', 'compensable', 'pending', 'sig-%d', '%s');
INSERT INTO history VALUES (%d, 1, 'pending', 'bench', datetime('now'));`, i, i, args("cli", i), i)
}

// sqliteMove is a step's records in SQL: the effect's new state and its
// history record.
func sqliteMove(i int, to string, seq int) string {
	return fmt.Sprintf(`UPDATE effects SET state = '%s' WHERE id = %d;
INSERT INTO history VALUES (%d, %d, '%s', 'bench', datetime('now'));`, to, i, i, seq, to)
}

// processBinaries builds undolog, undolog's binary doing nothing (linked)
// and a static Go hello, the processes the CLI rows time.
func processBinaries(work string) (bin, linked, hello string, err error) {
	if bin, err = buildUndolog(); err != nil {
		return "", "", "", err
	}
	if linked, err = buildLinked(work); err != nil {
		return "", "", "", err
	}
	if hello, err = buildHello(work); err != nil {
		return "", "", "", err
	}
	return bin, linked, hello, nil
}

// buildHello builds the static Go program `undolog version` is compared
// with.
func buildHello(work string) (string, error) {
	dir := filepath.Join(work, "hello")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, text := range map[string]string{
		"go.mod":  "module hello\n\ngo 1.26\n",
		"main.go": "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"hello\\n\") }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, "hello")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build hello: %v\n%s", err, out)
	}
	return bin, nil
}

// buildLinked builds ./linked, undolog's binary doing nothing, as the
// benchmark builds undolog.
func buildLinked(work string) (string, error) {
	bin := filepath.Join(work, "linked")
	build := exec.Command("go", "build", "-o", bin, "./linked")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build linked: %v\n%s", err, out)
	}
	return bin, nil
}
