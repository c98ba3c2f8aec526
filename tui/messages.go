package tui

import (
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/saga"
)

// Messages carry the results of I/O done in tea.Cmds back to Update.

type sessionsMsg struct {
	sessions []model.Session
	undone   map[string]textfmt.UndoCounts // session id: what an undo did to its effects
	err      error
}

type effectsMsg struct {
	session model.Session
	effects []model.Effect
	entries map[uint64]model.UndoEntry
	page    int
	next    uint64
	err     error
}

type detailMsg struct {
	detail model.EffectDetail
	err    error
}

// primeMsg is the first load: the change feed's position, then the
// screen's own message read after it.
type primeMsg struct {
	position uint64
	screen   tea.Msg
	err      error
}

// primeAgainMsg asks for the first load again after a failed one.
type primeAgainMsg struct{}

// tickMsg asks for a look at the change feed again after a failed one.
type tickMsg time.Time

type changeMsg struct {
	position uint64
	err      error
}

// actionMsg reports a decision or transition made from the view.
type actionMsg struct {
	text string
	err  error
}

type planMsg struct {
	plan saga.Plan
	err  error
}

type undoLineMsg struct {
	line string
	ch   <-chan undoEvent
}

type undoDoneMsg struct {
	result saga.Result
	err    error
}

// undoEvent is what the undo goroutine sends: a progress line or the end.
type undoEvent struct {
	line string
	done *undoDoneMsg
}
