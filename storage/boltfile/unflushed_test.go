package boltfile

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// answeringWriter makes n calls as the proxy does (intercept, commit, then
// the answer recorded unflushed), printing each effect id once its commit
// returned; then, after its last answer had time to be flushed on its own,
// it prints "idle" and waits to be killed.
func answeringWriter(s *testLog, session string, n int) int {
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	for i := range n {
		res, err := s.Intercept(ctx, effectlog.InterceptRequest{Session: session, Tool: "write", Tier: sm.Compensable,
			Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), CreateSession: true, Start: true, RunAgainAnswered: true})
		if err == nil {
			_, err = s.Commit(ctx, res.Effect.ID, model.Change{Result: json.RawMessage(strconv.Itoa(i))})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(out, res.Effect.ID)
		out.Flush()
		if err := s.AnsweredUnflushed(ctx, res.Effect.ID, model.Change{Actor: "mcp:client"}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	time.Sleep(10 * unflushedWait)
	fmt.Fprintln(out, "idle")
	out.Flush()
	select {}
}

func answerRecords(t *testing.T, s *testLog, id uint64) int {
	t.Helper()
	d := must[model.EffectDetail](t)(s.GetEffect(t.Context(), id))
	n := 0
	for _, h := range d.History {
		if h.Kind == model.KindAnswer {
			n++
		}
	}
	return n
}

// A process killed right after answers recorded without a flush of their
// own loses at most those answers: every acknowledged write is there, the
// log verifies, and an answer followed by a durable write (the next call's
// intercept), or left alone for unflushedWait, is there too.
func TestSIGKILLLosesOnlyUnflushedAnswers(t *testing.T) {
	s, _ := newStore(t)
	for round, mode := range []string{"answers:1000", "answers:20"} {
		cmd := writerCmd(t, mode, s.Path(), fmt.Sprintf("answers-%d", round))
		sc := startWriter(t, cmd)
		var acked []uint64
		idle := false
		for sc.Scan() {
			if idle = sc.Text() == "idle"; idle {
				break
			}
			id, _ := strconv.ParseUint(sc.Text(), 10, 64)
			acked = append(acked, id)
			if len(acked) == 40 {
				break // kill it mid-loop, right after an answer
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		for sc.Scan() {
			if id, err := strconv.ParseUint(sc.Text(), 10, 64); err == nil {
				acked = append(acked, id)
			}
		}
		cmd.Wait()
		if len(acked) == 0 {
			t.Fatalf("round %d: no call acknowledged", round)
		}
		lost := 0
		for i, id := range acked {
			d, err := s.GetEffect(t.Context(), id)
			if err != nil || d.Effect.State != sm.Committed {
				t.Fatalf("round %d: acknowledged effect %d lost: %+v %v", round, id, d.Effect, err)
			}
			switch n := answerRecords(t, s, id); {
			case n > 1:
				t.Fatalf("round %d: effect %d has %d answer records", round, id, n)
			case n == 0 && (i < len(acked)-1 || idle):
				t.Errorf("round %d: the answer of effect %d was lost though a durable write or %v followed it", round, id, 10*unflushedWait)
			case n == 0:
				lost++
			}
		}
		t.Logf("round %d (%s): %d calls acknowledged, %d answers lost", round, mode, len(acked), lost)
		rep := verifyClean(t, s)
		if !strings.Contains(mode, "1000") && !idle {
			t.Fatalf("round %d: the writer did not finish: %+v", round, rep)
		}
	}
}

// Close makes the answers recorded unflushed durable before it returns.
func TestCloseFlushesUnflushedAnswers(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	res := must[effectlog.InterceptResult](t)(s.Intercept(ctx, effectlog.InterceptRequest{Session: "c", Tool: "write", Tier: sm.Compensable,
		Args: json.RawMessage(`{}`), CreateSession: true, Start: true, RunAgainAnswered: true}))
	must[model.Effect](t)(s.Commit(ctx, res.Effect.ID, model.Change{}))
	before := s.group.durableWrites()
	if err := s.AnsweredUnflushed(ctx, res.Effect.ID, model.Change{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.group.durableWrites(); got != before+1 {
		t.Fatalf("%d durable writes during Close, want 1", got-before)
	}
	if n := answerRecords(t, s, res.Effect.ID); n != 1 {
		t.Fatalf("%d answer records after Close", n)
	}
}
