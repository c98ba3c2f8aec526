package tui

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/model"
)

// countingLog counts the reads the view makes of its log.
type countingLog struct {
	effectlog.Log
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingLog) count(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[name]++
}

func (c *countingLog) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

func (c *countingLog) LastChange(ctx context.Context) (uint64, error) {
	c.count("LastChange")
	return c.Log.LastChange(ctx)
}

func (c *countingLog) ListSessions(ctx context.Context, f effectlog.SessionFilter) ([]model.Session, uint64, error) {
	c.count("ListSessions")
	return c.Log.ListSessions(ctx, f)
}

func (c *countingLog) GetSession(ctx context.Context, id string) (model.Session, error) {
	c.count("GetSession")
	return c.Log.GetSession(ctx, id)
}

func (c *countingLog) ListEffects(ctx context.Context, f effectlog.EffectFilter) ([]model.Effect, uint64, error) {
	c.count("ListEffects")
	return c.Log.ListEffects(ctx, f)
}

func (c *countingLog) UndoEntries(ctx context.Context, session string, ids []uint64) (map[uint64]model.UndoEntry, error) {
	c.count("UndoEntries")
	return c.Log.UndoEntries(ctx, session, ids)
}

func (c *countingLog) GetEffect(ctx context.Context, id uint64) (model.EffectDetail, error) {
	c.count("GetEffect")
	return c.Log.GetEffect(ctx, id)
}

// runOnce runs cmd and the commands of a batch it returns, once, without
// following the commands their messages lead to, and gives the messages.
func runOnce(cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	msg := cmd()
	if batch, ok := msg.(tea.BatchMsg); ok {
		var out []tea.Msg
		for _, c := range batch {
			out = append(out, runOnce(c)...)
		}
		return out
	}
	if msg == nil {
		return nil
	}
	return []tea.Msg{msg}
}

// settle feeds msgs to m, and the messages of the commands they return,
// for rounds rounds: the first look of the watch comes back, and what it
// leads to.
func settle(m *Model, msgs []tea.Msg, rounds int) {
	for i := 0; i < rounds; i++ {
		var next []tea.Msg
		for _, msg := range msgs {
			_, cmd := m.Update(msg)
			next = append(next, runOnce(cmd)...)
		}
		msgs = next
	}
}

// The first screen is loaded once (issue 17): the sessions screen reads the
// change feed's position, then the sessions; a session's screen, its
// session, a page of its effects, their undo entries and the selected
// effect's detail. Then the watch only looks at the feed, which has not
// moved: nothing is loaded again. Both when Run loads it before the
// program starts (firstFrame, then Init) and when the program's Init does.
func TestFirstScreenIsLoadedOnce(t *testing.T) {
	want := map[string]map[string]int{
		"": {"LastChange": 1, "ListSessions": 1},
		"agent-research-42": {"LastChange": 1, "GetSession": 1, "ListEffects": 1, "UndoEntries": 1,
			"GetEffect": 1},
	}
	for session, loads := range want {
		for _, primed := range []bool{true, false} {
			store := &countingLog{Log: demoStore(t)}
			m := New(t.Context(), Options{Log: store, Session: session, Now: func() time.Time { return demoEnd }, Refresh: time.Millisecond})
			var msgs []tea.Msg
			if primed {
				frame, err := m.firstFrame()
				if err != nil || !strings.Contains(frame, "agent-research-42") {
					t.Fatalf("session %q: first frame (%v):\n%s", session, err, frame)
				}
				if got := store.snapshot(); !equalCounts(got, loads) {
					t.Errorf("session %q: the first frame read %v, want %v", session, got, loads)
				}
				if !m.primed {
					t.Fatalf("session %q: a loaded first frame leaves the model unprimed", session)
				}
			}
			msgs = runOnce(m.Init())
			settle(m, msgs, 4)
			if !strings.Contains(m.render(), "agent-research-42") {
				t.Fatalf("session %q primed=%v: the screen:\n%s", session, primed, m.render())
			}
			got := store.snapshot()
			if got["LastChange"] < 2 {
				t.Errorf("session %q primed=%v: the watch never looked at the feed: %v", session, primed, got)
			}
			delete(got, "LastChange")
			wantLoads := map[string]int{}
			for k, v := range loads {
				if k != "LastChange" {
					wantLoads[k] = v
				}
			}
			if !equalCounts(got, wantLoads) {
				t.Errorf("session %q primed=%v: loads %v, want %v (the first screen once)", session, primed, got, wantLoads)
			}
			store.Close()
		}
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// writes records each Write to the terminal apart, and says when one came.
type writes struct {
	mu   sync.Mutex
	list [][]byte
	came chan struct{}
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.list = append(w.list, append([]byte(nil), p...))
	w.mu.Unlock()
	select {
	case w.came <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *writes) all() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]byte(nil), w.list...)
}

// Run paints the whole first screen in its first write, in the alternate
// screen, before bubbletea's renderer starts (whose first frame waits for
// its 60 fps ticker); nothing written after it clears the screen (no blank
// frame between the two), and Run leaves the alternate screen at the end.
func TestRunPaintsTheFirstScreenInItsFirstWrite(t *testing.T) {
	store := demoStore(t)
	defer store.Close()
	in, typed := io.Pipe()
	defer typed.Close()
	out := &writes{came: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() {
		done <- Run(t.Context(), Options{Log: store, Now: func() time.Time { return demoEnd }, Width: 100, Height: 30}, in, out)
	}()
	<-out.came
	first := out.all()[0]
	for _, want := range []string{"\x1b[?1049h", "agent-research-42", "ci-nightly-88", "q quit"} {
		if !bytes.Contains(first, []byte(want)) {
			t.Fatalf("the first write lacks %q:\n%q", want, first)
		}
	}
	if n := bytes.Count(first, []byte("\r\n")); n != 29 {
		t.Errorf("the first write has %d lines, want the terminal's 30", n+1)
	}
	typed.Write([]byte("q"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the view did not quit")
	}
	list := out.all()
	for i, w := range list[1:] {
		if bytes.Contains(w, []byte("\x1b[2J")) || bytes.Contains(w, []byte("\x1b[?1049h")) {
			t.Errorf("write %d clears the painted screen: %q", i+1, w)
		}
	}
	if last := list[len(list)-1]; !bytes.HasSuffix(last, []byte("\x1b[?1049l")) {
		t.Errorf("the last write %q does not leave the alternate screen", last)
	}
}
