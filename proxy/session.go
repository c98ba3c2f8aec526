package proxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/lifecycle"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// The proxy's session: Proxy.Session names it (pinned by --session or
// UNDOLOG_SESSION, or a new name), and it is made on the first logged call,
// not before: a proxy that logs nothing writes nothing. A session that has
// ended (completed, failed, undone) gets a successor, so that calls go on:
// S.2, then S.3, each made with `follows: PREVIOUS` in its meta, the same
// names for every proxy pinned to S (the one whose create comes second
// finds it made and uses it). A halted session is a person's to resume:
// until then every logged call gets a tool error that says so.

// successorName is the n-th session of the chain that starts at base.
func successorName(base string, n int) string {
	if n == 1 {
		return base
	}
	return base + "." + strconv.Itoa(n)
}

// MetaFollows is the session meta key that names the session a successor
// follows.
const MetaFollows = "follows"

// logCall registers the call in the proxy's session, waiting first for
// the answers of the same call still being recorded. refusal, if not "",
// is the tool error to answer with: the session is halted or being undone,
// and nothing was logged.
func (p *Proxy) logCall(ctx context.Context, lc *lifecycle.Lifecycle, req effectlog.InterceptRequest) (call *lifecycle.Call, refusal string, err error) {
	if req.RunAgainAnswered {
		p.answers.wait(ctx, answerKeyOf(ctx, req.Tool))
	}
	for try := 0; ; try++ {
		session, refusal, err := p.callSession(ctx)
		if err != nil || refusal != "" {
			return nil, refusal, err
		}
		req.Session = session
		call, err = lc.Intercept(ctx, req)
		// The session ended (or went) since it was chosen: choose again.
		if try < 2 && (errors.Is(err, model.ErrSessionNotActive) || errors.Is(err, model.ErrNotFound)) {
			p.chosen.forget(session)
			continue
		}
		return call, "", err
	}
}

// sessionChoice is the session the proxy's logged calls go in, once
// chosen: one call at a time chooses, and the calls after it take its
// choice until it is forgotten.
type sessionChoice struct {
	mu      sync.Mutex
	current string
}

// get returns the session chosen, "" before.
func (c *sessionChoice) get() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current
}

// forget drops the choice if it is id: the next call chooses again.
func (c *sessionChoice) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current == id {
		c.current = ""
	}
}

// choose returns the session chosen, else the one pick gives, which is
// then the choice (unless pick refused or failed). pick runs under the
// lock: two calls never choose at once.
func (c *sessionChoice) choose(pick func() (id, refusal string, err error)) (id, refusal string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current != "" {
		return c.current, "", nil
	}
	id, refusal, err = pick()
	if err == nil && refusal == "" {
		c.current = id
	}
	return id, refusal, err
}

// CurrentSession is the session the proxy's logged calls go in: Session,
// or a successor of it, once a call was logged; "" before.
func (p *Proxy) CurrentSession() string { return p.chosen.get() }

// callSession is the session the next logged call goes in, made if need
// be, or the refusal a halted one gives.
func (p *Proxy) callSession(ctx context.Context) (id, refusal string, err error) {
	return p.chosen.choose(func() (string, string, error) {
		p.failAbandonedRounds(ctx)
		return p.pickSession(ctx)
	})
}

// failAbandonedRounds fails the calls any proxy left awaiting its client's
// input when it died, in whichever session: their server never acted, and
// their client's retry may come to another session (an unpinned proxy's
// new one) as a new call, so that only a sweep of the whole log ends them.
func (p *Proxy) failAbandonedRounds(ctx context.Context) {
	failed, err := p.lifecycle().FailAbandonedRounds(ctx, p.actor())
	if err != nil {
		p.note("the calls abandoned between input rounds were not failed: %v", err)
	}
	for eid, why := range failed {
		p.note("effect %d: %s; it failed and runs again when called again", eid, why)
	}
}

// pickSession finds the session of the chain that takes calls, making it
// if need be, or the refusal a halted one gives.
func (p *Proxy) pickSession(ctx context.Context) (id, refusal string, err error) {
	prev, prevState, raced := "", sm.SessionState(""), 0
	for n := 1; ; n++ {
		id := successorName(p.Session, n)
		s, err := p.Log.GetSession(ctx, id)
		if errors.Is(err, model.ErrNotFound) {
			meta := map[string]string{"via": "proxy"}
			if prev != "" {
				meta[MetaFollows] = prev
			}
			_, err = p.Log.CreateSession(ctx, effectlog.NewSession{ID: id, Meta: meta, Upstream: p.Upstream, UpstreamDir: p.dir(), UpstreamEnv: p.stateEnv(), Actor: p.SessionActor})
			if errors.Is(err, model.ErrConflict) && raced < 3 {
				raced++ // another proxy made it first: look at it
				n--
				continue
			}
			if err != nil {
				return "", "", err
			}
			p.announce(id, prev, prevState)
			return id, "", nil
		} else if err != nil {
			return "", "", err
		}
		if n > 1 && s.Meta[MetaFollows] != prev {
			continue // a session of that name that is not of this chain
		}
		switch s.State {
		case sm.SessionActive, sm.SessionAwaitingApproval:
			if len(p.Upstream) > 0 {
				if _, err := p.Log.SetUpstreamAt(ctx, id, p.Upstream, p.dir(), p.stateEnv()); err != nil {
					return "", "", err
				}
			}
			p.announce(id, prev, prevState)
			return id, "", nil
		case sm.SessionHalted, sm.SessionCompensating:
			return "", p.stopped(ctx, s), nil
		}
		prev, prevState = id, s.State // ended: its successor takes the calls
	}
}

// stateEnv is what locates the upstream's state here: each variable of
// StateEnv with its value, or nil where it is unset.
func (p *Proxy) stateEnv() model.StateEnv {
	if len(p.StateEnv) == 0 {
		return nil
	}
	env := make(model.StateEnv, len(p.StateEnv))
	for _, name := range p.StateEnv {
		if v, ok := os.LookupEnv(name); ok {
			env[name] = &v
		} else {
			env[name] = nil
		}
	}
	return env
}

// announce says which session takes the calls, with how to undo it, when
// it is chosen at a call: a session that is never made is never named as
// one to undo.
func (p *Proxy) announce(id, prev string, prevState sm.SessionState) {
	if prev != "" {
		p.note("session %s is %s: calls go on in session %s, which follows it (undo it with: %s undo %s)", prev, prevState, id, p.cli(), id)
	} else {
		p.note("calls are logged in session %s (undo it with: %s undo %s)", id, p.cli(), id)
	}
}

// stopped is the tool error for a call in session s, halted or being undone.
func (p *Proxy) stopped(ctx context.Context, s model.Session) string {
	if s.State == sm.SessionCompensating {
		return fmt.Sprintf("undolog: session %s is being undone; no call is logged or made until the undo ends, and calls then go on in a session that follows it", s.ID)
	}
	if !haltedByUndo(ctx, p.Log, s.ID) {
		why := ""
		if s.Reason != "" {
			why = " (" + s.Reason + ")"
		}
		return fmt.Sprintf("undolog: session %s is halted: a person rejected one of its calls%s. No call is logged or made until a person resumes it: "+
			"`%s session resume %s --as NAME --reason TEXT`", s.ID, why, p.cli(), s.ID)
	}
	return fmt.Sprintf("undolog: session %s is halted: its undo stopped (%s). No call is logged or made until the undo is finished (`%s undo %s --yes`); "+
		"calls then go on in a session that follows it", s.ID, s.Reason, p.cli(), s.ID)
}

// haltedByUndo tells whether halted session id was halted by its undo (a
// compensation that failed for good) rather than by a rejection.
func haltedByUndo(ctx context.Context, log effectlog.Log, id string) bool {
	hist, err := log.SessionHistory(ctx, id)
	if err != nil {
		return false
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if r := hist[i]; r.To == string(sm.SessionHalted) && r.From != r.To {
			return r.From == string(sm.SessionCompensating)
		}
	}
	return false
}
