package pgstore

// Hooks for notify_test.go.

// RecordHeard makes e's listener keep the positions it is notified of.
func RecordHeard(e *Engine) {
	e.listen()
	e.listener.mu.Lock()
	e.listener.record = true
	e.listener.mu.Unlock()
}

// Heard is what e's listener was notified of since RecordHeard.
func Heard(e *Engine) []uint64 {
	e.listener.mu.Lock()
	defer e.listener.mu.Unlock()
	return append([]uint64(nil), e.listener.heard...)
}

// Listening tells whether e's listener is listening, and why its last
// connection attempt failed.
func Listening(e *Engine) (bool, error) {
	e.listener.mu.Lock()
	defer e.listener.mu.Unlock()
	return e.listener.ready, e.listener.lastErr
}

const ListenName = listenName
