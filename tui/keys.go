package tui

import "charm.land/bubbles/v2/key"

// keyMap is every key the view answers to. Each screen offers (in the footer
// and under `?`) only the keys that do something there.
type keyMap struct {
	Up, Down, PageUp, PageDown key.Binding
	Open, Back, Tab            key.Binding
	Approve, Reject, Resolve   key.Binding
	Transition, Undo           key.Binding
	Filter, Follow             key.Binding
	Help, Suspend, Quit        key.Binding
}

func newKeyMap() keyMap {
	return keyMap{
		Up:         key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:       key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:     key.NewBinding(key.WithKeys("pgup", "b"), key.WithHelp("pgup", "page up")),
		PageDown:   key.NewBinding(key.WithKeys("pgdown", "space"), key.WithHelp("pgdn", "page down")),
		Open:       key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open")),
		Back:       key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Tab:        key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "table/detail")),
		Approve:    key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "approve")),
		Reject:     key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reject")),
		Resolve:    key.NewBinding(key.WithKeys("R"), key.WithHelp("R", "resolve")),
		Transition: key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "transition")),
		Undo:       key.NewBinding(key.WithKeys("u"), key.WithHelp("u", "undo session")),
		Filter:     key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Follow:     key.NewBinding(key.WithKeys("f"), key.WithHelp("f", "follow on/off")),
		Help:       key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Suspend:    key.NewBinding(key.WithKeys("ctrl+z"), key.WithHelp("ctrl+z", "suspend")),
		Quit:       key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
}

// shortHelp is the footer of screen s, most useful first: the footer drops
// keys from the end when the terminal is narrow (help and quit it keeps).
// It offers only what the log accepts for the selected session or effect
// (offers, see rowActions).
func (k keyMap) shortHelp(s screen, can rowActions) []key.Binding {
	if s == screenSessions {
		if can.undo {
			return []key.Binding{k.Open, k.Undo, k.Filter}
		}
		return []key.Binding{k.Open, k.Filter}
	}
	var out []key.Binding
	if can.decide {
		out = append(out, k.Approve, k.Reject)
	}
	if can.resolve {
		out = append(out, k.Resolve)
	}
	if can.transition {
		out = append(out, k.Transition)
	}
	if can.undo {
		out = append(out, k.Undo)
	}
	return append(out, k.Tab, k.Back, k.Filter)
}

// rowActions are the actions the log accepts for the selected session or
// effect.
type rowActions struct {
	decide     bool // approve and reject: a pending irreversible call whose request is open
	resolve    bool // its compensation failed: a person records the fix by hand
	transition bool // the spec's table leaves its state, in its session's state
	undo       bool // its session (or the selected session) is not undone yet
}

// fullHelp is the `?` screen of screen s.
func (k keyMap) fullHelp(s screen) [][]key.Binding {
	if s == screenSessions {
		return [][]key.Binding{
			{k.Up, k.Down, k.PageUp, k.PageDown, k.Open},
			{k.Undo, k.Filter, k.Follow},
			{k.Help, k.Suspend, k.Quit},
		}
	}
	return [][]key.Binding{
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Tab, k.Back},
		{k.Approve, k.Reject, k.Resolve, k.Transition, k.Undo},
		{k.Filter, k.Follow, k.Help, k.Suspend, k.Quit},
	}
}
