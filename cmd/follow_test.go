package cmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/undolog/undolog/internal/pgtest"
)

// `list --follow -o jsonl` prints every effect change that writers in other
// processes make while it runs exactly once: what it printed is, record for
// record, the effects' history that the export holds afterwards (less what
// was there before it started), and each effect's records come in their
// order.
func TestFollowSeesEveryChangeOfConcurrentWriters(t *testing.T) {
	t.Run("file", func(t *testing.T) { followEveryChange(t, filepath.Join(t.TempDir(), "u.db")) })
	t.Run("postgres", func(t *testing.T) { followEveryChange(t, pgtest.Server(t).NewDatabase(t)) })
}

// lockedBuffer is a follower's stdout, read while it is written.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitForLine waits up to 30 s for a line of out that contains s.
func waitForLine(t *testing.T, out *lockedBuffer, s string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(out.String(), s) {
			return
		}
	}
	t.Fatalf("no line holding %s within 30s; the follower printed:\n%s", s, out.String())
}

// startWriters starts writers processes, each making calls calls through
// `undolog exec` in a session of its own; wait waits for them and fails the
// test if one failed.
func startWriters(t *testing.T, addr string, writers, calls int) (wait func()) {
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			script := fmt.Sprintf(`for i in $(seq %d); do undolog exec --session w%d --undo true -- echo "$i" >/dev/null || exit 1; done`, calls, w)
			cmd := exec.Command("sh", "-c", script)
			cmd.Env = append(runWithLog(t, addr).Env, "PATH="+filepath.Dir(runWithLog(t, addr).Path)+":/usr/bin:/bin")
			if b, err := cmd.CombinedOutput(); err != nil {
				errs[w] = fmt.Errorf("writer %d: %v: %s", w, err, b)
			}
		}()
	}
	return func() {
		t.Helper()
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func followEveryChange(t *testing.T, addr string) {
	mustRun(t, addr, "exec", "--session", "seed", "--undo", "true", "--", "true")
	follower := runWithLog(t, addr, "list", "--follow", "-o", "jsonl")
	out := &lockedBuffer{}
	follower.Stdout = out
	var stderr bytes.Buffer
	follower.Stderr = &stderr
	if err := follower.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		follower.Process.Kill()
		follower.Wait()
	}()
	// The listing comes after the follower took its place in the feed.
	waitForLine(t, out, `"session":"seed"`)
	listed := strings.Count(out.String(), "\n")

	const writers, calls = 4, 8
	startWriters(t, addr, writers, calls)()
	// One write after the writers': once the follower printed it, it has read
	// past everything theirs.
	mustRun(t, addr, "intercept", "--session", "sentinel", "--tool", "last", "--tier", "compensable")
	waitForLine(t, out, `"session":"sentinel"`)
	follower.Process.Signal(syscall.SIGINT)
	if err := follower.Wait(); err != nil {
		t.Fatalf("follow: %v: %s", err, stderr.String())
	}

	// What the follower printed after its listing.
	type key struct {
		effect uint64
		seq    uint32
	}
	printed := map[key]int{}
	lastSeq := map[uint64]uint32{}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")[listed:]
	for _, line := range lines {
		var ch struct {
			Transition struct {
				EffectID uint64 `json:"effect_id"`
				Seq      uint32 `json:"seq"`
			} `json:"transition"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil || ch.Transition.EffectID == 0 {
			t.Fatalf("not a change: %q (%v)", line, err)
		}
		k := key{ch.Transition.EffectID, ch.Transition.Seq}
		printed[k]++
		if printed[k] > 1 {
			t.Fatalf("effect %d's record %d printed twice", k.effect, k.seq)
		}
		if prev := lastSeq[k.effect]; k.seq <= prev {
			t.Fatalf("effect %d's record %d printed after its record %d", k.effect, k.seq, prev)
		}
		lastSeq[k.effect] = k.seq
	}

	// The effects' history as the export has it, less the seed's (there
	// before the follower started).
	export := runWithLog(t, addr, "export")
	pipe, _ := export.StdoutPipe()
	if err := export.Start(); err != nil {
		t.Fatal(err)
	}
	want := 0
	sc := bufio.NewScanner(pipe)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct {
			Type   string `json:"type"`
			Record struct {
				EffectID uint64 `json:"effect_id"`
				Seq      uint32 `json:"seq"`
				Session  string `json:"session"`
			} `json:"record"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Type != "history" || r.Record.Session == "seed" {
			continue
		}
		want++
		if printed[key{r.Record.EffectID, r.Record.Seq}] != 1 {
			t.Errorf("effect %d's record %d (session %s) was not printed", r.Record.EffectID, r.Record.Seq, r.Record.Session)
		}
	}
	io.Copy(io.Discard, pipe)
	if err := export.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(printed) != want || want < writers*calls*3 {
		t.Fatalf("%d changes printed, the export holds %d (at least %d expected)", len(printed), want, writers*calls*3)
	}
}

// A follower started while writers commit prints no change its listing
// already shows, and misses none after: the listing's records and the
// changes printed after it are each effect's whole history, once. (On
// PostgreSQL a change gets its position just after its commit: the listing
// shows some a position read before it has not yet reached.)
func TestFollowStartedAmidWritesRepeatsNothing(t *testing.T) {
	t.Run("file", func(t *testing.T) { followAmidWrites(t, filepath.Join(t.TempDir(), "u.db")) })
	t.Run("postgres", func(t *testing.T) { followAmidWrites(t, pgtest.Server(t).NewDatabase(t)) })
}

func followAmidWrites(t *testing.T, addr string) {
	mustRun(t, addr, "session", "start", "seed")
	const writers, calls, followers = 4, 12, 3
	wait := startWriters(t, addr, writers, calls)
	// Followers started at three moments of the writes.
	var outs []*lockedBuffer
	var stderrs []*bytes.Buffer
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}()
	for i := range followers {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if n := strings.Count(mustRun(t, addr, "list", "--limit", "0", "-o", "ids"), "\n"); n >= (i+1)*writers*calls/(followers+1) || time.Now().After(deadline) {
				break
			}
		}
		follower := runWithLog(t, addr, "list", "--follow", "--limit", "0", "-o", "jsonl")
		out, stderr := &lockedBuffer{}, &bytes.Buffer{}
		follower.Stdout, follower.Stderr = out, stderr
		if err := follower.Start(); err != nil {
			t.Fatal(err)
		}
		outs, stderrs, cmds = append(outs, out), append(stderrs, stderr), append(cmds, follower)
	}
	wait()
	mustRun(t, addr, "intercept", "--session", "sentinel", "--tool", "last", "--tier", "compensable")
	var all []struct {
		ID         uint64 `json:"id"`
		HistoryLen uint32 `json:"history_len"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, addr, "list", "--limit", "0", "-o", "json")), &all); err != nil {
		t.Fatal(err)
	}
	if len(all) != writers*calls+1 {
		t.Fatalf("%d effects; want %d", len(all), writers*calls+1)
	}
	for i, follower := range cmds {
		waitForLine(t, outs[i], `"session":"sentinel"`)
		follower.Process.Signal(syscall.SIGINT)
		if err := follower.Wait(); err != nil {
			t.Fatalf("follow: %v: %s", err, stderrs[i].String())
		}
		listed := map[uint64]uint32{}
		last := map[uint64]uint32{}
		changes := 0
		for _, line := range strings.Split(strings.TrimSpace(outs[i].String()), "\n") {
			var ch struct {
				Effect struct {
					ID         uint64 `json:"id"`
					HistoryLen uint32 `json:"history_len"`
				} `json:"effect"`
				Transition *struct {
					EffectID uint64 `json:"effect_id"`
					Seq      uint32 `json:"seq"`
				} `json:"transition"`
			}
			if err := json.Unmarshal([]byte(line), &ch); err != nil || ch.Effect.ID == 0 {
				t.Fatalf("follower %d: not a line of the follow: %q (%v)", i, line, err)
			}
			if ch.Transition == nil {
				if changes > 0 {
					t.Fatalf("follower %d: effect %d listed after the changes began", i, ch.Effect.ID)
				}
				listed[ch.Effect.ID], last[ch.Effect.ID] = ch.Effect.HistoryLen, ch.Effect.HistoryLen
				continue
			}
			changes++
			id, seq := ch.Transition.EffectID, ch.Transition.Seq
			if seq != last[id]+1 {
				t.Fatalf("follower %d: effect %d: record %d printed after record %d (listed with %d)", i, id, seq, last[id], listed[id])
			}
			last[id] = seq
		}
		for _, e := range all {
			if last[e.ID] != e.HistoryLen {
				t.Fatalf("follower %d: effect %d has %d records; the follower showed %d (listed with %d)", i, e.ID, e.HistoryLen, last[e.ID], listed[e.ID])
			}
		}
	}
}

// A writer that dies between its commit and its publish (here: killed, and
// the server ends its connection) leaves its changes queued: a follower
// gives them their positions itself (at most once a second, when it looks),
// and does not wait for the next write.
func TestFollowerSeesWhatAKilledWriterLeftQueued(t *testing.T) {
	server := pgtest.Server(t)
	addr := server.NewDatabase(t)
	mustRun(t, addr, "intercept", "--session", "seed", "--tool", "t", "--tier", "compensable")
	follower := runWithLog(t, addr, "list", "--follow", "-o", "jsonl")
	follower.Env = append(follower.Env, "UNDOLOG_NOTIFY_FALLBACK=300ms")
	out := &lockedBuffer{}
	follower.Stdout = out
	if err := follower.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		follower.Process.Kill()
		follower.Wait()
	}()
	waitForLine(t, out, `"session":"seed"`)

	// The feed's lock (the row of undolog_feed_floor), held while the writer
	// commits: its publish waits, and the writer is killed meanwhile.
	ctx := context.Background()
	lock, err := pgx.Connect(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	if _, err := lock.Exec(ctx, `BEGIN; SELECT 1 FROM undolog_feed_floor FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	writer := runWithLog(t, addr, "intercept", "--session", "killed", "--tool", "t", "--tier", "compensable")
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := lock.QueryRow(ctx, `SELECT count(*) FROM undolog_effects WHERE session = 'killed'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer did not commit within 20 s")
		}
	}
	// Its publish, sent and waiting in the server, would still run once
	// the lock is let go: end it too, as the server does when the writer's
	// machine is gone.
	writer.Process.Kill()
	writer.Wait()
	if _, err := lock.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	var queued int
	if err := lock.QueryRow(ctx, `SELECT count(*) FROM undolog_changes_pending`).Scan(&queued); err != nil || queued == 0 {
		t.Fatalf("the killed writer left %d changes queued (%v)", queued, err)
	}
	if _, err := lock.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	// No write comes after: the follower publishes what was left.
	waitForLine(t, out, `"session":"killed"`)
}

// A write command whose publish waits for the feed's lock (another holds
// it, for good here: no lock timeout) ends all the same, within
// moments: its changes stay queued for the next publish.
func TestWriteEndsWhileAnotherHoldsTheFeedLock(t *testing.T) {
	addr := pgtest.Server(t).NewDatabase(t)
	mustRun(t, addr, "session", "start", "warm")
	ctx := context.Background()
	lock, err := pgx.Connect(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	if _, err := lock.Exec(ctx, `BEGIN; SELECT 1 FROM undolog_feed_floor FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := runWithLog(t, addr, "session", "start", "held", "--lock-timeout", "0").CombinedOutput()
	if err != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("session start with the feed's lock held: %v after %v: %s", err, time.Since(start), out)
	}
	if _, err := lock.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	// The next write publishes what it left.
	mustRun(t, addr, "session", "start", "after")
	var queued int
	if err := lock.QueryRow(ctx, `SELECT count(*) FROM undolog_changes_pending`).Scan(&queued); err != nil || queued != 0 {
		t.Fatalf("%d changes queued after the next write (%v)", queued, err)
	}
}
