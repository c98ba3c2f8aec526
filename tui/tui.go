// Package tui owns `undolog tui`: an interactive Bubble Tea view of the effect
// log to review sessions, approve or reject waiting calls, step effects through
// the transitions their tier allows, and undo sessions.
package tui

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/charmbracelet/bubbles/help"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/undolog/undolog/effectlog"
)

// Options configure the view.
type Options struct {
	Log effectlog.Log
	// Address names the log in the title (a PostgreSQL URL without its
	// password): which log a decision goes to.
	Address string
	// CLI starts the commands that hints name ("undolog --log ADDR" when
	// the log is not the default); "" means "undolog".
	CLI     string
	Session string // open this session first; empty: the sessions screen
	Actor   string // recorded in history for decisions made here
	Now     func() time.Time
	Color   bool
	// Refresh is how often the view looks for changes made by other
	// processes on a log that cannot tell of them (a file); zero means
	// 500ms. On one that can (PostgreSQL) it looks when told.
	Refresh time.Duration
	// Output is where the renderer writes (for colour detection).
	Output io.Writer
}

// Run shows the view on the terminal until the user quits.
func Run(ctx context.Context, opts Options, in io.Reader, out io.Writer) error {
	opts.Output = out
	p := tea.NewProgram(New(ctx, opts), tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen())
	_, err := p.Run()
	if err == tea.ErrProgramKilled && ctx.Err() != nil {
		return nil
	}
	return err
}

// New builds the root model; its commands read and write the log under ctx.
func New(ctx context.Context, opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 500 * time.Millisecond
	}
	r := lipgloss.DefaultRenderer()
	if opts.Output != nil {
		r = lipgloss.NewRenderer(opts.Output)
	}
	m := &Model{ctx: ctx, opts: opts, st: newStyles(r, opts.Color), keys: newKeyMap(), help: help.New(), follow: true, width: 80, height: 24}
	m.help.Width = m.width
	if opts.Session != "" {
		m.screen = screenSession
		m.session = sessionView{id: opts.Session}
	}
	return m
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// FirstFrame builds the view, loads its first screen and renders it once,
// synchronously: what a person waits for when the view opens.
func FirstFrame(ctx context.Context, opts Options) (string, error) {
	m := New(ctx, opts)
	var msg tea.Msg
	if m.screen == screenSessions {
		msg = loadSessions(ctx, opts.Log)()
	} else {
		msg = loadEffects(ctx, opts.Log, m.session.id, effectlog.EffectFilter{}, 0, 0)()
	}
	if _, cmd := m.Update(msg); cmd != nil {
		if next := cmd(); next != nil {
			m.Update(next)
		}
	}
	if m.statusErr {
		return "", errors.New(m.status)
	}
	return m.View(), nil
}
