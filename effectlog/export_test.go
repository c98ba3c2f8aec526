package effectlog

// SetGCBeforeDrop makes GC call fn between its read and each drop, until
// the returned function restores it.
func SetGCBeforeDrop(fn func(session string)) (restore func()) {
	gcBeforeDrop = fn
	return func() { gcBeforeDrop = nil }
}
