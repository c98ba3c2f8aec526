package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"sync"
)

// idSet is a set of JSON-RPC ids, known by their value (idKey), under its
// own lock: the requests of one side the other has not answered yet.
type idSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

// add puts id in the set; false if it is there already.
func (s *idSet) add(id json.RawMessage) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[string]bool{}
	}
	if s.ids[idKey(id)] {
		return false
	}
	s.ids[idKey(id)] = true
	return true
}

// remove takes id out of the set, if it is there.
func (s *idSet) remove(id json.RawMessage) { s.take(id) }

// take removes id from the set; false if it was not there.
func (s *idSet) take(id json.RawMessage) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ids[idKey(id)] {
		return false
	}
	delete(s.ids, idKey(id))
	return true
}

// awaitedAnswers routes the server's answers the proxy takes itself, by
// id: those to its own requests (captures, tool lists) and to the logged
// calls it forwards. Any other answer goes on to the client.
type awaitedAnswers struct {
	mu      sync.Mutex
	waiting map[string]chan message
	seq     int64
	// base is the random part of the ids of the proxy's own requests: a
	// client that could send a request with the same id would have its
	// answer taken for the proxy's (a capture that says a file did not
	// exist).
	base string
}

// own returns the id of a new request of the proxy's own, and the channel
// its answer comes on.
func (a *awaitedAnswers) own() (json.RawMessage, chan message) {
	a.mu.Lock()
	if a.base == "" {
		var b [12]byte
		rand.Read(b[:])
		a.base = hex.EncodeToString(b[:])
	}
	a.seq++
	id := json.RawMessage(strconv.Quote("undolog-" + a.base + "-" + strconv.FormatInt(a.seq, 10)))
	a.mu.Unlock()
	return id, a.expect(id)
}

// expect returns the channel the answer to id comes on; it is closed if the
// answer cannot come (the server is gone, or its answer was lost).
func (a *awaitedAnswers) expect(id json.RawMessage) chan message {
	ch := make(chan message, 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting == nil {
		a.waiting = map[string]chan message{}
	}
	a.waiting[idKey(id)] = ch
	return ch
}

// forget stops waiting for the answer to id.
func (a *awaitedAnswers) forget(id json.RawMessage) {
	a.take(id)
}

// take returns the channel the answer to id is awaited on, and stops
// waiting for it; false if the proxy awaits no answer to id.
func (a *awaitedAnswers) take(id json.RawMessage) (chan message, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, ok := a.waiting[idKey(id)]
	delete(a.waiting, idKey(id))
	return ch, ok
}

// endAll closes the channel of every answer awaited: none will come.
func (a *awaitedAnswers) endAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, ch := range a.waiting {
		close(ch)
		delete(a.waiting, key)
	}
}

// runningCalls holds the cancel of each tools/call the proxy runs, by the
// client's id: notifications/cancelled ends a call's wait, and how many
// there are is the calls in flight.
type runningCalls struct {
	mu      sync.Mutex
	cancels map[string]context.CancelCauseFunc
}

func (r *runningCalls) add(id json.RawMessage, cancel context.CancelCauseFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancels == nil {
		r.cancels = map[string]context.CancelCauseFunc{}
	}
	r.cancels[idKey(id)] = cancel
}

func (r *runningCalls) remove(id json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cancels, idKey(id))
}

// cancel ends the wait of the call id, if it runs, with cause.
func (r *runningCalls) cancel(id json.RawMessage, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cancel := r.cancels[idKey(id)]; cancel != nil {
		cancel(cause)
	}
}

func (r *runningCalls) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cancels)
}
