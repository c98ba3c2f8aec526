package cmd

import (
	"context"
	"fmt"

	"github.com/undolog/undolog/internal/textfmt"
)

// agentSessions are the sessions of the coding agent this command runs
// inside, if it runs in one: Claude Code gives the shells of its Bash tool
// CLAUDECODE=1 and CLAUDE_CODE_SESSION_ID, and its hook records the calls
// under $UNDOLOG_SESSION or that id. None outside an agent.
func (f *Factory) agentSessions() []string {
	id := f.Getenv("CLAUDE_CODE_SESSION_ID")
	if f.Getenv("CLAUDECODE") == "" && id == "" {
		return nil
	}
	var sessions []string
	for _, s := range []string{id, f.Getenv("UNDOLOG_SESSION")} {
		if s != "" {
			sessions = append(sessions, s)
		}
	}
	return sessions
}

// refuseAgentDecision refuses a decision (what) on session's calls made
// from inside the agent whose calls they are: the agent must not approve
// its own call. A speed bump only (the agent's shell can unset the
// variables); the policy, which holds undolog's own commands in an agent's
// shell for a person, is the guard.
func (f *Factory) refuseAgentDecision(session, what string) error {
	for _, s := range f.agentSessions() {
		if s == session {
			return &exitError{code: ExitAgentDecision, msg: fmt.Sprintf(
				"%s refused: this shell runs inside the coding agent whose session (%s) it is; a person decides from a shell of their own",
				what, textfmt.Escape(session))}
		}
	}
	return nil
}

// refuseAgentEffectDecision is refuseAgentDecision for effect id's session.
func (f *Factory) refuseAgentEffectDecision(ctx context.Context, id uint64, what string) error {
	if len(f.agentSessions()) == 0 {
		return nil
	}
	store, err := f.ExistingLog()
	if err != nil {
		return err
	}
	d, err := store.GetEffect(ctx, id)
	if err != nil {
		return err
	}
	return f.refuseAgentDecision(d.Effect.Session, fmt.Sprintf("%s of effect %d", what, id))
}
