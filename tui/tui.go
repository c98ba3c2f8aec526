// Package tui owns `undolog tui`: an interactive Bubble Tea view of the effect
// log to review sessions, approve or reject waiting calls, step effects through
// the transitions their tier allows, and undo sessions.
package tui

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

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
	// Location is the zone history's times are shown in; nil: the local one.
	Location *time.Location
	Color    bool
	// Refresh is how often the view looks for changes made by other
	// processes on a log that cannot tell of them (a file); zero means
	// 500ms. On one that can (PostgreSQL) it looks when told.
	Refresh time.Duration
	// Width and Height are the terminal's size, if known: the first frame
	// is painted before the program tells the model (default 80x24).
	Width, Height int
}

// Run shows the view on the terminal until the user quits.
//
// The first screen is loaded before the program starts and painted at
// once: bubbletea's renderer writes frames on a 60 fps ticker, so its
// first would go out one tick (16.7 ms) after it starts, and entering the
// alternate screen itself it would clear the one painted here. Run enters
// that screen itself, and the renderer (inline, from the top left corner)
// draws over the same lines; Run leaves the screen when the program ends.
// The first paint's colours are brought down to the terminal's profile as
// the renderer's are.
func Run(ctx context.Context, opts Options, in io.Reader, out io.Writer) error {
	m := New(ctx, opts)
	frame, _ := m.firstFrame() // a failed load shows in the status line, as later ones do
	profile := colourProfile(out)
	var shown strings.Builder
	io.WriteString(&colorprofile.Writer{Forward: &shown, Profile: profile}, frame)
	io.WriteString(out, ansi.HideCursor+ansi.SetAltScreenSaveCursorMode+ansi.EraseEntireScreen+ansi.CursorHomePosition+
		paintLines(shown.String(), m.width, m.height)+ansi.CursorHomePosition)
	defer io.WriteString(out, ansi.ResetAltScreenSaveCursorMode)
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithColorProfile(profile))
	_, err := p.Run()
	if err == tea.ErrProgramKilled && ctx.Err() != nil {
		return nil
	}
	return err
}

// colourProfile is the colours out shows. Stdout's lipgloss detected as the
// program started; detecting again would run `tmux info` again in tmux.
func colourProfile(out io.Writer) colorprofile.Profile {
	if out == io.Writer(os.Stdout) {
		return lipgloss.Writer.Profile
	}
	return colorprofile.Detect(out, os.Environ())
}

// paintLines is frame as the renderer writes it: at most height lines, each
// cut to width and cleared to its end.
func paintLines(frame string, width, height int) string {
	lines := strings.Split(frame, "\n")
	if len(lines) > height {
		lines = lines[len(lines)-height:]
	}
	for i, l := range lines {
		l = ansi.Truncate(l, width, "")
		if ansi.StringWidth(l) < width {
			l += ansi.EraseLineRight
		}
		lines[i] = l
	}
	return strings.Join(lines, "\r\n")
}

// New builds the root model; its commands read and write the log under ctx.
func New(ctx context.Context, opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 500 * time.Millisecond
	}
	// The help's colours are for a dark background until the terminal
	// says otherwise (Init asks it).
	keysHelp := help.New()
	keysHelp.Styles = helpStyles(opts.Color, true)
	m := &Model{ctx: ctx, opts: opts, st: newStyles(opts.Color, true), keys: newKeyMap(), help: keysHelp,
		follow: true, width: 80, height: 24}
	if opts.Width > 0 && opts.Height > 0 {
		m.width, m.height = opts.Width, opts.Height
	}
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
	return New(ctx, opts).firstFrame()
}

// firstFrame loads the first screen (the change feed's position, then what
// the screen shows and the selected effect's detail) and renders it; the
// model then starts from it: its Init only watches for changes.
func (m *Model) firstFrame() (string, error) {
	msg := firstLoad(m.ctx, m.opts.Log, m.reload())().(primeMsg)
	if msg.err != nil {
		m.loaded(msg.err)
		return m.render(), msg.err
	}
	if cmd := m.prime(msg); cmd != nil {
		if next := cmd(); next != nil {
			m.Update(next)
		}
	}
	// A screen that failed to load is loaded again by Init.
	m.primed = !m.statusErr
	if m.statusErr {
		return m.render(), errors.New(m.status)
	}
	return m.render(), nil
}
