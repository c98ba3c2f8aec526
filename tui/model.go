package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/saga"
	sm "github.com/undolog/undolog/statemachine"
)

type screen int

const (
	screenSessions screen = iota
	screenSession
)

type overlay int

const (
	overlayNone overlay = iota
	overlayHelp
	overlayMenu
	overlayPrompt
	overlayConfirmUndo
	overlayUndo
	overlayFilter
)

// Model is the root model: it routes keys to the screen or the open overlay,
// and results of I/O to the view they belong to.
type Model struct {
	// ctx bounds the log reads and writes its commands make.
	ctx  context.Context
	opts Options
	st   styles
	keys keyMap
	help help.Model

	width, height int
	screen        screen
	sessions      sessionsView
	session       sessionView

	overlay overlay
	menu    menuState
	prompt  promptState
	plan    saga.Plan
	undo    undoState
	filter  input

	status     string
	statusErr  bool
	loadFailed bool // the status is a load's error: the next load that works clears it
	follow     bool
	lastChange uint64 // the feed's position the screen shows
	seen       uint64 // the feed's position last read, shown or not
	primed     bool   // the first screen was loaded before the program ran
}

type menuState struct {
	effect  model.Effect
	options []sm.State
	cursor  int
}

type promptState struct {
	title    string
	question string   // what the input asks for
	args     []string // the effect's arguments, pretty and escaped
	top      int      // first args line shown
	input    input
	required bool
	submit   func(reason string) tea.Cmd
}

type undoState struct {
	session string
	lines   []string
	done    bool
	failed  bool // it stopped on an error
}

// Init loads the first screen, unless Run has, and starts watching for
// changes after the position it was read at.
func (m *Model) Init() tea.Cmd {
	// The footer's colours suit the terminal's background: the program asks
	// it (only the view does; no command asks the terminal anything).
	var bg tea.Cmd
	if m.st.color {
		bg = tea.RequestBackgroundColor
	}
	if m.primed {
		return tea.Batch(watchChanges(m.ctx, m.opts.Log, m.seen, m.opts.Refresh), bg)
	}
	return tea.Batch(firstLoad(m.ctx, m.opts.Log, m.reload()), bg)
}

// prime takes in the first load: the feed's position it was read after,
// then the screen. It returns what the screen asks for next (the selected
// effect's detail), but not the watch.
func (m *Model) prime(msg primeMsg) tea.Cmd {
	m.lastChange, m.seen = msg.position, msg.position
	_, cmd := m.Update(msg.screen)
	return cmd
}

// reload fetches what the current screen shows.
func (m *Model) reload() tea.Cmd {
	if m.screen == screenSessions {
		return loadSessions(m.ctx, m.opts.Log)
	}
	s := &m.session
	return loadEffects(m.ctx, m.opts.Log, s.id, s.effectFilter(), s.page, s.pageStart(s.page))
}

func (m *Model) setStatus(text string, err error) {
	m.loadFailed = false
	if err != nil {
		m.status, m.statusErr = textfmt.OneLine(err.Error()), true
		return
	}
	m.status, m.statusErr = text, false
}

// loaded takes a load's outcome: its error in the status, or, once a load
// works again (a server back), the status of the load that failed cleared.
func (m *Model) loaded(err error) bool {
	if err != nil {
		m.setStatus("", err)
		m.loadFailed = true
		return false
	}
	if m.loadFailed {
		m.setStatus("", nil)
	}
	return true
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.prompt.input.setWidth(m.fieldWidth(m.promptWidth()))
		m.filter.setWidth(m.filterWidth())
		return m, nil
	case tea.BackgroundColorMsg:
		m.st = newStyles(m.st.color, msg.IsDark())
		m.help.Styles = helpStyles(m.st.color, msg.IsDark())
		return m, nil
	case tickMsg:
		return m, checkChanges(m.ctx, m.opts.Log)
	case primeMsg:
		if msg.err != nil {
			m.setStatus("", msg.err)
			return m, tea.Tick(m.opts.Refresh, func(time.Time) tea.Msg { return primeAgainMsg{} })
		}
		return m, tea.Batch(m.prime(msg), watchChanges(m.ctx, m.opts.Log, msg.position, m.opts.Refresh))
	case primeAgainMsg:
		return m, firstLoad(m.ctx, m.opts.Log, m.reload())
	case changeMsg:
		if msg.err != nil {
			m.setStatus("", msg.err)
			return m, tick(m.opts.Refresh) // look again later
		}
		m.seen = msg.position
		next := watchChanges(m.ctx, m.opts.Log, msg.position, m.opts.Refresh)
		if !m.follow || msg.position == m.lastChange {
			return m, next
		}
		m.lastChange = msg.position
		return m, tea.Batch(m.reload(), next)
	case sessionsMsg:
		if !m.loaded(msg.err) {
			return m, nil
		}
		m.sessions.undone = msg.undone
		m.sessions.set(msg.sessions)
		return m, nil
	case effectsMsg:
		if !m.loaded(msg.err) {
			return m, nil
		}
		cmd := m.session.set(m.ctx, msg, m.opts.Log)
		m.closeStaleMenu()
		return m, cmd
	case detailMsg:
		if msg.err != nil {
			m.setStatus("", msg.err)
			return m, nil
		}
		if e := m.session.selected(); e != nil && e.ID == msg.detail.Effect.ID {
			d := msg.detail
			m.session.detail = &d
		}
		return m, nil
	case actionMsg:
		m.setStatus(msg.text, msg.err)
		return m, m.reload()
	case planMsg:
		if msg.err != nil {
			m.setStatus("", msg.err)
			return m, nil
		}
		if why := m.notHere(msg.plan); why != "" {
			m.setStatus("", errors.New(why))
			return m, nil
		}
		m.plan, m.overlay = msg.plan, overlayConfirmUndo
		return m, nil
	case undoLineMsg:
		m.undo.lines = append(m.undo.lines, msg.line)
		return m, listenUndo(msg.ch)
	case undoDoneMsg:
		m.undo.done = true
		if errors.Is(msg.err, saga.ErrPlanChanged) {
			// Nothing ran: the plan as it is now, to confirm again.
			m.overlay = overlayNone
			m.setStatus("", msg.err)
			return m, makePlan(m.ctx, m.opts.Log, m.undo.session)
		}
		if msg.err != nil {
			m.undo.failed = true
			m.undo.lines = append(m.undo.lines, "stopped: "+textfmt.OneLine(msg.err.Error()))
			m.setStatus("", msg.err)
			if id := msg.result.Failed; id != nil && errors.Is(msg.err, saga.ErrCompensationFailed) {
				// The view resolves it too: the way on is a key here.
				next := fmt.Sprintf("effect %d's undo failed: fix it by hand, then press R on it in session %s and undo again", *id, msg.result.Session)
				m.undo.lines = append(m.undo.lines, next)
				m.setStatus("", errors.New(next))
			}
		} else {
			line := fmt.Sprintf("session %s %s: %s", msg.result.Session, msg.result.State, msg.result.Counts())
			m.undo.lines = append(m.undo.lines, line)
			m.setStatus(line, nil)
		}
		return m, m.reload()
	case tea.KeyPressMsg:
		return m, m.handleKey(msg)
	case tea.PasteMsg:
		switch m.overlay {
		case overlayPrompt:
			return m, m.prompt.input.update(msg)
		case overlayFilter:
			return m, m.editFilter(msg)
		}
		return m, nil
	}
	return m, nil
}

// notHere says why a plan cannot be carried out from the view, where no
// operator answers a manual step and none resolves a blocked one: started,
// it would fail the step for good and halt the session. The command line
// can.
func (m *Model) notHere(p saga.Plan) string {
	cli := m.opts.CLI
	if cli == "" {
		cli = "undolog"
	}
	for _, s := range p.Steps {
		switch {
		case s.Action == saga.ActionBlocked:
			return fmt.Sprintf("effect %d %s failed before: fix it, then press R on it in its session (or %s resolve %d --reason WHAT_WAS_DONE), and undo again",
				s.Effect.ID, s.Effect.Tool, cli, s.Effect.ID)
		case s.Action == saga.ActionCompensate && s.Entry.Compensation.Kind == model.CompensationManual:
			return fmt.Sprintf("effect %d %s is undone by hand (a manual compensation): run %s undo %s in a shell, which asks you to confirm it",
				s.Effect.ID, s.Effect.Tool, cli, p.Session)
		}
	}
	return ""
}

func (m *Model) handleKey(msg tea.KeyPressMsg) tea.Cmd {
	if msg.String() == "ctrl+c" {
		return tea.Quit
	}
	// A key of several characters (text sent as one) is, outside text
	// inputs, one key per character.
	if runes := []rune(msg.Text); len(runes) > 1 && m.overlay != overlayPrompt && m.overlay != overlayFilter {
		var cmds []tea.Cmd
		for _, r := range runes {
			cmds = append(cmds, m.handleKey(tea.KeyPressMsg{Code: r, Text: string(r)}))
		}
		return tea.Batch(cmds...)
	}
	switch m.overlay {
	case overlayHelp:
		m.overlay = overlayNone
		return nil
	case overlayMenu:
		return m.menuKey(msg)
	case overlayPrompt:
		return m.promptKey(msg)
	case overlayFilter:
		return m.filterKey(msg)
	case overlayConfirmUndo:
		switch msg.String() {
		case "y", "Y":
			m.overlay = overlayUndo
			m.undo = undoState{session: m.plan.Session}
			return runUndo(m.ctx, m.opts.Log, m.plan, m.opts.Actor, m.opts.CLI)
		case "n", "N", "esc", "q":
			m.overlay = overlayNone
			m.setStatus("undo cancelled; nothing changed", nil)
		}
		return nil
	case overlayUndo:
		if m.undo.done {
			m.overlay = overlayNone
		}
		return nil
	}
	// An action's error goes with the next key: on another effect, or over
	// a dialog, it would seem to be about what is on screen then. A load's
	// (the log out of reach) stays until a load works.
	if m.statusErr && !m.loadFailed {
		m.setStatus("", nil)
	}
	k := m.keys
	switch {
	case key.Matches(msg, k.Quit):
		return tea.Quit
	case key.Matches(msg, k.Suspend):
		// The terminal is in raw mode: Ctrl-Z is a key, not a signal. The
		// program stops its process group; the command line's SIGTSTP
		// handler lets the log go first.
		return tea.Suspend
	case key.Matches(msg, k.Help):
		m.overlay = overlayHelp
		return nil
	case key.Matches(msg, k.Follow):
		m.follow = !m.follow
		m.setStatus(map[bool]string{true: "follow on", false: "follow off"}[m.follow], nil)
		if m.follow && m.seen != m.lastChange {
			m.lastChange = m.seen // catch up with what changed while not following
			return m.reload()
		}
		return nil
	}
	if m.screen == screenSessions {
		return m.sessionsKey(msg)
	}
	return m.sessionKey(msg)
}

func (m *Model) sessionsKey(msg tea.KeyPressMsg) tea.Cmd {
	k, v := m.keys, &m.sessions
	switch {
	case key.Matches(msg, k.Up):
		v.move(-1)
	case key.Matches(msg, k.Down):
		v.move(1)
	case key.Matches(msg, k.PageUp):
		v.move(-m.bodyHeight())
	case key.Matches(msg, k.PageDown):
		v.move(m.bodyHeight())
	case key.Matches(msg, k.Open):
		if s := v.selected(); s != nil {
			m.screen = screenSession
			m.session = sessionView{id: s.ID}
			m.setStatus("", nil)
			return m.reload()
		}
	case key.Matches(msg, k.Undo):
		if s := v.selected(); s != nil {
			return m.undoSession(s.ID, s.State)
		}
	case key.Matches(msg, k.Filter):
		m.openFilter()
	case key.Matches(msg, k.Back):
		return m.applyFilter("")
	}
	return nil
}

func (m *Model) sessionKey(msg tea.KeyPressMsg) tea.Cmd {
	k, v := m.keys, &m.session
	switch {
	case key.Matches(msg, k.Back) && v.filter != "":
		return m.applyFilter("") // esc clears the filter first, then goes back
	case key.Matches(msg, k.Back):
		m.screen = screenSessions
		m.sessions.selectID(v.id)
		m.setStatus("", nil)
		return m.reload()
	case key.Matches(msg, k.Tab):
		v.focusDetail = !v.focusDetail
	case key.Matches(msg, k.Up):
		return v.move(m.ctx, -1, m.opts.Log)
	case key.Matches(msg, k.Down):
		return v.move(m.ctx, 1, m.opts.Log)
	case key.Matches(msg, k.PageUp):
		return v.move(m.ctx, -m.tableHeight(), m.opts.Log)
	case key.Matches(msg, k.PageDown):
		return v.move(m.ctx, m.tableHeight(), m.opts.Log)
	case key.Matches(msg, k.Approve), key.Matches(msg, k.Reject):
		e := v.selected()
		if e == nil {
			return nil
		}
		to, verb := sm.Approved, "Approve"
		if key.Matches(msg, k.Reject) {
			to, verb = sm.Rejected, "Reject"
		}
		if e.Tier != sm.Irreversible || e.State != sm.Pending {
			m.setStatus("", fmt.Errorf("effect %d is %s %s: only a pending irreversible effect awaits a decision", e.ID, e.Tier, e.State))
			return nil
		}
		if why := v.undecidable(e.ID); why != "" {
			m.setStatus("", errors.New(why))
			return nil
		}
		// A reason is optional, for a rejection too, as on the command line:
		// the decision and who made it are recorded either way.
		title := fmt.Sprintf("%s effect %d (%s)?", verb, e.ID, e.Tool)
		if to == sm.Rejected {
			title += " Its session halts: it takes no new calls."
		}
		shown := *e
		m.openPrompt(title, false, e.Args, func(reason string) tea.Cmd {
			return decide(m.ctx, m.opts.Log, shown, to, m.opts.Actor, reason)
		})
	case key.Matches(msg, k.Resolve):
		e := v.selected()
		if e == nil {
			return nil
		}
		u, ok := v.entries[e.ID]
		if !ok || u.State != sm.EntryCompensationFailed {
			m.setStatus("", fmt.Errorf("effect %d: only a failed compensation is resolved, by saying what was done by hand", e.ID))
			return nil
		}
		// The same rule as `undolog resolve`: a reason is required, the log
		// (UndoStep) refuses any other entry.
		id := e.ID
		m.openPrompt(fmt.Sprintf("Resolve effect %d (%s)? Its compensation failed; the next undo walks on past it.", e.ID, e.Tool), true, e.Args,
			func(reason string) tea.Cmd { return resolveEntry(m.ctx, m.opts.Log, id, m.opts.Actor, reason) })
		m.prompt.question = "What was done by hand:"
	case key.Matches(msg, k.Transition):
		e := v.selected()
		if e == nil {
			return nil
		}
		options := allowedNext(*e, v.sess.State, v.undecidable(e.ID) == "")
		if len(options) == 0 {
			if len(sm.Next(e.Tier, e.State)) > 0 {
				m.setStatus("", fmt.Errorf("effect %d is %s (%s) and session %s is %s: it allows no transition of it", e.ID, e.State, e.Tier, v.sess.ID, v.sess.State))
				return nil
			}
			m.setStatus("", fmt.Errorf("effect %d is %s (%s), where it stays: no transition of the spec leaves that state", e.ID, e.State, e.Tier))
			return nil
		}
		m.menu = menuState{effect: *e, options: options}
		m.overlay = overlayMenu
	case key.Matches(msg, k.Undo):
		return m.undoSession(v.id, v.sess.State)
	case key.Matches(msg, k.Filter):
		m.openFilter()
	}
	return nil
}

// closeStaleMenu closes the transition menu when its effect moved since it
// opened (another process decided or stepped it): its choices were for the
// state it had.
func (m *Model) closeStaleMenu() {
	if m.overlay != overlayMenu {
		return
	}
	shown := m.menu.effect
	for _, e := range m.session.effects {
		if e.ID == shown.ID && e.State != shown.State {
			m.overlay = overlayNone
			m.setStatus("", fmt.Errorf("effect %d moved from %s to %s meanwhile: press t again for what it allows now", e.ID, shown.State, e.State))
			return
		}
	}
}

func (m *Model) menuKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	switch {
	case key.Matches(msg, k.Back), msg.String() == "q":
		m.overlay = overlayNone
	case key.Matches(msg, k.Up):
		m.menu.cursor = max(0, m.menu.cursor-1)
	case key.Matches(msg, k.Down):
		m.menu.cursor = min(len(m.menu.options)-1, m.menu.cursor+1)
	case key.Matches(msg, k.Open):
		e, to := m.menu.effect, m.menu.options[m.menu.cursor]
		m.openPrompt(fmt.Sprintf("Move effect %d (%s) %s -> %s?", e.ID, e.Tool, e.State, to), false, e.Args, func(reason string) tea.Cmd {
			return decide(m.ctx, m.opts.Log, e, to, m.opts.Actor, reason)
		})
	}
	return nil
}

// offers is what the log accepts for the selected effect: the footer's keys.
func (m *Model) offers() rowActions {
	if m.screen == screenSessions {
		s := m.sessions.selected()
		return rowActions{undo: s != nil && !s.State.IsTerminal()}
	}
	v := &m.session
	can := rowActions{undo: !v.sess.State.IsTerminal()}
	e := v.selected()
	if e == nil {
		return can
	}
	for _, to := range allowedNext(*e, v.sess.State, v.undecidable(e.ID) == "") {
		if to == sm.Approved || to == sm.Rejected {
			can.decide = true // a and r say it: t need not
		} else {
			can.transition = true
		}
	}
	u, ok := v.entries[e.ID]
	can.resolve = ok && u.State == sm.EntryCompensationFailed
	return can
}

// undoSession makes the plan to undo session id, in state, for the person
// to confirm; a session undone already is said so, as undo says it.
func (m *Model) undoSession(id string, state sm.SessionState) tea.Cmd {
	if state.IsTerminal() {
		m.setStatus(fmt.Sprintf("session %s is %s already: nothing to undo", id, state), nil)
		return nil
	}
	return makePlan(m.ctx, m.opts.Log, id)
}

// allowedNext is what the transition menu offers: the states the spec's
// table allows from the effect's tier and state, less those the log refuses
// in the session's state (statemachine: AcceptsEffects), so that no choice
// is refused after two dialogs.
func allowedNext(e model.Effect, session sm.SessionState, decidable bool) []sm.State {
	var out []sm.State
	for _, to := range sm.Next(e.Tier, e.State) {
		switch {
		case (to == sm.Approved || to == sm.Rejected) && !decidable:
			continue // its request timed out or was closed: nobody decides it now
		case to == sm.Executing && !session.AcceptsEffects():
			continue // a session that accepts no effects starts none
		case to == sm.Executing && e.Tier == sm.Irreversible && e.State == sm.Pending:
			continue // it awaits approval: only approved starts it
		case e.State == sm.Pending && e.Tier == sm.Irreversible && (to == sm.Approved || to == sm.Rejected) && !session.AcceptsEffects():
			continue // its approval requests are closed
		case to == sm.Replayed:
			continue // reached only by intercepting a repeat
		}
		out = append(out, to)
	}
	return out
}

// openPrompt asks for a reason before submit; args are the arguments of
// the effect decided on, shown in the dialog.
func (m *Model) openPrompt(title string, required bool, args []byte, submit func(string) tea.Cmd) {
	ph, q := "optional", "Reason (optional):"
	if required {
		ph, q = "required", "Reason:"
	}
	var lines []string
	if len(args) > 0 {
		lines = prettyJSON(args)
	}
	m.prompt = promptState{title: title, question: q, args: lines, input: newInput(ph, m.st, m.fieldWidth(m.promptWidth())), required: required, submit: submit}
	m.overlay = overlayPrompt
}

func (m *Model) promptKey(msg tea.KeyPressMsg) tea.Cmd {
	switch msg.String() {
	case "esc":
		m.overlay = overlayNone
		m.setStatus("cancelled; nothing changed", nil)
		return nil
	case "enter":
		reason := strings.TrimSpace(m.prompt.input.Value())
		if reason == "" && m.prompt.required {
			m.setStatus("", fmt.Errorf("a reason is required"))
			return nil
		}
		m.overlay = overlayNone
		return m.prompt.submit(reason)
	case "up":
		m.prompt.top = max(0, m.prompt.top-1)
		return nil
	case "down":
		m.prompt.top++ // the view holds it to the end
		return nil
	case "pgup":
		m.prompt.top = max(0, m.prompt.top-m.bodyHeight()/2)
		return nil
	case "pgdown":
		m.prompt.top += m.bodyHeight() / 2
		return nil
	}
	return m.prompt.input.update(msg)
}

// openFilter opens the filter's line, holding the filter now: what is typed
// there applies as it is typed.
func (m *Model) openFilter() {
	m.filter = newInput(m.filterWhat(), m.st, m.filterWidth())
	m.filter.field.Prompt = "/ "
	m.filter.field.SetValue(typable(m.currentFilter())) // shown as it holds it
	m.filter.field.CursorEnd()
	m.filter.setWidth(m.filterWidth())
	m.overlay = overlayFilter
}

func (m *Model) currentFilter() string {
	if m.screen == screenSessions {
		return m.sessions.filter
	}
	return m.session.filter
}

func (m *Model) filterWhat() string {
	if m.screen == screenSessions {
		return "session name or state"
	}
	return "tool name or state"
}

// filterKey edits the filter live: enter keeps it, esc clears it.
func (m *Model) filterKey(msg tea.KeyPressMsg) tea.Cmd {
	switch msg.String() {
	case "esc":
		m.overlay = overlayNone
		return m.applyFilter("")
	case "enter":
		m.overlay = overlayNone
		return nil
	}
	return m.editFilter(msg)
}

// editFilter hands a key or a paste to the filter's line and applies what
// it then holds.
func (m *Model) editFilter(msg tea.Msg) tea.Cmd {
	cmd := m.filter.update(msg)
	return tea.Batch(cmd, m.applyFilter(m.filter.Value()))
}

// applyFilter makes text the screen's filter, from the top of its list; the
// sessions read are filtered at once, a session's effects read again
// through the log's index.
func (m *Model) applyFilter(text string) tea.Cmd {
	text = strings.TrimSpace(text)
	if text == m.currentFilter() {
		return nil
	}
	if m.screen == screenSessions {
		m.sessions.filter = text
		m.sessions.cursor, m.sessions.offset = 0, 0
		m.sessions.set(m.sessions.all)
		m.sessions.cursor = 0
		return nil
	}
	m.session.filter = text
	m.session.page, m.session.pageStarts, m.session.cursor, m.session.offset = 0, nil, 0, 0
	return m.reload()
}

// promptWidth is the width of its dialog inside the border; filterWidth
// the filter line's, its prompt included.
func (m *Model) promptWidth() int { return min(m.width-2, 100) }
func (m *Model) filterWidth() int { return max(8, min(m.width-ansi.StringWidth(filterHint), 60)) }

// fieldWidth is the width an input has in a dialog w cells wide: all but
// the padding.
func (m *Model) fieldWidth(w int) int { return w - m.st.box.GetHorizontalPadding() }

// bodyHeight is the number of lines between the title (and the filter's
// line, while it is edited) and the status line.
func (m *Model) bodyHeight() int {
	h := m.height - 2 - len(m.statusText())
	if m.overlay == overlayFilter {
		h--
	}
	return max(3, h)
}

// tableHeight is the number of effect rows the session screen shows at most.
func (m *Model) tableHeight() int { return max(3, (m.bodyHeight()-7)/2) }

// tableRows is the number it shows: a short session leaves the rest of the
// screen to the detail, where an approver reads the arguments.
func (m *Model) tableRows() int {
	if m.session.page == 0 && m.session.next == 0 {
		return max(1, min(m.tableHeight(), len(m.session.effects)))
	}
	return m.tableHeight()
}
