package cmd

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rogpeppe/go-internal/testscript"
	bolt "go.etcd.io/bbolt"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/pgtest"
	"github.com/undolog/undolog/internal/testbin"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/logaddr"
)

// TestMain makes the test binary double as the undolog binary, so that the
// scripts run the real command line in separate processes.
func TestMain(m *testing.M) {
	testbin.QuickRaceExit()
	testscript.Main(withPostgres{m}, map[string]func(){
		"undolog": func() { os.Exit(Main()) },
	})
}

// withPostgres runs the tests and then stops the PostgreSQL server they
// started, if any.
type withPostgres struct{ m *testing.M }

func (w withPostgres) Run() int { return pgtest.Run(w.m.Run) }

// scriptEngines make a fresh, empty log for one script and return its
// address (UNDOLOG_LOG), by the engine's name. The scripts run against every
// engine (the PostgreSQL one where a server is at hand, see pgtest), each
// script with a log of its own; UNDOLOG_TEST_ENGINE names one engine to run
// them against alone. A script that needs the log to be a file (its bytes,
// its lock, its journal) says [file].
var scriptEngines = map[string]func(t *testing.T) func(env *testscript.Env) (string, error){
	"file": func(*testing.T) func(env *testscript.Env) (string, error) {
		return func(env *testscript.Env) (string, error) {
			return filepath.Join(env.WorkDir, "state", "undolog.db"), nil
		}
	},
	"postgres": func(t *testing.T) func(env *testscript.Env) (string, error) {
		server := pgtest.Server(t)
		return func(env *testscript.Env) (string, error) { return server.NewDatabase(t), nil }
	},
	// PostgreSQL behind PgBouncer in transaction pooling mode, the URL the
	// pooler's alone: waits poll.
	"pooled": func(t *testing.T) func(env *testscript.Env) (string, error) {
		server := pgtest.Server(t)
		server.Pooler(t)
		return func(env *testscript.Env) (string, error) { return server.NewPooledDatabase(t, false), nil }
	},
}

// TestScripts runs the end-to-end scripts in testdata/script, once per
// engine.
func TestScripts(t *testing.T) {
	only := os.Getenv("UNDOLOG_TEST_ENGINE")
	if only != "" && scriptEngines[only] == nil {
		t.Fatalf("UNDOLOG_TEST_ENGINE=%s: no such engine for the scripts", only)
	}
	for _, engine := range []string{"file", "postgres", "pooled"} {
		if only != "" && engine != only {
			continue
		}
		t.Run(engine, func(t *testing.T) { runScripts(t, engine) })
	}
}

func runScripts(t *testing.T, engine string) {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	newLog := scriptEngines[engine](t)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "file":
				return engine == "file", nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("REPO", repo)
			addr, err := newLog(env)
			if err != nil {
				return err
			}
			env.Setenv("UNDOLOG_LOG", addr)
			env.Setenv("UNDOLOG_TEST_ENGINE", engine)
			env.Setenv("UNDOLOG_ACTOR", "tester")
			env.Setenv("NO_COLOR", "")
			// Text an agent could store to take over the operator's terminal.
			env.Setenv("HOSTILE", hostileText)
			quoted, _ := json.Marshal(hostileText)
			env.Setenv("HOSTILE_JSON", string(quoted))
			env.Setenv("RLO", "\u202e")
			env.Setenv("C1", "\u009b")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exit":         cmdExit,
			"json":         cmdJSON,
			"jsonlines":    cmdJSONLines,
			"sleep":        cmdSleep,
			"hold":         cmdHold,
			"waitfor":      cmdWaitFor,
			"waitapproval": cmdWaitApproval,
			"termsafe":     cmdTermSafe,
			"flipbytes":    cmdFlipBytes,
			"zeropage":     cmdZeroPage,
			"logsnap":      cmdLogSnap,
			"logsame":      cmdLogSame,
		},
	})
}

// hostileText retitles the window (OSC 0), clears the screen (CSI 2J),
// colours (CSI, and C1 CSI U+009B), reverses what follows (U+202E), deletes
// (DEL), returns the cursor (CR) and moves to the next column (tab).
const hostileText = "\x1b]0;owned\x07\x1b[2J\x1b[1;31m\u009b2Jred\u202eexe.txt\x7fX\rover\tcol"

// termsafe FILE: FILE (or stdout, stderr) holds nothing a terminal would act
// on: no control byte but newline and tab, no DEL, no C1 control, no
// bidirectional mark, and no byte that is not UTF-8.
func cmdTermSafe(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: termsafe FILE")
	}
	data := ts.ReadFile(args[0])
	if !utf8.ValidString(data) {
		ts.Fatalf("termsafe: %s is not UTF-8", args[0])
	}
	for i, r := range data {
		if r != '\n' && r != '\t' && textfmt.Unsafe(r) {
			ts.Fatalf("termsafe: %s holds %U at byte %d: %q", args[0], r, i, data)
		}
	}
}

// flipbytes FILE OLD NEW: change the one occurrence of OLD in FILE to NEW
// (same length), as damage or a careless edit would.
func cmdFlipBytes(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 || len(args[1]) != len(args[2]) {
		ts.Fatalf("usage: flipbytes FILE OLD NEW (OLD and NEW of one length)")
	}
	path := ts.MkAbs(args[0])
	data, err := os.ReadFile(path)
	ts.Check(err)
	if n := bytes.Count(data, []byte(args[1])); n != 1 {
		ts.Fatalf("flipbytes: %q is in %s %d times", args[1], args[0], n)
	}
	ts.Check(os.WriteFile(path, bytes.Replace(data, []byte(args[1]), []byte(args[2]), 1), 0o600))
}

// zeropage FILE TEXT: zero the page of the log file FILE that holds TEXT
// (once in it), as a disk that lost a block would; the page size is the
// one bbolt's first meta page gives.
func cmdZeroPage(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: zeropage FILE TEXT")
	}
	path := ts.MkAbs(args[0])
	data, err := os.ReadFile(path)
	ts.Check(err)
	if n := bytes.Count(data, []byte(args[1])); n != 1 {
		ts.Fatalf("zeropage: %q is in %s %d times", args[1], args[0], n)
	}
	// A bbolt meta page: a 16-byte page header, then magic, version, page size.
	pageSize := int(binary.LittleEndian.Uint32(data[24:]))
	at := bytes.Index(data, []byte(args[1])) / pageSize * pageSize
	clear(data[at : at+pageSize])
	ts.Check(os.WriteFile(path, data, 0o600))
}

// logsnap NAME: keep what the log holds now, to compare with logsame NAME
// later: its export, and for a log file the file and its journal as bytes.
func cmdLogSnap(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: logsnap NAME")
	}
	for from, to := range logState(ts, args[0]) {
		data, err := os.ReadFile(from)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		ts.Check(err)
		ts.Check(os.WriteFile(to, data, 0o600))
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]+".export"), exportLog(ts), 0o600))
}

// logsame NAME: the log holds what it held at logsnap NAME: the same export,
// and for a log file the same bytes in the file and its journal.
func cmdLogSame(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: logsame NAME")
	}
	for now, then := range logState(ts, args[0]) {
		a, aerr := os.ReadFile(now)
		b, berr := os.ReadFile(then)
		if errors.Is(aerr, os.ErrNotExist) && errors.Is(berr, os.ErrNotExist) {
			continue
		}
		if aerr != nil || berr != nil || !bytes.Equal(a, b) {
			ts.Fatalf("logsame: %s changed since logsnap %s", now, args[0])
		}
	}
	if then := ts.ReadFile(args[0] + ".export"); string(exportLog(ts)) != then {
		ts.Fatalf("logsame: the log's export changed since logsnap %s", args[0])
	}
}

// logState maps the files that hold a file log to where logsnap NAME keeps
// them; none for a log that is not a file.
func logState(ts *testscript.TestScript, name string) map[string]string {
	if ts.Getenv("UNDOLOG_TEST_ENGINE") != "" && ts.Getenv("UNDOLOG_TEST_ENGINE") != "file" {
		return nil
	}
	log := ts.Getenv("UNDOLOG_LOG")
	return map[string]string{log: ts.MkAbs(name + ".db"), log + "-journal": ts.MkAbs(name + ".journal")}
}

// exportLog is the log's export, read in this process.
func exportLog(ts *testscript.TestScript) []byte {
	log := logaddr.Open(ts.Getenv("UNDOLOG_LOG"), logaddr.Options{})
	defer log.Close()
	var out bytes.Buffer
	err := log.Export(context.Background(), "", func(r effectlog.ExportRecord) error {
		line, err := json.Marshal(r)
		out.Write(append(line, '\n'))
		return err
	})
	ts.Check(err)
	return out.Bytes()
}

// exit N prog args...: run prog and require exit code N (stdout and stderr
// are kept for the next stdout/stderr checks).
func cmdExit(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exit CODE program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exit: bad code %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("exit: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}

// json FILE PATH WANT: the JSON value at PATH (dot-separated keys and array
// indexes, "." for the root) in FILE (or stdout) renders as WANT; "len(PATH)"
// checks an array's or object's length. For JSON Lines, the first key is the line number.
func cmdJSON(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: json FILE PATH WANT")
	}
	data := ts.ReadFile(args[0])
	path, wantLen := args[1], false
	if inner, ok := strings.CutPrefix(path, "len("); ok {
		path, wantLen = strings.TrimSuffix(inner, ")"), true
	}
	// Numbers are compared as the digits written, not as doubles.
	unmarshal := func(text string, v *any) error {
		d := json.NewDecoder(strings.NewReader(text))
		d.UseNumber()
		if err := d.Decode(v); err != nil {
			return err
		}
		if d.More() {
			return errors.New("more than one value")
		}
		return nil
	}
	var doc any
	if err := unmarshal(data, &doc); err != nil {
		var lines []any
		for _, l := range strings.Split(strings.TrimSpace(data), "\n") {
			var v any
			if err := unmarshal(l, &v); err != nil {
				ts.Fatalf("json: %s is neither JSON nor JSON Lines: %v", args[0], err)
			}
			lines = append(lines, v)
		}
		doc = lines
	}
	cur := doc
	if path != "." {
		for _, key := range strings.Split(path, ".") {
			switch v := cur.(type) {
			case map[string]any:
				var ok bool
				if cur, ok = v[key]; !ok {
					ts.Fatalf("json: no key %q in %s", key, path)
				}
			case []any:
				i, err := strconv.Atoi(key)
				if err != nil || i < 0 || i >= len(v) {
					ts.Fatalf("json: bad index %q in %s (length %d)", key, path, len(v))
				}
				cur = v[i]
			default:
				ts.Fatalf("json: cannot index %T with %q", cur, key)
			}
		}
	}
	var got string
	if wantLen {
		switch v := cur.(type) {
		case []any:
			got = strconv.Itoa(len(v))
		case map[string]any:
			got = strconv.Itoa(len(v))
		default:
			ts.Fatalf("json: len of %T", cur)
		}
	} else if s, ok := cur.(string); ok {
		got = s
	} else {
		b, _ := json.Marshal(cur)
		got = string(b)
	}
	if (got == args[2]) == neg {
		ts.Fatalf("json %s: got %s, want %s%s", args[1], got, map[bool]string{true: "not ", false: ""}[neg], args[2])
	}
}

// jsonlines FILE N: FILE (or stdout) is N lines, each one JSON object.
func cmdJSONLines(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: jsonlines FILE N")
	}
	lines := strings.Split(strings.TrimSuffix(ts.ReadFile(args[0]), "\n"), "\n")
	if strconv.Itoa(len(lines)) != args[1] {
		ts.Fatalf("jsonlines: %d lines, want %s", len(lines), args[1])
	}
	for i, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			ts.Fatalf("jsonlines: line %d is not one JSON object: %v: %q", i+1, err, l)
		}
	}
}

func cmdSleep(ts *testscript.TestScript, neg bool, args []string) {
	d, err := time.ParseDuration(args[0])
	if err != nil {
		ts.Fatalf("sleep: %v", err)
	}
	time.Sleep(d)
}

// hold DURATION: this process (not undolog) opens the log and keeps it locked
// for DURATION, as a slow or hung writer would.
func cmdHold(ts *testscript.TestScript, neg bool, args []string) {
	d, err := time.ParseDuration(args[0])
	if err != nil {
		ts.Fatalf("hold: %v", err)
	}
	db, err := bolt.Open(ts.Getenv("UNDOLOG_LOG"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		ts.Fatalf("hold: %v", err)
	}
	go func() {
		time.Sleep(d)
		db.Close()
	}()
}

// waitfor FILE [PATTERN]: wait up to 10s for FILE to exist (and to contain PATTERN).
func cmdWaitFor(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: waitfor FILE [PATTERN]")
	}
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(path); err == nil && (len(args) < 2 || strings.Contains(string(data), args[1])) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("waitfor: %s did not appear in 10s", args[0])
}

// waitapproval ID: wait up to 10s until effect ID's approval request is waiting.
func cmdWaitApproval(ts *testscript.TestScript, neg bool, args []string) {
	id, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		ts.Fatalf("waitapproval: %v", err)
	}
	store := logaddr.Open(ts.Getenv("UNDOLOG_LOG"), logaddr.Options{})
	defer store.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list, _, _ := store.PendingApprovals(context.Background(), "", 0)
		for _, a := range list {
			if a.EffectID == id {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("waitapproval: effect %d is not waiting after 10s", id)
}
