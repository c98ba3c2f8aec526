package tui

import (
	"context"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/internal/textfmt"
	"github.com/undolog/undolog/model"
	sm "github.com/undolog/undolog/statemachine"
)

// sessionsView is the list of sessions, newest first.
type sessionsView struct {
	all            []model.Session
	list           []model.Session               // after the filter
	undone         map[string]textfmt.UndoCounts // session id: what an undo did to its effects
	filter         string
	cursor, offset int
	loaded         bool
	want           string // the session the cursor goes to once listed (selectID)
}

func (v *sessionsView) set(list []model.Session) {
	keep := v.want
	if s := v.selected(); s != nil && keep == "" {
		keep = s.ID
	}
	v.want = ""
	v.all, v.loaded = list, true
	v.list = v.list[:0]
	for _, s := range list {
		if v.filter == "" || strings.Contains(s.ID, v.filter) || strings.HasPrefix(string(s.State), v.filter) { // "act": active
			v.list = append(v.list, s)
		}
	}
	v.cursor = 0
	for i, s := range v.list {
		if s.ID == keep {
			v.cursor = i
		}
	}
}

// selectID puts the cursor on session id, now if the list holds it, else
// once it is listed: back from a session's screen, the keys act on the
// session just seen.
func (v *sessionsView) selectID(id string) {
	v.want = id
	for i, s := range v.list {
		if s.ID == id {
			v.cursor = i
		}
	}
}

func (v *sessionsView) selected() *model.Session {
	if v.cursor < 0 || v.cursor >= len(v.list) {
		return nil
	}
	return &v.list[v.cursor]
}

func (v *sessionsView) move(n int) {
	v.cursor = max(0, min(len(v.list)-1, v.cursor+n))
}

// sessionView is one session: a page of its effects, oldest first, and the
// detail of the selected one. Pages are read through the session index, so a
// session of any size costs one page of memory.
type sessionView struct {
	id          string
	sess        model.Session
	effects     []model.Effect
	entries     map[uint64]model.UndoEntry
	cursor      int
	offset      int
	page        int
	pageStarts  []uint64 // pageStarts[i]: the id page i starts after
	next        uint64   // cursor of the page after this one; 0: last page
	filter      string
	detail      *model.EffectDetail
	detailView  viewport.Model // the detail's pane; the view sizes it
	focusDetail bool
	loaded      bool
	// wantLast selects the last row once a previous page arrives.
	wantLast bool
}

func (v *sessionView) pageStart(page int) uint64 {
	if page < len(v.pageStarts) {
		return v.pageStarts[page]
	}
	return 0
}

func (v *sessionView) effectFilter() effectlog.EffectFilter {
	var f effectlog.EffectFilter
	if v.filter == "" {
		return f
	}
	if st, err := sm.ParseState(v.filter); err == nil {
		f.State = st
	} else {
		f.Tool = v.filter
	}
	return f
}

// set takes a loaded page and asks for the selected effect's detail.
func (v *sessionView) set(ctx context.Context, msg effectsMsg, store effectlog.Log) tea.Cmd {
	var keep uint64
	if e := v.selected(); e != nil && msg.page == v.page {
		keep = e.ID
	}
	v.sess, v.effects, v.entries, v.page, v.next, v.loaded = msg.session, msg.effects, msg.entries, msg.page, msg.next, true
	for len(v.pageStarts) <= v.page+1 {
		v.pageStarts = append(v.pageStarts, 0)
	}
	v.pageStarts[v.page+1] = msg.next
	switch {
	case v.wantLast:
		v.cursor, v.wantLast = len(v.effects)-1, false
	case keep != 0:
		for i, e := range v.effects {
			if e.ID == keep {
				v.cursor = i
			}
		}
	}
	v.cursor = max(0, min(len(v.effects)-1, v.cursor))
	if e := v.selected(); e != nil {
		return loadDetail(ctx, store, e.ID)
	}
	v.detail = nil
	return nil
}

// undecidable says why effect id's approval request can no longer be
// decided (it timed out, or its session closed it), as its loaded detail
// shows; "" while it waits, or before the detail is read (the log answers
// then).
func (v *sessionView) undecidable(id uint64) string {
	d := v.detail
	if d == nil || d.Effect.ID != id || d.Approval == nil {
		return ""
	}
	switch a := d.Approval; a.Outcome {
	case model.ApprovalTimedOut:
		return fmt.Sprintf("effect %d's approval request timed out: nobody can decide it now; the same call run again asks again", id)
	case model.ApprovalClosed:
		return fmt.Sprintf("effect %d's approval request was closed (%s): nobody can decide it now", id, a.Decision)
	}
	return ""
}

func (v *sessionView) selected() *model.Effect {
	if v.cursor < 0 || v.cursor >= len(v.effects) {
		return nil
	}
	return &v.effects[v.cursor]
}

// move moves the selection (or scrolls the detail pane when it has the
// focus), crossing into the next or previous page at the ends.
func (v *sessionView) move(ctx context.Context, n int, store effectlog.Log) tea.Cmd {
	if v.focusDetail {
		if n > 0 {
			v.detailView.ScrollDown(n)
		} else {
			v.detailView.ScrollUp(-n)
		}
		return nil
	}
	target := v.cursor + n
	switch {
	case target >= len(v.effects) && v.next != 0:
		v.page++
		v.cursor, v.offset = 0, 0
		return loadEffects(ctx, store, v.id, v.effectFilter(), v.page, v.pageStart(v.page))
	case target < 0 && v.page > 0:
		v.page--
		v.wantLast, v.offset = true, 0
		return loadEffects(ctx, store, v.id, v.effectFilter(), v.page, v.pageStart(v.page))
	}
	target = max(0, min(len(v.effects)-1, target))
	if target == v.cursor {
		return nil
	}
	v.cursor = target
	v.detailView.SetYOffset(0)
	if e := v.selected(); e != nil {
		return loadDetail(ctx, store, e.ID)
	}
	return nil
}
