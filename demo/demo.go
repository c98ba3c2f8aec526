// Package demo owns the demo log: a few realistic agent and CI sessions with
// every kind of outcome, written through the real log API and the real undo
// runner, for newcomers and for tests of the views.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/saga"
	sm "github.com/undolog/undolog/statemachine"
)

// Clock is a time source that moves forward by a step on each reading, so
// the demo has the spread of times a real log has.
type Clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

// NewClock starts at start and advances step per reading.
func NewClock(start time.Time, step time.Duration) *Clock { return &Clock{t: start, step: step} }

// Now returns the current time and advances the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// Write fills the log at path (which must not hold sessions of these names)
// with the demo sessions, as if they had happened over the three hours before
// `end`.
func Write(ctx context.Context, path string, end time.Time) error {
	clock := NewClock(end.Add(-3*time.Hour), 150*time.Second)
	store := logaddr.File(path, logaddr.Options{Now: clock.Now})
	w := &writer{ctx: ctx, store: store}
	w.researchAgent()
	w.deployPipeline()
	w.cleanupAgent()
	w.opsAgent()
	w.nightly()
	return w.err
}

// writer records the first error and skips the rest.
type writer struct {
	ctx   context.Context
	store effectlog.Log
	err   error
}

func (w *writer) check(err error) {
	if w.err == nil && err != nil {
		w.err = err
	}
}

func (w *writer) intercept(session, tool string, tier sm.Tier, args string, comp *model.Compensation, actor string) uint64 {
	if w.err != nil {
		return 0
	}
	res, err := w.store.Intercept(w.ctx, effectlog.InterceptRequest{Session: session, Tool: tool, Tier: tier,
		Args: json.RawMessage(args), Compensation: comp, CreateSession: true, Actor: actor, ApprovalTimeout: 4 * time.Hour})
	w.check(err)
	return res.Effect.ID
}

func (w *writer) step(id uint64, to sm.State, c model.Change) {
	if w.err != nil {
		return
	}
	_, err := w.store.Transition(w.ctx, id, to, c)
	w.check(err)
}

func (w *writer) run(id uint64, actor, result string) {
	w.step(id, sm.Executing, model.Change{Actor: actor})
	w.step(id, sm.Committed, model.Change{Actor: actor, Result: json.RawMessage(result)})
}

func cmd(argv ...string) *model.Compensation {
	return &model.Compensation{Kind: model.CompensationCommand, Argv: argv, MaxRetries: 2, InitialBackoffMS: 10}
}

// failing is a compensation that always fails, as a locked resource would.
func failing(msg string) *model.Compensation {
	return cmd("sh", "-c", fmt.Sprintf("echo %q >&2; exit 1", msg))
}

func (w *writer) undo(session, actor string) {
	if w.err != nil {
		return
	}
	r := &saga.Runner{Log: w.store, Actor: actor, Sleep: func(context.Context, time.Duration) error { return nil }}
	_, err := r.Run(context.Background(), session)
	if err != nil && !errors.Is(err, saga.ErrCompensationFailed) {
		w.check(err)
	}
}

// researchAgent: a live agent run, replayed and retried calls, one email waiting for approval.
func (w *writer) researchAgent() {
	const s, agent = "agent-research-42", "agent:claude"
	_, err := w.store.CreateSession(w.ctx, effectlog.NewSession{ID: s, Meta: map[string]string{"agent": "research", "model": "claude"}, Actor: agent})
	w.check(err)
	// Its compensations only say what they would do: the demo's undo runs
	// them for real, in whatever directory the view was opened.
	report := w.intercept(s, "write_file", sm.Compensable, `{"path":"reports/q3.md","bytes":4812}`, cmd("echo", "demo: would remove reports/q3.md"), agent)
	w.run(report, agent, `{"written":4812}`)
	w.intercept(s, "write_file", sm.Compensable, `{"bytes":4812,"path":"reports/q3.md"}`, nil, agent) // the agent repeats itself: replayed
	ticket := w.intercept(s, "create_ticket", sm.Compensable, `{"project":"FIN","title":"Q3 variance in EMEA"}`,
		// A command, not an mcp close_ticket: this session ran behind no
		// MCP server, so an mcp compensation could never run and the demo's
		// main session could not be undone. The result reaches it as
		// $UNDOLOG_RESULT.
		cmd("sh", "-c", `echo "demo: would close the ticket of $UNDOLOG_RESULT"`), agent)
	w.step(ticket, sm.Executing, model.Change{Actor: agent})
	w.step(ticket, sm.Pending, model.Change{Actor: agent, Error: "HTTP 503 from tracker"})
	w.intercept(s, "create_ticket", sm.Compensable, `{"project":"FIN","title":"Q3 variance in EMEA"}`, nil, agent) // the retry
	w.run(ticket, agent, `{"id":"FIN-2231"}`)
	w.intercept(s, "send_email", sm.Irreversible, `{"to":"cfo@example.com","subject":"Q3 report","attachments":["reports/q3.md"]}`, nil, agent)
}

// deployPipeline: a CI run that failed at its smoke test and was rolled back,
// with one compensation that failed for good.
func (w *writer) deployPipeline() {
	const s, ci = "ci-deploy-117", "ci:github-actions"
	_, err := w.store.CreateSession(w.ctx, effectlog.NewSession{ID: s, Meta: map[string]string{"pipeline": "api", "commit": "9f2c1e7"}, Actor: ci})
	w.check(err)
	build := w.intercept(s, "docker", sm.Compensable, `{"argv":["docker","push","registry/api:9f2c1e7"]}`, cmd("true"), ci)
	w.run(build, ci, `{"exit_code":0,"stdout":"pushed registry/api:9f2c1e7\n","stderr":""}`)
	migrate := w.intercept(s, "migrate", sm.Compensable, `{"argv":["./migrate","up","42"]}`, failing("down migration 42: lock held by another session"), ci)
	w.run(migrate, ci, `{"exit_code":0,"stdout":"applied 42\n","stderr":""}`)
	deploy := w.intercept(s, "kubectl", sm.Irreversible, `{"argv":["kubectl","apply","-f","api.yaml"]}`, nil, ci)
	w.step(deploy, sm.Approved, model.Change{Actor: "alice@laptop", Reason: "release notes read"})
	w.run(deploy, ci, `{"exit_code":0,"stdout":"deployment.apps/api configured\n","stderr":""}`)
	warm := w.intercept(s, "warm_cache", sm.Compensable, `{"argv":["./warm-cache","--all"]}`, cmd("true"), ci)
	w.step(warm, sm.Executing, model.Change{Actor: ci})
	_, err = w.store.SetSessionState(w.ctx, s, sm.SessionFailed, model.Change{Actor: ci, Reason: "smoke test failed: 502 on /health"})
	w.check(err)
	w.undo(s, ci)
}

// cleanupAgent: an agent whose in-flight branch deletion could not be undone.
func (w *writer) cleanupAgent() {
	const s, agent = "agent-cleanup-7", "agent:gpt"
	branch := w.intercept(s, "git_push", sm.Compensable, `{"remote":"origin","delete":"feature/old-ui"}`,
		failing("cannot restore branch: ref was garbage collected"), agent)
	w.step(branch, sm.Executing, model.Change{Actor: agent})
	_, err := w.store.SetSessionState(w.ctx, s, sm.SessionFailed, model.Change{Actor: agent, Reason: "agent crashed"})
	w.check(err)
	w.undo(s, "bob@workstation")
}

// opsAgent: an irreversible call a person rejected, which halted the session.
func (w *writer) opsAgent() {
	const s, agent = "agent-ops-3", "agent:ops"
	note := w.intercept(s, "append_runbook", sm.Compensable, `{"page":"db-maintenance","line":"vacuum nightly"}`, cmd("true"), agent)
	w.run(note, agent, `{"ok":true}`)
	drop := w.intercept(s, "drop_database", sm.Irreversible, `{"database":"orders_prod"}`, nil, agent)
	w.step(drop, sm.Rejected, model.Change{Actor: "alice@laptop", Reason: "wrong environment: this is production"})
}

// nightly: a completed CI run whose re-run replayed every step.
func (w *writer) nightly() {
	const s, ci = "ci-nightly-88", "ci:cron"
	steps := []string{`{"argv":["make","test"]}`, `{"argv":["make","bench"]}`, `{"argv":["./publish-report"]}`}
	for _, args := range steps {
		id := w.intercept(s, "make", sm.Compensable, args, cmd("true"), ci)
		w.run(id, ci, `{"exit_code":0,"stdout":"ok\n","stderr":""}`)
	}
	for _, args := range steps {
		w.intercept(s, "make", sm.Compensable, args, nil, ci)
	}
	if w.err == nil {
		_, err := w.store.SetSessionState(w.ctx, s, sm.SessionCompleted, model.Change{Actor: ci})
		w.check(err)
	}
}

// Large shape: the benchmarks' log of 1,000,000 effects.
const (
	LargeSessions = 1000
	LargePer      = 1000
)

// WriteLarge makes (once) a log of LargeSessions sessions named load-0000...
// of LargePer pending effects each, with about 200 bytes of args, one call in
// 1,000 irreversible, in batches of 10,000 per transaction. A log already
// complete at path is kept.
func WriteLarge(ctx context.Context, path string) error {
	store := logaddr.File(path, logaddr.Options{})
	if s, err := store.GetSession(ctx, fmt.Sprintf("load-%04d", LargeSessions-1)); err == nil && s.Effects == LargePer {
		return nil
	}
	os.Remove(path)
	pad := strings.Repeat("x", 150)
	batch := make([]effectlog.InterceptRequest, 0, 10*LargePer)
	for s := 0; s < LargeSessions; s++ {
		for i := 0; i < LargePer; i++ {
			tier := sm.Compensable
			if i%1000 == 999 {
				tier = sm.Irreversible
			}
			batch = append(batch, effectlog.InterceptRequest{Session: fmt.Sprintf("load-%04d", s), Tool: "write_file", Tier: tier,
				Args: json.RawMessage(fmt.Sprintf(`{"path":"/srv/data/%d/%d.json","pad":"%s"}`, s, i, pad)), CreateSession: true, Actor: "bench"})
		}
		if len(batch) == cap(batch) || s == LargeSessions-1 {
			if _, err := store.InterceptMany(ctx, batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return nil
}
