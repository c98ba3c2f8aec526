package logstore

// Pause lets the external tests stop a Store's committer before their
// directory goes.
func (s *Store) Pause() { s.pause() }
